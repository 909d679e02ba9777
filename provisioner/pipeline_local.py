"""A pipelined run on the local machine's shared cores: what the stage terms correct, simply.

On AWS every function has its own cores. On the local machine (local_machine.applies) the
S·r workers of a pipelined plan share C cores, and two corrections are made, each depending
only on S and r (never on the cut or a stage's memory), so the exact search's three stage
figures (max slot, max sync, Σ memory) still order the plans (pipeline_search.py):

- start-up: S·r cold starts at once share the init cores (local_machine.cold_start_s);
- the iteration takes at least the CPU its steps need over the C compute cores: every replica
  runs each block's forward and backward on its b_l samples once an iteration, at no more than
  one core's rate, so r·b_l·Σ_b 1/R_b(1 vCPU) / C (local_machine.shared_cpu_iteration_s's form).

And two that depend on a stage's memory only, as the boundary's latency does: a boundary
request's CPU, the client's in the worker's process at its quota share and the S3 server's
(the catalog's s3_request_cpu_s and s3_server_cpu_s, as local_s3.s3_cpu_floor_s reads them);
and a PS sync taking at least one worker's exchange through a loopback shard at the stage's
share (the profile's loop overhead), the figure a search table of (stage size, memory) holds.

Not corrected: the exchanges of the S·r workers and S shards sharing the same cores, crowded
and cold first steps, lockstep waits, the steps of stages computing at once slowing each other
(parallel_speed), and the S3 server's CPU shared by the stages' requests at once.
"""

from __future__ import annotations

import numpy as np

from provisioner import local_machine
from provisioner.catalog import Catalog
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.s3exchange import STEADY_MISSES_PER_WAIT
from provisioner.terms import Arr, local_batch, training_rate_samples_s


def startup_s(profile: WorkloadProfile, catalog: Catalog, functions: int) -> float:
    """A first link's start-up when `functions` workers start at once: the profile's alone on
    AWS, its import slowed by max(1, n/C_init) on the local machine's shared init cores."""
    started = local_machine.crowded_startup_s(profile.startup_s, catalog, np.array([functions]))
    return float(started[0])


def iteration_floor_s(profile: WorkloadProfile, catalog: Catalog, replicas: int) -> float:
    """The least an iteration takes on the local machine's C compute cores: the r replicas'
    blocks' compute at one core each, r·b_l·Σ_b 1/R_b(1) / C (the fastest architecture the
    blocks were profiled on); 0 on AWS (every function has its own cores)."""
    cores = catalog.step_cores
    if not local_machine.applies(catalog) or cores is None or not profile.blocks:
        return 0.0
    one = np.array([1.0])
    b_l = int(local_batch(np.array([replicas]), profile.profiled_local_batch,
                          profile.max_global_batch)[0])  # fmt: skip
    per_sample = []
    for arch in profile.architectures:
        curves = [c for b in profile.blocks if (c := b.rate(arch)) is not None]
        if len(curves) == len(profile.blocks):
            rates = [training_rate_samples_s(c, one, one * catalog.mb_per_vcpu) for c in curves]
            per_sample.append(sum(1.0 / float(r[0]) for r in rates))
    if not per_sample:
        return 0.0
    return replicas * b_l * min(per_sample) / cores


def boundary_side_cpu_s(catalog: Catalog, memory_mb: Arr) -> Arr:
    """The CPU of one boundary side's requests a micro-batch on the local machine (0 on AWS):
    a PUT and a GET that finds its object, and the GET's STEADY_MISSES_PER_WAIT empty polls,
    each the client's CPU at the worker's share (at most one core: one Python thread) and the
    server's. Measured on 2 cores: 83 ms of boundary an iteration for each stage of 2 digits
    stages at 0.145 vCPU, where the latencies alone said 11 (docs/pipeline.md, Locally)."""
    mem = np.asarray(memory_mb, dtype=np.float64)
    client, server = catalog.s3_request_cpu_s, catalog.s3_server_cpu_s
    if not local_machine.applies(catalog) or (client is None and server is None):
        return np.zeros(mem.shape)
    share = np.minimum(vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu), 1.0)
    requests = 2.0 + STEADY_MISSES_PER_WAIT
    with np.errstate(divide="ignore"):
        return np.asarray(requests * ((client or 0.0) / share + (server or 0.0)), dtype=np.float64)


def loopback_sync_floor_s(profile: WorkloadProfile, catalog: Catalog, memory_mb: Arr) -> Arr:
    """The least a stage's PS sync takes an iteration on the local machine (0 on AWS): the
    profile's loop overhead (one worker's exchange through a loopback PS shard, wall, beyond its
    back-to-back step) at the stage's quota share, interpolated, made non-increasing in the
    share (more memory is never slower) and flat beyond the points measured. On loopback the
    exchange is CPU under the quota, not wire; the catalog's bandwidth and round trip say
    0.3 ms where the digits stages measured 12-13 ms an iteration (docs/pipeline.md, Locally).
    A figure of the stage's memory alone, as the boundary's latency is."""
    mem = np.asarray(memory_mb, dtype=np.float64)
    points = profile.loop_overhead
    if not local_machine.applies(catalog) or not points:
        return np.zeros(mem.shape)
    share = vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu)
    xs, ys = zip(*points, strict=True)
    falling = np.minimum.accumulate(np.asarray(ys, dtype=np.float64))
    return np.asarray(np.interp(share, xs, falling), dtype=np.float64)
