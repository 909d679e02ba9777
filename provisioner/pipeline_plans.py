"""A pipelined candidate as a Plan, and the choice between today's plan and a pipelined one.

plan_job (provisioner/planner.py) asks `pipelined_choice` whether the model should be cut: only
a profile with blocks is ever cut, and only when today's one-stage planner finds nothing (the
model does not fit one function: "does-not-fit") or the pipelined optimum beats its plan for
the goal ("cheaper"). On the local machine's catalog (shared cores) only "does-not-fit" cuts:
there the stage terms are corrected for the shared cores only in their simplest form
(pipeline_local.py), too little to call a cut cheaper than a one-stage plan the full local
model predicts, so a model that fits (the demo) is never cut.
"""

from __future__ import annotations

import math

import numpy as np

from provisioner import local_machine, runaway
from provisioner.catalog import Catalog
from provisioner.idle import idle_cost
from provisioner.local_ceiling import check_blocks_fit
from provisioner.pipeline_model import RunShape, boundary_requests
from provisioner.pipeline_plan import Pipeline, Stage
from provisioner.pipeline_search import PipelineCandidate, search_pipeline
from provisioner.plan import CostBreakdown, Goal, Plan, Prediction, TrainingSpec
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.s3exchange import s3_exchange_requests
from provisioner.space import Limits


def may_pipeline(profile: WorkloadProfile, catalog: Catalog, fits: bool) -> bool:
    """Whether plan_job considers cutting the model: it declares blocks, and on the local
    machine's catalog it does not fit one function (its memory ceiling, local_ceiling.py)."""
    return len(profile.blocks) >= 2 and (not fits or not local_machine.applies(catalog))


def needs_blocks_message(profile: WorkloadProfile, catalog: Catalog) -> str:
    """The one-line refusal of a model that fits no function and declares no blocks."""
    return (
        f"workload {profile.name} needs ≥ {profile.min_memory_mb} MB but a function of catalog "
        f"{catalog.name} has at most {catalog.memory_max_mb} MB, and its profile declares no "
        "blocks to cut it into pipeline stages; accepted: a profile with 'blocks' and "
        "'runtime_memory_mb' (profiles/README.md), profiled with its blocks"
    )


def pipelined_choice(
    profile: WorkloadProfile, catalog: Catalog, goal: Goal, limits: Limits, plan: Plan | None
) -> PipelineCandidate | None:
    """The goal's best pipelined candidate (S ≥ 2), None if none meets it or none can beat
    today's `plan` (its cost, or its time for a budget alone, bounds the search)."""
    ceiling = math.inf
    if plan is not None:
        by_cost = goal.planning_deadline_s is not None
        ceiling = plan.cost.total_usd if by_cost else plan.prediction.total_s
    return search_pipeline(
        profile, catalog, limits, goal.planning_deadline_s, goal.budget_usd, ceiling=ceiling
    )


def beats(goal: Goal, candidate: PipelineCandidate, plan: Plan) -> bool:
    """Whether the pipelined candidate is better than today's plan for the goal (cheaper,
    ties faster, under a deadline; faster, ties cheaper, within a budget only)."""
    f = candidate.figures
    if goal.planning_deadline_s is not None:
        return (f.total_usd, f.total_s) < (plan.cost.total_usd, plan.prediction.total_s)
    return (f.total_s, f.total_usd) < (plan.prediction.total_s, plan.cost.total_usd)


def reason_note(reason: str, candidate: PipelineCandidate, plan: Plan | None) -> str:
    """Why the plan is cut, and by how much it beats the one-stage plan."""
    s = len(candidate.stages)
    if plan is None:
        return (
            f"pipelined in {s} stages (does-not-fit): the model needs more memory than one "
            "function has"
        )
    saved = plan.cost.total_usd - candidate.figures.total_usd
    faster = plan.prediction.total_s - candidate.figures.total_s
    return (
        f"pipelined in {s} stages (cheaper): ${saved:.4f} less and {faster:.0f} s sooner than "
        f"the best one-stage plan (${plan.cost.total_usd:.4f}, {plan.prediction.total_s:.0f} s)"
    )


