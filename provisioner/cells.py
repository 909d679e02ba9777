"""The record types of one evaluation: its inputs (Axis), its per-n terms (NTerms), one
iteration's parts (Step), its time terms (Timeline) and every term and cost item (Cells)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from provisioner.terms import Arr


@dataclass(frozen=True)
class Cells:
    """Every term for a set of (n, m, arch, PS) cells; arrays share one broadcast shape."""

    feasible: Arr
    startup_s: Arr
    local_batch: Arr
    iterations: Arr
    s3_mb_s: Arr
    ps_mb_s: Arr
    load_s: Arr
    compute_per_iteration_s: Arr
    warmup_s: Arr  # the cold processes' slower first steps (compute, once per cold process)
    communication_per_iteration_s: Arr  # mean over the run (PS burst, then baseline)
    burst_iterations: Arr
    aggregation_per_iteration_s: Arr
    iteration_s: Arr
    checkpoint_s: Arr
    checkpoint_every: Arr
    periodic_checkpoint_s: Arr
    iterations_per_invocation: Arr
    invocations: Arr
    ephemeral_mb: Arr
    chaining_s: Arr
    launch_s: Arr
    total_s: Arr
    billed_s: Arr
    lambda_usd: Arr
    requests_usd: Arr
    ephemeral_usd: Arr
    ps_usd: Arr
    sfn_usd: Arr
    s3_usd: Arr
    endpoints_usd: Arr
    total_usd: Arr
    exchange_usd: Arr  # S3 sync: the exchange's requests and storage (0 in a PS cell)
    # The least every item but Lambda compute costs at this cell's memory or any lower one
    # (the search's cost bounds; total_usd − lambda_usd but for the exchange's misses)
    others_floor_usd: Arr


@dataclass(frozen=True)
class Axis:
    """Broadcastable inputs of one evaluation: memory-side, n-side and PS-side arrays."""

    memory_mb: Arr
    rate_samples_s: Arr  # R(m) for this cell's architecture
    usd_per_gb_s: Arr  # this cell's architecture's tier-1 price
    n: Arr
    shard_mb_s: Arr  # baseline bandwidth of one PS shard
    ps_count: Arr
    ps_usd_per_hour: Arr
    core_rate_samples_s: Arr  # R(1 vCPU) for this cell's architecture
    burst_shard_mb_s: Arr  # bandwidth of one PS shard while its credits last
    burst_s: Arr  # seconds of burst of a fresh PS instance
    reducers: Arr  # S3 sync: k reducers; 0 = a PS cell


@dataclass(frozen=True)
class NTerms:
    """The terms that depend on n and the PS option only (not on memory or architecture)."""

    n: Arr
    ps_count: Arr
    local_batch: Arr
    iterations: Arr
    ps_mb_s: Arr
    communication_s: Arr  # per iteration
    aggregation_s: Arr  # per iteration
    exchange_s: Arr  # communication + aggregation, per iteration (baseline PS bandwidth)
    checkpoint_s: Arr
    ephemeral_mb: Arr
    ok: Arr  # b_l ≥ 1 and the shard fits in /tmp
    core_compute_s: Arr  # b_l / R(1 vCPU): the step at full single-core speed
    compute_floor_s: Arr  # b_l / (R(1)·C/n): shared cores (0 when unlimited)
    speed: Arr  # parallel_speed: the compute terms above are already divided by it
    communication_burst_s: Arr  # per iteration while the PS has burst credits
    exchange_burst_s: Arr
    burst_iterations: Arr  # iterations the PS runs at its burst bandwidth (fresh instance)
    startup_s: Arr  # the first link's cold start (cold_start_s)
    # S3 sync (k > 0): the exchange terms above are at the smallest memory (the slowest; the
    # timeline puts them at the cell's memory), checkpoint 0 (the state is in S3 every iteration)
    reducers: Arr
    s3: Arr  # bool: the cell exchanges through S3
    exchange_stored_mb: Arr  # S3 sync: the exchange's objects in S3 at once (0 in a PS cell)

    def flat(self) -> NTerms:
        """Every field broadcast to one shape and flattened, so cells can be taken by index."""
        arrays = np.broadcast_arrays(*(np.asarray(getattr(self, f)) for f in _NTERM_FIELDS))
        return NTerms(*(a.ravel() for a in arrays))

    def take(self, index: Arr) -> NTerms:
        return NTerms(*(getattr(self, f)[index] for f in _NTERM_FIELDS))


_NTERM_FIELDS = tuple(NTerms.__dataclass_fields__)


@dataclass(frozen=True)
class Timeline:
    """The memory-dependent time terms of cells (T and everything it is made of)."""

    s3_mb_s: Arr
    load_s: Arr
    compute_s: Arr  # per iteration, mean over the run
    warmup_s: Arr  # the cold processes' slower first steps, over the whole run
    communication_s: Arr  # per iteration, mean over the run (burst, then baseline)
    aggregation_s: Arr  # per iteration: PS shard or S3 reducer averaging and update
    burst_iterations: Arr  # iterations run at the PS burst bandwidth
    iteration_s: Arr  # compute + exchange + the periodic checkpoint's share
    checkpoint_every: Arr  # iterations between periodic PS checkpoints
    periodic_checkpoint_s: Arr  # per iteration
    iterations_per_invocation: Arr
    invocations: Arr
    chaining_s: Arr
    launch_s: Arr  # the first link's platform start and dispatch (launch_s + restart_s)
    total_s: Arr
    billed_s: Arr
    feasible: Arr


@dataclass(frozen=True)
class Step:
    """One iteration's parts at a cell's memory: what timeline() sums into T."""

    s3_mb_s: Arr  # λDNN's B_s(m)
    transfer_s: Arr  # λDNN's t_load: the shard's bytes from S3
    load_s: Arr  # t_load and the load's CPU part
    throttled_s: Arr  # the compute the profile measured at the memory's share
    core_s: Arr  # the same compute at full single-core speed
    communication_s: Arr  # per iteration at the PS's baseline (or through S3)
    communication_burst_s: Arr  # per iteration while the PS has burst credits
    aggregation_s: Arr
    exchange_s: Arr  # communication + aggregation
    exchange_burst_s: Arr
    step_s: Arr  # compute and exchange under the quota, at the baseline
    step_burst_s: Arr  # the same while the PS bursts
    wait_s: Arr  # for the iteration's slowest rank (none in λDNN's lockstep)
    warmup_s: Arr  # a cold process's slower first steps
    start_s: Arr | float  # the platform's start of a fresh environment
    # the share of the step's wait for the cores (quota, shared cores) a worker times inside
    # its step, the rest in its exchange (local_machine.waits_in_compute); 1 = all of it
    compute_wait_share: Arr | float = 1.0
