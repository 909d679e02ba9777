"""The pipelined model: a stage's slot, memory and sync, and a pipelined run's time and cost.

A stage is a contiguous block range [a, b) of the profile's blocks (provisioner/blocks_profile)
on r functions of one memory. Per iteration GPipe runs M forwards then M backwards through the
S stages, so the iteration takes (M + S − 1)·max_s slot_s + max_s sync_s (docs/pipeline.md),
where a slot is a stage's forward + backward of one micro-batch plus its boundary transfers
through S3, and a stage's sync is today's exchange (PS or S3 with k reducers) over its own
parameters. The run around the iterations (load, start-up, links, chaining) and its prices are
today's terms (provisioner/terms.py, costs.py, s3exchange.py) with the worker count S·r.

Three figures are priced where they cannot depend on the cut or a stage's memory, so that the
plan's time and cost depend on the stages only through (max slot, max sync, Σ stage memory),
which the exact search (provisioner/pipeline_search.py) relies on: the dataset shard's load at
the catalog's smallest memory's S3 bandwidth, a link's PS checkpoint at the whole model's bytes
and every stage's /tmp at the whole model's checkpoint pair. Each is an upper bound of its
per-stage figure, so a pipelined plan never runs longer or costs more than predicted for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from provisioner import pipeline_local
from provisioner.blocks_profile import BlockProfile
from provisioner.catalog import Catalog, gbps_to_mb_s
from provisioner.costs import (
    endpoints_usd,
    ephemeral_usd,
    lambda_compute_usd,
    ps_usd,
    requests_usd,
    s3_exchange_usd,
    s3_requests_usd,
    step_functions_usd,
)
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.s3exchange import STEADY_MISSES_PER_WAIT, s3_exchange_terms
from provisioner.terms import (
    MIB,
    Arr,
    aggregation_time_s,
    checkpoint_every_iterations,
    checkpoint_interval_s,
    checkpoint_time_s,
    communication_time_s,
    ephemeral_storage_mb,
    invocations,
    iterations_per_invocation,
    load_overhead_s,
    load_time_s,
    periodic_checkpoint_s,
    ps_bandwidth_mb_s,
    s3_bandwidth_mb_s,
    training_rate_samples_s,
)

# What a worker holds per parameter byte: weights, gradients, SGD momentum and the flat vector
# the exchange sends (functions.exchange flattens the gradients into one buffer).
PARAMETER_COPIES = 4
# Boundary buffers beside the tensors: one micro-batch's received activation and outgoing
# gradient (and the reverse) exist as bytes while they are read or written.
BOUNDARY_BUFFERS = 2


@dataclass(frozen=True)
class SyncRoute:
    """How a stage syncs: through `ps_count` shards of a PS type, or S3 with `reducers` k."""

    sync: str  # "ps" or "s3"
    ps_type: str = ""
    ps_count: int = 0
    reducers: int = 0


def stage_compute_per_micro_s(
    blocks: tuple[BlockProfile, ...], arch: str, micro_batch: int, share: Arr, memory_mb: Arr
) -> Arr:
    """λDNN t_comp = b / R(m) per block, summed over the stage: Σ_b micro / R_b(share(m)), a
    block's rate read at the function's share as the profile's own (training_rate_samples_s)."""
    total = np.zeros(np.shape(memory_mb), dtype=np.float64)
    for block in blocks:
        curve = block.rate(arch)
        if curve is None:
            raise ValueError(f"block {block.name!r} has no training rate for {arch}")
        with np.errstate(divide="ignore"):
            total = total + micro_batch / training_rate_samples_s(curve, share, memory_mb)
    return total


def stage_memory_needed_mb(
    runtime_mb: int,
    parameter_bytes: Arr | int,
    activation_bytes_per_sample: Arr | int,
    boundary_bytes_per_sample: Arr | int,
    local_batch: int,
    micro_batch: int,
) -> Arr:
    """Memory a stage's worker needs (MB, whole; per stage where given arrays): the runtime,
    PARAMETER_COPIES of its parameters, every micro-batch's saved activations (GPipe keeps all
    M until their backwards: local_batch samples' worth) and one micro-batch's boundary buffers
    in and out."""
    need = (
        PARAMETER_COPIES * np.asarray(parameter_bytes, dtype=np.int64)
        + local_batch * np.asarray(activation_bytes_per_sample, dtype=np.int64)
        + BOUNDARY_BUFFERS * micro_batch * np.asarray(boundary_bytes_per_sample, dtype=np.int64)
    )
    return runtime_mb + np.ceil(need / MIB).astype(np.int64)


