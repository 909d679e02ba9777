"""The planner's inputs corrected by what a run measured, and the run's remaining work as a profile.

Each term is corrected by measured over predicted where the run measured it (a term no link
result timed keeps its figure): compute by scaling the training rate, the exchange by scaling
every bandwidth and latency it is made of (PS and S3 alike), start-up by the profile's figure,
the shard load by the S3 bandwidth, the orchestration's gap by the catalog's restart. The same
exact model then predicts any configuration of the envelope at the run's own pace.

On shared cores (the local platform: local_machine.applies) a slower compute is read first as
the CPU's: each MB buys fewer cores than the catalog says (`Factors.cpu`), which slows the steps
and the exchange's own CPU (the loopback exchange is CPU on the critical path) together, and
which a larger memory variant buys back. What the CPU does not explain of the exchange is the
network's (`Factors.exchange`: bandwidths and latencies, the same at every memory). On AWS, where
every function has its own cores, the compute's factor scales the training rate as before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from provisioner import local_machine
from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.planner import predict
from provisioner.profile import RateCurve, WorkloadProfile
from provisioner.replan_pace import Progress
from provisioner.replan_search import plan_choice


@dataclass(frozen=True)
class Factors:
    """Measured / predicted seconds per term (1.0: as predicted, or not measured)."""

    compute: float = 1.0
    exchange: float = 1.0
    startup: float = 1.0
    load: float = 1.0
    gap_s: float | None = None  # the measured gap between links; None = the catalog's
    cpu: float = 1.0  # shared cores only: catalog's cores per MB / the run's (> 1: fewer cores)


def compose(first: Factors, then: Factors) -> Factors:
    """The factors of two corrections in turn (a later check corrects the figures an earlier
    switch planned with): corrected_*(corrected_*(x, first), then) = corrected_*(x, compose(..))."""
    return Factors(
        compute=first.compute * then.compute,
        exchange=first.exchange * then.exchange,
        startup=first.startup * then.startup,
        load=first.load * then.load,
        gap_s=then.gap_s if then.gap_s is not None else first.gap_s,
        cpu=first.cpu * then.cpu,
    )


def _ratio(measured: float, predicted: float) -> float:
    """measured / predicted where both are positive, else 1 (no correction without a reading)."""
    return measured / predicted if measured > 0 and predicted > 0 else 1.0


def factors(plan: Plan, progress: Progress) -> Factors:
    """The run's figures against the plan's, term by term."""
    p = plan.prediction
    return Factors(
        compute=_ratio(progress.compute_per_iteration_s, p.compute_per_iteration_s),
        exchange=_ratio(progress.exchange_per_iteration_s, p.exchange_per_iteration_s),
        startup=_ratio(progress.startup_per_link_s, p.startup_s),
        load=_ratio(progress.load_per_link_s, p.load_s),
        gap_s=progress.gap_per_link_s if progress.gap_per_link_s > 0 else None,
    )


FIT_ROUNDS = 4  # measured/predicted again on the corrected model: the CPU quota's step is not
# linear in the rate, so one scaling leaves about 1 % between the corrected compute and the run's;
# the rounds bring it within 2 % (the quota's split of a step into compute and exchange is not
# reached exactly by scaling the rate and the bandwidths)
CPU_ELASTICITY = 0.5  # a CPU step must move the predicted compute by at least this share of it
# (in log terms) to be kept: a worker above one vCPU with a flat rate curve (one torch thread)
# is not slowed by fewer cores per MB, so there the compute's factor scales the rate instead


def _predicted_terms(
    plan: Plan, profile: WorkloadProfile, catalog: Catalog, f: Factors
) -> tuple[float, float, float]:
    """Compute, exchange per iteration and the load of the plan's configuration, corrected."""
    c = predict(corrected_profile(profile, f), corrected_catalog(catalog, f), plan_choice(plan))
    comp = float(np.asarray(c.compute_per_iteration_s).ravel()[0])
    exch = float(
        np.asarray(c.communication_per_iteration_s + c.aggregation_per_iteration_s).ravel()[0]
    )
    return comp, exch, float(np.asarray(c.load_s).ravel()[0])


def _compute_step(
    plan: Plan, profile: WorkloadProfile, catalog: Catalog, f: Factors, measured_s: float,
    predicted_s: float,
) -> Factors:  # fmt: skip
    """f corrected toward the measured compute: on shared cores by fewer cores per MB where that
    moves the prediction, else by the rate. A faster run is the rate's once the CPU factor is
    back at 1. The CPU's step is Newton's in log terms: the compute is not proportional to the
    cores (the rate curve's slope, the quota), so a trial step measures how much it moves."""
    ratio = _ratio(measured_s, predicted_s)
    if local_machine.applies(catalog) and (ratio > 1.0 or f.cpu > 1.0):
        step = ratio if ratio > 1.0 else max(ratio, 1.0 / f.cpu)
        moved_s = _predicted_terms(plan, profile, catalog, replace(f, cpu=f.cpu * step))[0]
        moved = np.log(_ratio(moved_s, predicted_s)) / np.log(step) if step != 1.0 else 0.0
        if moved >= CPU_ELASTICITY:
            return replace(f, cpu=max(1.0, float(f.cpu * step ** (1.0 / moved))))
    return replace(f, compute=f.compute * ratio)


