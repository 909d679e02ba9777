"""The performance and cost model's assembly: λDNN's equation over a grid of cells.

T = t_load + k·(t_comp + t_comm) (λDNN, Xu et al., IEEE TC 71(2), 2022, §3), extended with the
PS's aggregation, checkpoints, start-up and the chain of invocations, then priced. The terms are
small pure functions in their own modules (terms, quota, s3exchange, costs); here they are put
together per n (n_terms), per memory (timeline) and priced (costs). A cell exchanges gradients
through EC2 parameter servers (λDNN) or, with k > 0 reducers, through S3 (s3exchange).
"""

from __future__ import annotations

import numpy as np

from provisioner import local_machine
from provisioner.catalog import Catalog, gbps_to_mb_s
from provisioner.cells import Axis, Cells, NTerms, Step, Timeline
from provisioner.costs import (
    endpoints_usd,
    ephemeral_usd,
    lambda_compute_usd,
    pace_checks_usd,
    ps_usd,
    requests_usd,
    s3_exchange_usd,
    s3_requests_usd,
    s3_storage_usd,
    step_functions_usd,
)
from provisioner.profile import WorkloadProfile
from provisioner.quota import bsp_steps_s, vcpu_share
from provisioner.s3exchange import (
    s3_cell_misses,
    s3_cell_terms,
    s3_exchange_stored_mb,
    s3_exchanged_model_mb,
    s3_link_checkpoint_s,
    s3_state_read_s,
)
from provisioner.terms import (
    Arr,
    aggregation_time_s,
    burst_iterations,
    checkpoint_every_iterations,
    checkpoint_interval_s,
    checkpoint_time_s,
    communication_time_s,
    compute_time_s,
    ephemeral_storage_mb,
    invocations,
    iterations,
    iterations_per_invocation,
    load_overhead_s,
    load_time_s,
    local_batch,
    periodic_checkpoint_s,
    ps_bandwidth_mb_s,
    s3_bandwidth_mb_s,
    two_rate_mean,
    warmup_steps_s,
)


def n_terms(
    profile: WorkloadProfile,
    catalog: Catalog,
    n: Arr,
    shard_mb_s: Arr,
    ps_count: Arr,
    *,
    core_rate_samples_s: Arr,
    burst_shard_mb_s: Arr,
    burst_s: Arr,
    reducers: Arr | None = None,
) -> NTerms:
    """λDNN's batch rule, k and t_comm, plus PS aggregation, checkpoint and /tmp size, per n;
    the step at full core speed and t_comm while the PS bursts. Cells with reducers k > 0
    exchange through S3 (no PS): see s3_cell_terms. On the local machine's shared cores the
    terms are then corrected (local_machine.corrected_n_terms)."""
    model_mb = profile.model_bytes / 1e6
    k_red = np.zeros(1, dtype=np.int64) if reducers is None else np.asarray(reducers)
    s3_sync = k_red > 0
    shards = np.maximum(ps_count, 1)  # an S3 cell has no shard: its PS terms are replaced
    b_l = local_batch(n, profile.profiled_local_batch, profile.max_global_batch)
    k = iterations(profile.dataset_samples, profile.epochs, n * b_l)
    flow_cap = gbps_to_mb_s(catalog.per_flow_cap_gbps)
    bw = ps_bandwidth_mb_s(n, catalog.function_ps_mb_s, shard_mb_s, shards, flow_cap)
    with np.errstate(divide="ignore"):  # an S3 cell's PS bandwidth is 0; replaced below
        comm = communication_time_s(model_mb, bw, catalog.function_ps_rtt_s)
        # a burst never slows the PS down (a catalog peak below the baseline counts as the
        # baseline)
        burst_bw = ps_bandwidth_mb_s(
            n, catalog.function_ps_mb_s, np.maximum(burst_shard_mb_s, shard_mb_s), shards, flow_cap
        )
        comm_burst = communication_time_s(model_mb, burst_bw, catalog.function_ps_rtt_s)
    agg = aggregation_time_s(n, model_mb, shards, profile.ps_aggregation_mb_s_per_core)
    eph = ephemeral_storage_mb(
        profile.dataset_bytes, n, profile.model_bytes, catalog.ephemeral_min_mb
    )
    checkpoint = checkpoint_time_s(
        model_mb, shards, catalog.ps_s3_mb_s, catalog.checkpoint_latency_s
    )
    ok = (b_l >= 1) & (eph <= catalog.ephemeral_max_mb)
    stored = np.zeros(1)
    if np.any(s3_sync):
        # upper bounds over memory (B_s(m) and the reducer's rate grow with m); exact per cell
        # in the timeline
        s3_comm, s3_agg = s3_cell_terms(
            profile, catalog, n, k_red, np.asarray(catalog.memory_min_mb)
        )
        comm = np.where(s3_sync, s3_comm, comm)
        comm_burst = np.where(s3_sync, s3_comm, comm_burst)
        agg = np.where(s3_sync, s3_agg, agg)
        bw = np.where(s3_sync, 0.0, bw)
        # no periodic checkpoint: the reducers checkpoint at a link's end only (link_end_s)
        checkpoint = np.where(s3_sync, 0.0, checkpoint)
        ok = ok & (~s3_sync | (k_red <= n))
        stored = np.where(s3_sync, s3_exchange_stored_mb(n, model_mb), 0.0)
    terms = NTerms(
        n=np.asarray(n),
        ps_count=np.asarray(ps_count),
        local_batch=b_l,
        iterations=k,
        ps_mb_s=bw,
        communication_s=comm,
        aggregation_s=agg,
        exchange_s=comm + agg,
        checkpoint_s=checkpoint,
        ephemeral_mb=eph,
        ok=ok,
        core_compute_s=compute_time_s(b_l, core_rate_samples_s),
        compute_floor_s=np.zeros(np.shape(b_l)),  # every function has its own cores
        speed=np.ones(np.shape(b_l)),
        communication_burst_s=comm_burst,
        exchange_burst_s=comm_burst + agg,
        burst_iterations=burst_iterations(burst_s, comm_burst, k),
        startup_s=np.full(np.shape(n), profile.startup_s, dtype=np.float64),
        reducers=k_red,
        s3=s3_sync,
        exchange_stored_mb=stored,
    )
    if local_machine.applies(catalog):
        terms = local_machine.corrected_n_terms(
            terms, profile, catalog, core_rate_samples_s, burst_s
        )
    return terms