def boundary_transfer_s(catalog: Catalog, in_bytes: float, out_bytes: float, memory_mb: Arr) -> Arr:
    """A stage's S3 transfers of one micro-batch, each one request latency plus its bytes over
    B_s(m) (s3_communication_s's pricing): forward, GET the activation in and PUT the one out;
    backward, GET the gradient of its output and PUT the gradient of its input (the same sizes).
    `in_bytes` is 0 for the first stage, `out_bytes` for the last. On the local machine each
    side's requests also cost their CPU (pipeline_local.boundary_side_cpu_s)."""
    get_mb_s = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    put_mb_s = get_mb_s if catalog.s3_put_mb_s is None else catalog.s3_put_mb_s
    total = np.zeros(np.shape(get_mb_s))
    for size in (in_bytes, out_bytes):
        if size > 0:
            mb = size / 1e6
            total = total + catalog.s3_request_s + mb / get_mb_s
            total = total + catalog.put_latency_s + mb / put_mb_s
            total = total + pipeline_local.boundary_side_cpu_s(catalog, memory_mb)
    return total


def stage_sync_s(
    profile: WorkloadProfile,
    catalog: Catalog,
    route: SyncRoute,
    parameter_bytes: int,
    replicas: int,
    memory_mb: Arr,
) -> Arr:
    """A stage's exchange among its r replicas per iteration: today's terms over the stage's
    parameters, the PS's at its baseline bandwidth (λDNN t_comm + aggregation) or the S3
    exchange's at the stage's memory (s3_cell_terms on the stage's parameters). On the
    local machine a PS sync takes at least the profile's loop overhead at the stage's share
    (pipeline_local.loopback_sync_floor_s). The one-stage case of stage_syncs_s."""
    mem = np.asarray(memory_mb, dtype=np.float64)
    row = stage_syncs_s(profile, catalog, route, np.array([parameter_bytes]), replicas, mem)[0]
    return np.asarray(row.reshape(mem.shape), dtype=np.float64)


def stage_syncs_s(
    profile: WorkloadProfile,
    catalog: Catalog,
    route: SyncRoute,
    parameter_bytes: Arr,
    replicas: int,
    memory_mb: Arr,
) -> Arr:
    """stage_sync_s for many stages at once: (stages, memories), row i the sync of a stage of
    parameter_bytes[i] (the pipelined search prices every stage size of a route in one call)."""
    mem = np.asarray(memory_mb, dtype=np.float64).reshape(-1)
    r = np.array([replicas])
    params = np.asarray(parameter_bytes, dtype=np.int64)[:, np.newaxis]
    if route.sync == "s3":
        model_mb = np.maximum(params, 1) / 1e6
        comm, agg = s3_exchange_terms(profile, catalog, r, np.array([route.reducers]), model_mb,
                                      mem)  # fmt: skip
        return np.asarray(np.broadcast_to(comm + agg, (params.shape[0], mem.size)), np.float64)
    ps = catalog.ps_type(route.ps_type)
    mb: Any = params / 1e6  # element-wise: the terms are typed for one model size
    bw = ps_bandwidth_mb_s(
        r, catalog.function_ps_mb_s, _a(ps.baseline_mb_s), _a(route.ps_count),
        gbps_to_mb_s(catalog.per_flow_cap_gbps),
    )  # fmt: skip
    t = communication_time_s(mb, bw, catalog.function_ps_rtt_s) + aggregation_time_s(
        r, mb, _a(route.ps_count), profile.ps_aggregation_mb_s_per_core
    )
    floor = pipeline_local.loopback_sync_floor_s(profile, catalog, mem)
    table = np.maximum(np.broadcast_to(t, (params.shape[0], mem.size)), floor)
    return np.asarray(table, dtype=np.float64)


@dataclass(frozen=True)
class StageFigures:
    """One stage's figures at one memory: compute and boundary of one micro-batch, its sync per
    iteration, its memory need."""

    compute_s: float
    boundary_s: float
    sync_s: float
    need_mb: int


def stage_figures(
    profile: WorkloadProfile,
    catalog: Catalog,
    arch: str,
    route: SyncRoute,
    replicas: int,
    micro_batches: int,
    local_batch: int,
    first: int,
    stop: int,
    memory_mb: int,
) -> StageFigures:
    """Blocks [first, stop) as a stage at `memory_mb`, one stage at a time from the model's
    functions (the search prices every range at once: pipeline_tables.stage_tables). Stage 0's
    input comes with the shard and the last stage hands nothing on."""
    blocks, micro = profile.blocks[first:stop], local_batch // micro_batches
    mem = np.array([memory_mb], dtype=np.float64)
    share = vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu)
    comp = float(stage_compute_per_micro_s(blocks, arch, micro, share, mem)[0])
    in_sample = 0 if first == 0 else profile.blocks[first - 1].output_bytes_per_sample
    out_sample = 0 if stop == len(profile.blocks) else blocks[-1].output_bytes_per_sample
    bnd = float(boundary_transfer_s(catalog, micro * in_sample, 0.0, mem)[0]) + float(
        boundary_transfer_s(catalog, 0.0, micro * out_sample, mem)[0]
    )
    params = sum(b.parameter_bytes for b in blocks)
    acts = sum(b.activation_bytes_per_sample for b in blocks)
    sync = float(stage_sync_s(profile, catalog, route, params, replicas, mem)[0])
    need = stage_memory_needed_mb(
        profile.runtime_memory_mb or 0, params, acts, in_sample + out_sample, local_batch, micro
    )
    return StageFigures(comp, bnd, sync, int(need))