def fitted_factors(
    plan: Plan, profile: WorkloadProfile, catalog: Catalog, progress: Progress
) -> Factors:
    """`factors`, refined until the corrected model predicts the run's own compute, exchange and
    load for the configuration it runs (`profile`: the work it is to predict); each round scales
    by measured over what the corrected model now predicts. On shared cores the compute's
    slowdown goes to the CPU first (`_compute_step`), so the exchange's factor is what the CPU
    leaves of the exchange's."""
    raw = factors(plan, progress)
    f = replace(raw, compute=1.0, exchange=1.0, load=1.0)
    if not local_machine.applies(catalog):  # own cores: the rate and the network, as measured
        f = replace(f, compute=raw.compute, exchange=raw.exchange, load=raw.load)
    for _ in range(FIT_ROUNDS):
        comp, _, _ = _predicted_terms(plan, profile, catalog, f)
        f = _compute_step(plan, profile, catalog, f, progress.compute_per_iteration_s, comp)
        _, exch, load = _predicted_terms(plan, profile, catalog, f)
        f = replace(
            f,
            exchange=f.exchange * _ratio(progress.exchange_per_iteration_s, exch),
            load=f.load * _ratio(progress.load_per_link_s, load),
        )
    return f


def _faster_curve(curve: RateCurve, by: float) -> RateCurve:
    """The rate curve `by` times as fast (a slower measured compute: by < 1)."""
    if curve.is_linear:
        return replace(
            curve,
            alpha1_samples_s_per_mb=(curve.alpha1_samples_s_per_mb or 0.0) * by,
            beta1_samples_s=(curve.beta1_samples_s or 0.0) * by,
        )
    return replace(curve, samples_per_s=tuple(r * by for r in curve.samples_per_s))


def corrected_profile(profile: WorkloadProfile, f: Factors) -> WorkloadProfile:
    """The profile at the measured compute, aggregation and start-up (the PS's averaging is
    timed inside the workers' exchange, so it takes the exchange's factor)."""
    return replace(
        profile,
        rates=tuple(_faster_curve(c, 1.0 / f.compute) for c in profile.rates),
        ps_aggregation_mb_s_per_core=profile.ps_aggregation_mb_s_per_core / f.exchange,
        startup_s=profile.startup_s * f.startup,
    )


def corrected_catalog(catalog: Catalog, f: Factors) -> Catalog:
    """The catalog at the measured CPU, exchange, load and gap, for the REST of a run: its set-up
    (endpoints open, PS started) and the PS's minimum billing are behind it."""
    x, ld = f.exchange, f.load
    catalog = _fewer_cores(catalog, f.cpu)
    put_mb_s = None if catalog.s3_put_mb_s is None else catalog.s3_put_mb_s / x
    put_s = None if catalog.s3_put_request_s is None else catalog.s3_put_request_s * x
    return replace(
        catalog,
        # the exchange: PS bandwidths and round trip; S3 requests' latency and PUT bandwidth
        function_ps_mb_s=catalog.function_ps_mb_s / x,
        function_ps_rtt_s=catalog.function_ps_rtt_s * x,
        per_flow_cap_gbps=catalog.per_flow_cap_gbps / x,
        ps_types=tuple(
            replace(p, baseline_gbps=p.baseline_gbps / x, peak_gbps=p.peak_gbps / x)
            for p in catalog.ps_types
        ),
        s3_request_s=catalog.s3_request_s * x,
        s3_put_request_s=put_s,
        s3_put_mb_s=put_mb_s,
        # the load: S3 → function bandwidth and the load's CPU
        s3_mb_s_per_memory_mb=catalog.s3_mb_s_per_memory_mb / ld,
        s3_mb_s_intercept=catalog.s3_mb_s_intercept / ld,
        s3_max_mb_s=catalog.s3_max_mb_s / ld,
        load_cpu_s=None if catalog.load_cpu_s is None else catalog.load_cpu_s * ld,
        restart_s=catalog.restart_s if f.gap_s is None else f.gap_s,
        endpoint_ready_s=0.0,
        ps_start_s=0.0,
        ps_min_billed_s=0.0,
    )


def _fewer_cores(catalog: Catalog, by: float) -> Catalog:
    """The shared-core catalog with `by` × fewer cores per MB: a vCPU is `by` × the MB, and the
    machine's cores and a function's cap hold `by` × fewer of them (1 or AWS: as it is). The
    profile's rate, loop and exchange-CPU points are read at the share, so every CPU-bound term
    moves with it and more memory buys it back."""
    if by == 1.0 or not local_machine.applies(catalog):
        return catalog

    def fewer(v: float | None) -> float | None:
        return None if v is None else v / by

    return replace(
        catalog,
        mb_per_vcpu=catalog.mb_per_vcpu * by,
        max_vcpu=catalog.max_vcpu / by,
        total_vcpu=fewer(catalog.total_vcpu),
        compute_cores=fewer(catalog.compute_cores),
    )


def remaining_profile(
    profile: WorkloadProfile, plan: Plan, iterations_left: int
) -> WorkloadProfile:
    """The remaining work as a profile plan_job's model reads: one epoch of `iterations_left`
    global batches of the plan's size b_g. With b_l^f = b_g^max = b_g, λDNN's batch rule gives
    every n that divides b_g the local batch b_g / n, so the global batch, hence BSP's
    trajectory, stays the plan's at any worker count the envelope allows. The dataset's bytes
    stay whole: the new workers load their 1/n shard of it."""
    b_g = plan.training.global_batch
    return replace(
        profile,
        epochs=1,
        dataset_samples=iterations_left * b_g,
        profiled_local_batch=b_g,
        max_global_batch=b_g,
    )