def pipelined_plan(
    profile: WorkloadProfile,
    catalog: Catalog,
    candidate: PipelineCandidate,
    goal: Goal,
    limits: Limits,
    job: str,
    notes: tuple[str, ...],
    reason: str,
) -> Plan:
    """Every Plan field of a pipelined candidate; the stages in `pipeline`. Per-iteration
    compute is the M + S − 1 slots' compute of the slowest stage, communication the rest of the
    iteration (boundary transfers and the slowest sync); the boundary requests are priced in
    s3_exchange_usd beside the stages' S3 exchanges."""
    f, route, r = candidate.figures, candidate.route, candidate.replicas
    s = len(candidate.stages)
    slow = max(candidate.stages, key=lambda x: x.slot_s)
    # the iteration's compute: the slowest stage's M + S − 1 slots, or on the local machine's
    # shared cores the CPU floor where it holds the iteration longer (pipeline_local.py)
    comp_it = (candidate.micro_batches + s - 1) * slow.compute_s
    comp_it = min(f.iteration_s, max(comp_it, f.iteration_floor_s))
    stages = tuple(
        Stage(
            index=i, first_block=c.first, stop_block=c.stop,
            block_names=tuple(b.name for b in profile.blocks[c.first:c.stop]),
            memory_mb=c.memory_mb, vcpu_share=_share(catalog, c.memory_mb),
            parameter_bytes=sum(b.parameter_bytes for b in profile.blocks[c.first:c.stop]),
            memory_needed_mb=c.need_mb, compute_per_micro_batch_s=c.compute_s,
            boundary_per_micro_batch_s=c.boundary_s, sync_per_iteration_s=c.sync_s,
        )
        for i, c in enumerate(candidate.stages)
    )  # fmt: skip
    k = _iterations(profile, candidate)
    # every stage's S3 exchange (none under PS) and the boundaries' requests, per iteration
    stage_puts, stage_gets = s3_exchange_requests(np.array([r]), np.array([route.reducers]))
    b_puts, b_gets = boundary_requests(RunShape(s, r, candidate.micro_batches, k, 0.0, route, 0.0))
    puts = int(s * float(stage_puts[0]) + b_puts)
    gets = int(s * float(stage_gets[0]) + b_gets)
    ps = route.sync == "ps"
    prediction = Prediction(
        load_s=f.load_s, compute_s=k * comp_it, communication_s=k * (f.iteration_s - comp_it),
        ps_aggregation_s=0.0, startup_s=f.startup_s,
        chaining_s=f.links * f.checkpoint_s + (f.links - 1) * catalog.restart_s,
        total_s=f.total_s, iteration_s=f.iteration_s, compute_per_iteration_s=comp_it,
        communication_per_iteration_s=f.iteration_s - comp_it, ps_bandwidth_mb_s=0.0,
        s3_bandwidth_mb_s=0.0, setup_s=catalog.run_setup_s if ps else 0.0,
        launch_s=catalog.launch_s + catalog.restart_s,
        exchange_per_iteration_s=max(c.sync_s for c in candidate.stages),
        exchange_puts_per_iteration=puts, exchange_gets_per_iteration=gets,
    )  # fmt: skip
    low_s, high_s = catalog.prediction_interval.of(f.total_s)
    prediction = Prediction(**{**prediction.__dict__, "total_low_s": low_s, "total_high_s": high_s})
    cost = CostBreakdown(
        lambda_compute_usd=f.lambda_usd, lambda_requests_usd=f.requests_usd,
        ephemeral_storage_usd=f.ephemeral_usd, ps_instances_usd=f.ps_usd,
        step_functions_usd=f.sfn_usd, s3_requests_usd=f.s3_usd, total_usd=f.total_usd,
        vpc_endpoints_usd=f.endpoints_usd, s3_exchange_usd=f.exchange_usd + f.boundary_usd,
    )  # fmt: skip
    b_l = candidate.local_batch
    training = TrainingSpec(
        model=profile.model, dataset=profile.dataset, dataset_samples=profile.dataset_samples,
        dataset_bytes=profile.dataset_bytes, model_bytes=profile.model_bytes,
        epochs=profile.epochs, local_batch=b_l, global_batch=b_l * r, iterations=k,
        learning_rate=profile.learning_rate, momentum=profile.momentum,
        checkpoint_every_iterations=max(1, min(profile.checkpoint_every_iterations
                                               or f.checkpoint_every, f.iterations_per_invocation)),
        model_digest=profile.model_digest,
    )  # fmt: skip
    top = max(c.memory_mb for c in candidate.stages)
    timeout_s = runaway.execution_timeout_s(f.total_s)
    shards = s * route.ps_count
    return Plan(
        job=job, workload=profile.name, catalog=catalog.name, goal=goal, n_workers=r,
        memory_mb=top, arch=candidate.arch, vcpu_share=round(_share(catalog, top), 4),
        ps_type=route.ps_type, ps_count=route.ps_count,
        ps_arch=candidate.arch if not ps else catalog.ps_type(route.ps_type).arch,
        invocation_timeout_s=catalog.invocation_timeout_s,
        ephemeral_storage_mb=f.ephemeral_mb, invocations_per_worker=f.links,
        iterations_per_invocation=f.iterations_per_invocation,
        reserve_concurrency=limits.reserve_concurrency, training=training,
        prediction=prediction, cost=cost,
        notes=notes,
        interface_endpoints=catalog.interface_endpoints if ps else (),
        max_links_per_worker=runaway.max_links(f.links), execution_timeout_s=timeout_s,
        worst_case_usd=runaway.worst_case_usd(
            catalog, cost, n_workers=s * r, ps_type=route.ps_type, ps_count=shards,
            billed_s=f.billed_s, planned_links=f.links, timeout_s=timeout_s,
        ),
        ps_volume_gb=catalog.ps_root_volume_gb if ps else 0,
        idle_usd_per_hour=idle_cost(catalog, ps_count=shards, secret=ps).total_usd_per_hour,
        sync=route.sync, reducers=route.reducers,
        pipeline=Pipeline(stages=stages, micro_batches=candidate.micro_batches, reason=reason),
    )  # fmt: skip