def iteration_s(micro_batches: int, stages: int, max_slot_s: float, max_sync_s: float) -> float:
    """GPipe's iteration: (M + S − 1) slots of the slowest stage, then the slowest stage sync."""
    return (micro_batches + stages - 1) * max_slot_s + max_sync_s


@dataclass(frozen=True)
class RunShape:
    """What a pipelined run's time and cost depend on besides its stages' three figures."""

    stages: int
    replicas: int
    micro_batches: int
    iterations: int
    usd_per_gb_s: float
    route: SyncRoute
    ps_usd_per_hour: float


@dataclass(frozen=True)
class RunFigures:
    """A pipelined run's predicted time and its cost items (inf where it cannot run)."""

    iteration_s: float
    total_s: float
    billed_s: float
    load_s: float
    links: int
    iterations_per_invocation: int
    checkpoint_s: float
    checkpoint_every: int
    lambda_usd: float
    requests_usd: float
    ephemeral_usd: float
    ps_usd: float
    sfn_usd: float
    s3_usd: float
    endpoints_usd: float
    exchange_usd: float
    boundary_usd: float
    total_usd: float
    ephemeral_mb: int
    # The first link's start-up of S·r workers at once, and the least an iteration takes on
    # the local machine's shared cores (0 on AWS): pipeline_local.py.
    startup_s: float = 0.0
    iteration_floor_s: float = 0.0


def boundary_requests(shape: RunShape) -> tuple[float, float]:
    """(PUTs, GETs that find their object) per iteration at the boundaries: one of each per
    micro-batch, boundary, direction and replica (the DELETEs are free)."""
    count = float(shape.micro_batches * (shape.stages - 1) * 2 * shape.replicas)
    return count, count


