"""A cold worker's slower first steps on the local machine's shared cores: the crowd that takes
them at once, the quota that holds them, and the fresh memory they fault in."""

from __future__ import annotations

import numpy as np

from provisioner.catalog import Catalog
from provisioner.cells import NTerms
from provisioner.profile import WorkloadProfile
from provisioner.shared_cores import shared_slowdown
from provisioner.terms import Arr, warmup_steps_s


def crowded_warmup_s(
    n: Arr,
    alone_s: Arr,
    crowd_s: Arr | None,
    processes: int,
    cores: float | None,
    share: Arr | None = None,
) -> Arr:
    """Extension: the wall seconds a cold process's slower first steps add when n workers take
    them at once on C shared cores: each pays w(n) seconds of CPU and n of them share C cores,
    so max(1, n/C) · w(n). w is the excess alone (`alone_s`) up to n = C, the crowd's
    (`crowd_s`, measured with `processes` > C workers) at n = processes, and grows with
    log(n/C) in between and beyond; `alone_s` wherever every function has its own cores (AWS:
    cores None). A first step faults its memory in, and the kernel's time for that grows with
    the processes taking turns on the cores: MobileNetV2's first step at batch 32 spent 0.51 s
    in the kernel alone, 0.48 s in 2, 1.13 s in 4 and 1.7 s in 8 on 2 cores (0.5 + 0.6 per
    doubling of n/C; the user time and the steps after it did not grow), so 8 workers on 2
    cores spent 6-9 s on their first steps where the warm-up alone predicted under 1 s
    (bench/results/fixed-cost.md).

    The excess is CPU, so under the worker's quota (`share` vCPU, None: not held) it runs at no
    more than that share: the wall is w(n) over the cores a worker gets, min(1, share, C/n)
    (one core at most: a first step's page faults and lazy set-up are one thread's). Sharing
    alone, max(1, n/C), said 2.5× for 5 MobileNetV2 workers at 0.3 vCPU each, where each
    worker's quota held its first step to 0.3 of a core (3.3×); where the quota is 1 vCPU or
    more, or the sharing holds a worker below it, the two agree."""
    n = np.asarray(n, dtype=np.float64)
    alone = np.asarray(alone_s, dtype=np.float64)
    if cores is None:
        return np.broadcast_to(alone, np.broadcast_shapes(n.shape, alone.shape)).copy()
    excess = alone
    if crowd_s is not None and processes > cores:
        doublings = np.log(np.maximum(n, cores) / cores) / np.log(processes / cores)
        excess = alone + np.maximum(0.0, np.asarray(crowd_s) - alone) * doublings
    return warmup_slowdown(n, cores, share) * excess


def warmup_slowdown(n: Arr, cores: float, share: Arr | None) -> Arr:
    """Wall seconds per CPU second of a cold first step's excess when n workers take it at once
    on C shared cores, each held to `share` vCPU by its quota (None: not held): 1 / min(1,
    share, C/n), i.e. max(1, 1/share, n/C)."""
    slowdown = shared_slowdown(n, cores)
    if share is None:
        return slowdown
    with np.errstate(divide="ignore"):
        held = 1.0 / np.asarray(share, dtype=np.float64)
    return np.maximum(slowdown, held)


def warmup_s(profile: WorkloadProfile, catalog: Catalog, nt: NTerms, share: Arr) -> Arr:
    """A cold process's slower first steps (crowded_warmup_s) at the worker's vCPU `share`, in
    steps of the one-vCPU step (terms.warmup_steps_s)."""

    def steps_s(steps: float) -> Arr:
        return warmup_steps_s(steps, nt.core_compute_s)

    crowd = profile.crowded_warmup_iterations
    cores = catalog.step_cores
    crowded = crowded_warmup_s(
        nt.n,
        steps_s(profile.warmup_iterations),
        None if crowd is None else steps_s(crowd),
        profile.crowded_processes,
        cores,
        share,
    )
    if cores is None:
        return crowded
    fresh = fresh_memory_excess_cpu_s(nt.n, nt.local_batch, profile, catalog)
    return np.asarray(crowded + warmup_slowdown(nt.n, cores, share) * fresh, dtype=np.float64)


def fresh_memory_excess_cpu_s(
    n: Arr, local_batch: Arr, profile: WorkloadProfile, catalog: Catalog
) -> Arr:
    """Extension: the kernel CPU a worker's first step spends beyond its cost alone when the n
    cold workers' memory crosses the machine's fresh-memory line (catalog.fresh_memory_warm_mb:
    on a VM, memory the guest did not use lately costs more to fault in, as the host backs it
    then). Each worker holds its resident set (runtime and model) and its shard before its first
    step and faults in the step's memory (the profile's, in proportion to the local batch) during
    it; of the first steps' n·step MB, those past the line cost (cold − warm) s/MB more, shared
    out over the n workers. 0 where the catalog has no line (AWS: each function has its own
    memory) or the profile did not measure its memory.

    Measured on 2 cores (bench.lab.one_case, MobileNetV2 at batch 32): alone a first step
    faulted in about 650 MB in 0.29 s of kernel CPU; 8 at once held about 8 GB against a line
    at 5.5 GB and spent 0.29-1.05 s each, the last to fault the most."""
    n = np.asarray(n, dtype=np.float64)
    batch = np.asarray(local_batch, dtype=np.float64)
    shape = np.broadcast_shapes(n.shape, batch.shape)
    resident_mb, first_mb = profile.resident_mb, profile.first_step_mb
    warm_mb, warm_s_per_mb = catalog.fresh_memory_warm_mb, catalog.fault_warm_s_per_mb
    cold_s_per_mb = catalog.fault_cold_s_per_mb
    if (
        resident_mb is None
        or first_mb is None
        or warm_mb is None
        or warm_s_per_mb is None
        or cold_s_per_mb is None
    ):
        return np.zeros(shape)
    step_mb = first_mb * batch / profile.profiled_local_batch
    shard_mb = profile.dataset_bytes / 2**20 / n
    held_mb = n * (resident_mb + shard_mb + step_mb)
    past_mb = np.clip(held_mb - warm_mb, 0.0, n * step_mb)
    extra = max(0.0, cold_s_per_mb - warm_s_per_mb)
    return np.broadcast_to(past_mb * extra / n, shape).copy()