def _share(catalog: Catalog, memory_mb: int) -> float:
    return float(vcpu_share(np.array([memory_mb]), catalog.mb_per_vcpu, catalog.max_vcpu)[0])


def _iterations(profile: WorkloadProfile, candidate: PipelineCandidate) -> int:
    """k = ⌈n_t·e / (r·b_l)⌉, the candidate's iterations."""
    total = profile.dataset_samples * profile.epochs
    return -(-total // (candidate.replicas * candidate.local_batch))


def pipelined_instead(
    profile: WorkloadProfile,
    catalog: Catalog,
    goal: Goal,
    limits: Limits,
    job: str,
    plan: Plan | None,
) -> Plan | None:
    """The pipelined plan plan_job returns instead of today's `plan` (None: today's found none
    meeting the goal), or None where it keeps today's: no blocks, a local catalog the model
    fits, no pipelined plan meeting the goal, or one no better. ValueError where the local
    memory ceiling is below what the largest block needs alone."""
    fits = profile.min_memory_mb <= catalog.memory_max_mb
    if not may_pipeline(profile, catalog, fits):
        return None
    check_blocks_fit(profile, catalog)
    candidate = pipelined_choice(profile, catalog, goal, limits, plan)
    if candidate is None or (plan is not None and not beats(goal, candidate, plan)):
        return None
    reason = "cheaper" if fits else "does-not-fit"
    if plan is None and fits:
        note = (
            f"pipelined in {len(candidate.stages)} stages (cheaper): no one-stage plan meets "
            "the goal"
        )
    else:
        note = reason_note(reason, candidate, plan)
    why = (
        "cheapest pipelined plan meeting the deadline (ties: faster)"
        if goal.planning_deadline_s is not None
        else "fastest pipelined plan within the budget (ties: cheaper)"
    )
    notes = (
        why,
        note,
        "exact search over stages, cuts, per-stage memory, replicas, micro-batches, arch and "
        "each stage's sync (docs/pipeline.md)",
        "boundary requests priced in s3_exchange_usd",
    )
    return pipelined_plan(profile, catalog, candidate, goal, limits, job, notes, reason)