def run_figures(
    profile: WorkloadProfile,
    catalog: Catalog,
    shape: RunShape,
    max_slot_s: float,
    max_sync_s: float,
    memory_sum_mb: int,
) -> RunFigures:
    """T and its costs for a pipelined run (model.timeline and model.costs' terms, with S·r
    functions): start-up and the shard's load, iterations until an invocation's usable time is
    spent, a checkpoint per link, chaining; every stage billed for the run's billed time. On
    the local machine the start-up and the iteration are corrected for the shared cores
    (pipeline_local.py), by figures of S and r alone."""
    s, r, k = shape.stages, shape.replicas, shape.iterations
    ps = shape.route.sync == "ps"
    floor = pipeline_local.iteration_floor_s(profile, catalog, r)
    it = max(iteration_s(shape.micro_batches, s, max_slot_s, max_sync_s), floor)
    startup = pipeline_local.startup_s(profile, catalog, s * r)
    model_mb = profile.model_bytes / 1e6
    low = np.array([catalog.memory_min_mb])
    s3_low = s3_bandwidth_mb_s(
        low, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share_low = low / catalog.mb_per_vcpu
    load = float(
        load_time_s(profile.dataset_bytes / 1e6, np.array([r]), s3_low)[0]
        + load_overhead_s(catalog.load_cpu_s, share_low, np.array([r]), None)[0]
    )
    checkpoint = (
        float(checkpoint_time_s(model_mb, np.array([shape.route.ps_count]), catalog.ps_s3_mb_s,
                                catalog.checkpoint_latency_s)[0])
        if ps else 0.0
    )  # fmt: skip
    interval = checkpoint_interval_s(
        np.array([checkpoint]), catalog.checkpoint_max_loss_s, catalog.checkpoint_max_overhead
    )
    every = int(checkpoint_every_iterations(np.array([it]), interval)[0])
    step = it + float(periodic_checkpoint_s(np.array([checkpoint]), np.array([every]))[0])
    usable = catalog.invocation_timeout_s - catalog.safety_margin_s
    link_overhead = startup + load
    per_inv = int(
        iterations_per_invocation(usable, np.array([link_overhead + checkpoint]),
                                  np.array([step]), np.array([k]))[0]
    )  # fmt: skip
    if catalog.max_iterations_per_invocation > 0:
        per_inv = min(per_inv, catalog.max_iterations_per_invocation)
    links = int(invocations(np.array([k]), np.array([per_inv]))[0])
    eph = int(
        ephemeral_storage_mb(profile.dataset_bytes, np.array([r]), profile.model_bytes,
                             catalog.ephemeral_min_mb)[0]
    )  # fmt: skip
    feasible = per_inv >= 1 and eph <= catalog.ephemeral_max_mb and np.isfinite(it)
    relink = link_overhead if catalog.warm_start_s is None else catalog.warm_start_s
    chaining = links * checkpoint + (links - 1) * (catalog.restart_s + relink)
    setup = catalog.run_setup_s if ps else 0.0
    launch = catalog.launch_s + catalog.restart_s
    total = setup + launch + link_overhead + k * step + chaining if feasible else np.inf
    billed = total - setup - links * catalog.restart_s
    if not feasible:
        inf = float("inf")
        return RunFigures(it, inf, inf, load, links, per_inv, checkpoint, every,
                          inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, eph, startup,
                          floor)  # fmt: skip
    items = run_costs(catalog, shape, memory_sum_mb, total, billed, links, every, eph)
    lam, req, ephc, psc, sfn, s3c, net, exch, bnd = items
    cost = sum(items)
    return RunFigures(
        iteration_s=it, total_s=float(total), billed_s=float(billed), load_s=load, links=links,
        iterations_per_invocation=per_inv, checkpoint_s=checkpoint, checkpoint_every=every,
        lambda_usd=lam, requests_usd=req, ephemeral_usd=ephc, ps_usd=psc, sfn_usd=sfn,
        s3_usd=s3c, endpoints_usd=net, exchange_usd=exch, boundary_usd=bnd, total_usd=cost,
        ephemeral_mb=eph, startup_s=startup, iteration_floor_s=floor,
    )  # fmt: skip


def _a(x: float) -> Arr:
    return np.array([x], dtype=np.float64)


def run_costs(
    catalog: Catalog,
    shape: RunShape,
    memory_sum_mb: int,
    total_s: float,
    billed_s: float,
    links: int,
    every: int,
    ephemeral_mb: int,
) -> tuple[float, ...]:
    """The cost items of a feasible pipelined run (model.costs' items with S·r functions, S
    stages' PS shards and exchanges) and its boundary requests: Lambda compute, requests, /tmp,
    PS, Step Functions, S3 requests, endpoints, the stages' S3 exchanges, the boundaries."""
    s, r, k = shape.stages, shape.replicas, shape.iterations
    ps = shape.route.sync == "ps"
    fn, lk, billed, total = _a(s * r), _a(links), _a(billed_s), _a(total_s)
    shards = _a(s * shape.route.ps_count)
    lam = lambda_compute_usd(_a(shape.usd_per_gb_s), _a(memory_sum_mb), _a(r), billed)
    req = requests_usd(catalog.usd_per_request, fn, lk)
    ephc = ephemeral_usd(
        catalog.ephemeral_usd_per_gb_s, _a(ephemeral_mb), catalog.ephemeral_free_mb, fn, billed
    )
    psc = ps_usd(_a(shape.ps_usd_per_hour), shards, total, catalog.ps_min_billed_s)
    sfn = step_functions_usd(
        catalog.sfn_usd_per_transition, catalog.sfn_fixed_transitions,
        catalog.sfn_transitions_per_invocation, fn, lk,
    )  # fmt: skip
    s3c = s3_requests_usd(
        catalog.s3_usd_per_get, catalog.s3_usd_per_put, fn, lk, shards, _a(np.floor(k / every))
    )
    net = endpoints_usd(catalog.endpoint_usd_per_hour, len(catalog.interface_endpoints), total)
    exch = _a(0.0)
    if not ps:  # every stage's exchange, its waits at the steady rate of missed polls
        kk = shape.route.reducers
        misses = 2.0 * r * kk * STEADY_MISSES_PER_WAIT
        exch = s * s3_exchange_usd(
            catalog.s3_usd_per_get, catalog.s3_usd_per_put, _a(r), _a(kk), _a(k), misses
        )
    puts, gets = boundary_requests(shape)
    # a boundary object's reader polls as the exchange's waits do: STEADY_MISSES_PER_WAIT misses
    bnd = k * (
        catalog.s3_usd_per_put * puts
        + catalog.s3_usd_per_get * gets * (1.0 + STEADY_MISSES_PER_WAIT)
    )
    return (
        float(lam[0]), float(req[0]), float(ephc[0]), float(psc[0]), float(sfn[0]),
        float(s3c[0]), float(net[0]) if ps else 0.0, float(exch[0]), float(bnd),
    )  # fmt: skip