def step_terms(
    profile: WorkloadProfile, catalog: Catalog, nt: NTerms, memory_mb: Arr, rate_samples_s: Arr
) -> Step:
    """λDNN's t_load and t_comp + t_comm at the cells' memory, the step under the CPU quota
    (quota.bsp_steps_s) and a cold process's first steps; the S3 exchange at this memory
    (n_terms holds its slowest)."""
    s3 = s3_bandwidth_mb_s(
        memory_mb, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    share = vcpu_share(memory_mb, catalog.mb_per_vcpu, catalog.max_vcpu)
    transfer = load_time_s(profile.dataset_bytes / 1e6, nt.n, s3)
    throttled = compute_time_s(nt.local_batch, rate_samples_s)
    comm_base, agg = nt.communication_s, nt.aggregation_s
    exch_base, exch_burst, comm_burst = nt.exchange_s, nt.exchange_burst_s, nt.communication_burst_s
    if np.any(nt.s3):
        s3_comm, s3_agg = s3_cell_terms(profile, catalog, nt.n, nt.reducers, memory_mb)
        comm_base = np.where(nt.s3, s3_comm, comm_base)
        agg = np.where(nt.s3, s3_agg, agg)
        exch_base = np.where(nt.s3, s3_comm + s3_agg, exch_base)
        exch_burst = np.where(nt.s3, exch_base, exch_burst)
        comm_burst = np.where(nt.s3, s3_comm, nt.communication_burst_s)
    # the exchange's CPU: the catalog's share of its wall time
    cpu_share = catalog.exchange_cpu_fraction
    step_base, step_burst = bsp_steps_s(
        nt.core_compute_s, throttled, exch_base, exch_burst,
        cpu_share * comm_base, cpu_share * comm_burst, share, catalog.cpu_throttle_period_s,
    )  # fmt: skip
    alone = warmup_steps_s(profile.warmup_iterations, nt.core_compute_s)
    return Step(
        s3_mb_s=s3,
        transfer_s=transfer,
        load_s=transfer + load_overhead_s(catalog.load_cpu_s, share, nt.n, None),
        throttled_s=throttled,
        core_s=nt.core_compute_s,
        communication_s=comm_base,
        communication_burst_s=comm_burst,
        aggregation_s=agg,
        exchange_s=exch_base,
        exchange_burst_s=exch_burst,
        step_s=step_base,
        step_burst_s=step_burst,
        wait_s=np.zeros(()),
        warmup_s=np.broadcast_to(alone, np.broadcast_shapes(np.shape(nt.n), alone.shape)).copy(),
        start_s=catalog.launch_s,
    )


def link_end_s(profile: WorkloadProfile, catalog: Catalog, nt: NTerms, st: Step) -> tuple[Arr, Arr]:
    """(the checkpoint at a link's end, a re-invoked link's read of the trained state) per cell.

    The PS checkpoints at a link's end as it does periodically (nt.checkpoint_s); the S3
    exchange's reducers only there (s3_link_checkpoint_s). A re-invoked worker reads the trained
    state before its first step: the PS's pull, half of its push-and-pull exchange, or the S3
    states (s3_state_read_s), the n workers at once on shared cores. Measured on 2 cores,
    MobileNetV2 8 × 2,048 MB with three shards, one link an iteration: 0.02-0.38 s a relink's
    read, where only the calibration's warm start (5 ms) was priced.
    """
    pull = st.communication_s / 2.0
    if not np.any(nt.s3):
        return nt.checkpoint_s, pull
    model_mb = profile.model_bytes / 1e6
    shared = local_machine.applies(catalog)
    checkpoint = s3_link_checkpoint_s(
        model_mb, nt.reducers, catalog.ps_s3_mb_s, st.s3_mb_s, catalog.checkpoint_latency_s,
        catalog.s3_request_s, shared_host=shared,
    )  # fmt: skip
    read = s3_state_read_s(model_mb, st.s3_mb_s, catalog.s3_request_s)
    if shared:
        read = local_machine.shared_exchange_s(read, nt.n, catalog.total_vcpu)
    return np.where(nt.s3, checkpoint, nt.checkpoint_s), np.where(nt.s3, read, pull)


def timeline(
    profile: WorkloadProfile, catalog: Catalog, nt: NTerms, memory_mb: Arr, rate_samples_s: Arr
) -> Timeline:
    """T = t_load + k·(t_comp + t_comm) (λDNN) + aggregation, start-up and chaining.

    The worker's timeline: start-up and shard load, then iterations until the invocation's usable
    time (timeout − safety margin) is spent, a PS checkpoint, and a new link (restart, start-up
    and shard reload, assuming a cold environment) until k iterations are done. t_comp is the
    CPU-quota one (cfs_step_s); the first iterations, while the PS has burst credits, exchange
    at the burst bandwidth, the rest at the baseline. On the local machine's shared cores the
    step's parts are corrected first (local_machine.corrected_step).
    """
    st = step_terms(profile, catalog, nt, memory_mb, rate_samples_s)
    if local_machine.applies(catalog):
        st = local_machine.corrected_step(st, profile, catalog, nt, memory_mb, rate_samples_s)
    k_burst = nt.burst_iterations
    step = two_rate_mean(nt.iterations, k_burst, st.step_burst_s, st.step_s)
    exchange = two_rate_mean(nt.iterations, k_burst, st.exchange_burst_s, st.exchange_s) + st.wait_s
    comm = (
        two_rate_mean(nt.iterations, k_burst, st.communication_burst_s, st.communication_s)
        + st.wait_s
    )
    comp = step - exchange
    # The step beyond its time at one full core is a wait for the cores (the quota's, the other
    # workers'); the part the scheduler serves after the step, where the worker wakes in its
    # exchange, is timed there (local_machine.waits_in_compute; none on AWS).
    with np.errstate(invalid="ignore"):
        moved = (1.0 - st.compute_wait_share) * np.maximum(comp - nt.core_compute_s, 0.0)
    comp, comm = comp - moved, comm + moved
    interval = checkpoint_interval_s(
        nt.checkpoint_s, catalog.checkpoint_max_loss_s, catalog.checkpoint_max_overhead
    )
    every = checkpoint_every_iterations(step, interval)
    periodic = periodic_checkpoint_s(nt.checkpoint_s, every)
    it = step + periodic
    usable = catalog.invocation_timeout_s - catalog.safety_margin_s
    link_overhead = nt.startup_s + st.load_s
    link_checkpoint, state_read = link_end_s(profile, catalog, nt, st)
    # A cold process's slower first steps, at the one-vCPU step: a figure per n like start-up,
    # so T(m) keeps its shape in memory (the budget search's bisection relies on it).
    warmup = st.warmup_s
    per_inv = iterations_per_invocation(
        usable, link_overhead + warmup + state_read + link_checkpoint, it, nt.iterations
    )
    if catalog.max_iterations_per_invocation > 0:
        per_inv = np.minimum(per_inv, catalog.max_iterations_per_invocation)
    if catalog.max_link_s > 0:
        # Links cut for pace checks: a link trains at most max_link_s, so checks come at least
        # that often in training time. Its fixed part is not held to it: a first link's cold
        # start may alone exceed a short deadline's tenth while re-invocations start warm.
        # Each extra link is priced below like any chained one.
        with np.errstate(divide="ignore", invalid="ignore"):
            paced = np.floor(catalog.max_link_s / it)
        per_inv = np.minimum(per_inv, np.where(np.isfinite(paced), paced, 0).astype(np.int64))
    links = invocations(nt.iterations, per_inv)
    feasible = (per_inv >= 1) & nt.ok
    # A re-invocation's start-up: cold (imports, shard reload, warm-up) unless the platform
    # says the next link lands on the previous link's warm environment, as the emulator's do;
    # either way it reads the trained state back (state_read).
    cold_relinks = catalog.warm_start_s is None
    relink = link_overhead if catalog.warm_start_s is None else catalog.warm_start_s
    # Every link ends with a checkpoint (the PS's, or the S3 reducers'), the last one too: the
    # job is done when the trained model is in S3 (measured on 2 cores, MobileNetV2, one link:
    # 0.24 s that no other term held). Where a periodic checkpoint fell on a link's last
    # iteration the PS skips it, so this counts at most one checkpoint a link too many; the
    # exact count (⌊k/E⌋ + the ends E misses) steps with the iteration time and would break
    # T(m)'s monotone shape in memory that the budget search relies on.
    chaining = links * link_checkpoint + (links - 1) * (catalog.restart_s + relink + state_read)
    warmup_total = warmup * (links if cold_relinks else 1)
    # Before any worker starts, the run opens its endpoints and starts the PS: both bill
    # (endpoints_usd, ps_usd take the total), Lambda does not.
    setup = np.where(nt.s3, 0.0, catalog.run_setup_s)  # an S3 run opens and starts nothing
    # The first link waits for what every link does (restart_s: the dispatch, the orchestrator
    # seeing the result) and for the platform to start a fresh environment before the handler's
    # clock runs (launch_s; measured on 2 cores: 0.1-0.7 s of an emulator run's wall that no
    # worker's handler saw, bench/predict).
    launch = np.broadcast_to(st.start_s + catalog.restart_s, np.shape(links)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        total = np.where(
            feasible,
            setup + launch + link_overhead + nt.iterations * it + chaining + warmup_total,
            np.inf,
        )
        # Lambda bills no dispatch gap; it bills the init (launch_s, and the imports in
        # link_overhead)
        billed = total - setup - links * catalog.restart_s
    return Timeline(
        s3_mb_s=st.s3_mb_s,
        load_s=st.load_s,
        compute_s=comp,
        warmup_s=warmup_total,
        communication_s=comm,
        aggregation_s=st.aggregation_s,
        burst_iterations=k_burst,
        iteration_s=it,
        checkpoint_every=every,
        periodic_checkpoint_s=periodic,
        iterations_per_invocation=per_inv,
        invocations=links,
        chaining_s=chaining,
        launch_s=launch,
        total_s=total,
        billed_s=billed,
        feasible=feasible,
    )


def _misses(catalog: Catalog, nt: NTerms, tl: Timeline, links: Arr) -> Arr:
    """The S3 exchange's missed GETs per iteration of cells cut into `links` links."""
    return s3_cell_misses(
        catalog,
        nt.n,
        nt.reducers,
        s3_exchanged_model_mb(nt.exchange_stored_mb, nt.n),
        tl.communication_s + tl.aggregation_s,
        nt.iterations,
        links,
        tl.iteration_s,
    )


def costs(
    catalog: Catalog,
    nt: NTerms,
    tl: Timeline,
    memory_mb: Arr,
    usd_per_gb_s: Arr,
    ps_usd_per_hour: Arr,
) -> Cells:
    """The cost items of evaluated cells (λDNN Eq. 10 and this project's extensions)."""
    n, links, billed = nt.n, tl.invocations, tl.billed_s
    # Infeasible cells carry inf times; their costs are masked to inf below (inf·0 is nan).
    with np.errstate(invalid="ignore"):
        lam = lambda_compute_usd(usd_per_gb_s, memory_mb, n, billed)
        req = requests_usd(catalog.usd_per_request, n, links)
        if catalog.max_link_s > 0:  # links cut for pace checks: one check after every link
            pace_gb_s_usd, pace_request_usd = pace_checks_usd(
                catalog.usd_per_request, usd_per_gb_s, links
            )
            lam, req = lam + pace_gb_s_usd, req + pace_request_usd
        ephc = ephemeral_usd(
            catalog.ephemeral_usd_per_gb_s, nt.ephemeral_mb, catalog.ephemeral_free_mb, n, billed
        )
        psc = ps_usd(ps_usd_per_hour, nt.ps_count, tl.total_s, catalog.ps_min_billed_s)
        sfn = step_functions_usd(
            catalog.sfn_usd_per_transition,
            catalog.sfn_fixed_transitions,
            catalog.sfn_transitions_per_invocation,
            n,
            links,
        )
        periodic = np.floor(nt.iterations / tl.checkpoint_every)
        s3c = s3_requests_usd(
            catalog.s3_usd_per_get, catalog.s3_usd_per_put, n, links, nt.ps_count, periodic
        )
        net = np.where(
            nt.s3,
            0.0,
            endpoints_usd(
                catalog.endpoint_usd_per_hour, len(catalog.interface_endpoints), tl.total_s
            ),
        )
        misses = _misses(catalog, nt, tl, links)
        exch = np.where(
            nt.s3,
            s3_exchange_usd(
                catalog.s3_usd_per_get,
                catalog.s3_usd_per_put,
                n,
                nt.reducers,
                nt.iterations,
                misses,
                links,
            )
            + s3_storage_usd(catalog.s3_usd_per_gb_month, nt.exchange_stored_mb, tl.total_s),
            0.0,
        )
        cost = lam + req + ephc + psc + sfn + s3c + net + exch
        # A lower memory runs no faster, so it cuts at least as many links, and its misses per
        # link split grow; but more links trade steady waits for cold ones, which may miss
        # less. The misses are concave in the link count (s3_exchange_misses), so over every
        # split from this cell's to one link per iteration they are least at an end.
        # (a PS cell has no misses to trade: nothing to price twice where no cell is S3)
        others_floor = cost - lam  # an infeasible cell's inf − inf: nan, never a bound
        if np.any(nt.s3):
            fewest = np.minimum(misses, _misses(catalog, nt, tl, nt.iterations))
            others_floor = others_floor - np.where(
                nt.s3, catalog.s3_usd_per_get * nt.iterations * (misses - fewest), 0.0
            )
    return Cells(
        feasible=tl.feasible,
        startup_s=nt.startup_s,
        local_batch=nt.local_batch,
        iterations=nt.iterations,
        s3_mb_s=tl.s3_mb_s,
        ps_mb_s=nt.ps_mb_s,
        load_s=tl.load_s,
        compute_per_iteration_s=tl.compute_s,
        warmup_s=tl.warmup_s,
        communication_per_iteration_s=tl.communication_s,
        burst_iterations=tl.burst_iterations,
        aggregation_per_iteration_s=tl.aggregation_s,
        iteration_s=tl.iteration_s,
        checkpoint_s=nt.checkpoint_s,
        checkpoint_every=tl.checkpoint_every,
        periodic_checkpoint_s=tl.periodic_checkpoint_s,
        iterations_per_invocation=tl.iterations_per_invocation,
        invocations=links,
        ephemeral_mb=nt.ephemeral_mb,
        chaining_s=tl.chaining_s,
        launch_s=tl.launch_s,
        total_s=tl.total_s,
        billed_s=billed,
        lambda_usd=lam,
        requests_usd=req,
        ephemeral_usd=ephc,
        ps_usd=psc,
        sfn_usd=sfn,
        s3_usd=s3c,
        endpoints_usd=net,
        total_usd=np.where(tl.feasible, cost, np.inf),
        exchange_usd=exch,
        others_floor_usd=others_floor,
    )


def evaluate(profile: WorkloadProfile, catalog: Catalog, x: Axis) -> Cells:
    """Every term and cost item at the cells `x` spans (n-terms, then timeline, then costs)."""
    nt = n_terms(
        profile,
        catalog,
        x.n,
        x.shard_mb_s,
        x.ps_count,
        core_rate_samples_s=x.core_rate_samples_s,
        burst_shard_mb_s=x.burst_shard_mb_s,
        burst_s=x.burst_s,
        reducers=x.reducers,
    )
    tl = timeline(profile, catalog, nt, x.memory_mb, x.rate_samples_s)
    return costs(catalog, nt, tl, x.memory_mb, x.usd_per_gb_s, x.ps_usd_per_hour)
