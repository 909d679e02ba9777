"""The planner's entry point: plan_job → the optimum Plan, its frontier and alternatives.

The search lives in provisioner/search.py, the space in provisioner/space.py; this module turns
an optimal cell into a Plan with every predicted term and cost item, explains infeasible goals
in one line, and samples the (time, cost) Pareto frontier.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from provisioner import runaway
from provisioner.catalog import Catalog
from provisioner.cells import Axis, Cells
from provisioner.explain import (
    alternatives_rule,
    infeasible_message,
    pipeline_infeasible_message,
    reserve_words,
    sync_note,
)
from provisioner.idle import idle_cost
from provisioner.model import evaluate
from provisioner.parse import MAX_SLACK, SLACK_FORMS
from provisioner.pipeline_plans import may_pipeline, needs_blocks_message, pipelined_instead
from provisioner.plan import CostBreakdown, Goal, Plan, Prediction, TrainingSpec
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.s3exchange import s3_cell_misses, s3_exchange_requests, s3_link_requests
from provisioner.search import SLACK, fastest_cell, solve_deadline, solve_goal
from provisioner.space import (
    ARCH_CHOICES,
    SYNC_CHOICES,
    Choice,
    Flat,
    Infeasible,
    Limits,
    Space,
    build_space,
    choice_of,
    flatten,
)
from provisioner.terms import Arr, local_batch, training_rate_samples_s

__all__ = [
    "ARCH_CHOICES",
    "SYNC_CHOICES",
    "FrontierPoint",
    "Infeasible",
    "Limits",
    "PlanResult",
    "RunRules",
    "alternatives_rule",
    "emulator_margin_s",
    "plan_job",
    "predict_run",
]


@dataclass(frozen=True)
class FrontierPoint:
    """One Pareto-optimal (time, cost) configuration."""

    total_s: float
    total_usd: float
    n_workers: int
    memory_mb: int
    arch: str
    ps_type: str  # "" for the S3 exchange
    ps_count: int  # 0 for the S3 exchange
    sync: str = "ps"
    reducers: int = 0


@dataclass(frozen=True)
class PlanResult:
    """The chosen plan, the Pareto frontier, a few next-best alternatives (one per other worker
    count) and the best plan of the other gradient exchange (sync), if it meets the goal."""

    plan: Plan
    frontier: tuple[FrontierPoint, ...] = ()
    alternatives: tuple[Plan, ...] = ()
    other_sync: Plan | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "frontier": [asdict(p) for p in self.frontier],
            "alternatives": [a.to_dict() for a in self.alternatives],
            "other_sync": None if self.other_sync is None else self.other_sync.to_dict(),
        }

    def to_json(self) -> str:
        """The `cdk.out/plan.json` document; sorted keys: the same result gives the same bytes."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def predict(profile: WorkloadProfile, catalog: Catalog, choice: Choice) -> Cells:
    """The model at one configuration (same code path as the search)."""
    s3 = choice.sync == "s3"  # no PS: no bandwidth, price or burst of one
    ps = None if s3 else catalog.ps_type(choice.ps_type)
    curve = profile.rate(choice.arch)
    if curve is None:
        raise ValueError(f"workload {profile.name} has no training rate for {choice.arch}")
    mem = np.array([choice.memory_mb])
    share = vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu)
    n = np.array([choice.n_workers])
    one = np.ones(1)
    return evaluate(
        profile,
        catalog,
        Axis(
            memory_mb=mem,
            rate_samples_s=training_rate_samples_s(curve, share, mem),
            usd_per_gb_s=np.array([catalog.arch(choice.arch).usd_per_gb_s]),
            n=n,
            shard_mb_s=np.array([ps.baseline_mb_s if ps else 0.0]),
            ps_count=np.array([choice.ps_count]),
            ps_usd_per_hour=np.array([ps.usd_per_hour if ps else 0.0]),
            core_rate_samples_s=training_rate_samples_s(curve, one, one * catalog.mb_per_vcpu),
            burst_shard_mb_s=np.array([ps.burst_mb_s if ps else 0.0]),
            burst_s=np.array([ps.burst_s if ps else 0.0]),
            reducers=np.array([choice.reducers]),
        ),
    )


def _f(x: Arr) -> float:
    return float(np.asarray(x).ravel()[0])


def _i(x: Arr) -> int:
    return int(np.asarray(x).ravel()[0])


def build_plan(
    profile: WorkloadProfile,
    catalog: Catalog,
    choice: Choice,
    goal: Goal,
    limits: Limits,
    job: str,
    notes: tuple[str, ...] = (),
) -> Plan:
    """Fill every Plan field from one evaluated cell."""
    c = predict(profile, catalog, choice)
    if not bool(np.asarray(c.feasible).ravel()[0]):
        raise Infeasible(f"configuration {choice} cannot run under catalog {catalog.name}")
    k, links = _i(c.iterations), _i(c.invocations)
    per_inv = _i(c.iterations_per_invocation)
    startup = _f(c.startup_s)
    s3 = choice.sync == "s3"
    n_arr, k_arr = np.array([choice.n_workers]), np.array([choice.reducers])
    puts, gets = s3_exchange_requests(n_arr, k_arr)
    link_puts, link_gets, link_lists = s3_link_requests(n_arr, k_arr, c.invocations)
    prediction = Prediction(
        load_s=_f(c.load_s),
        compute_s=k * _f(c.compute_per_iteration_s) + _f(c.warmup_s),
        communication_s=k * _f(c.communication_per_iteration_s),
        ps_aggregation_s=k * _f(c.aggregation_per_iteration_s),
        startup_s=startup,
        chaining_s=_f(c.chaining_s),
        total_s=_f(c.total_s),
        iteration_s=_f(c.iteration_s),
        compute_per_iteration_s=_f(c.compute_per_iteration_s),
        communication_per_iteration_s=_f(c.communication_per_iteration_s),
        ps_bandwidth_mb_s=_f(c.ps_mb_s),
        s3_bandwidth_mb_s=_f(c.s3_mb_s),
        checkpoint_s=k * _f(c.periodic_checkpoint_s),
        setup_s=0.0 if s3 else catalog.run_setup_s,
        launch_s=_f(c.launch_s),
        exchange_per_iteration_s=_f(c.communication_per_iteration_s)
        + _f(c.aggregation_per_iteration_s),
        exchange_puts_per_iteration=_i(puts),
        exchange_gets_per_iteration=_i(gets),
        exchange_get_misses_per_iteration=_f(
            s3_cell_misses(
                catalog,
                np.array([choice.n_workers]),
                np.array([choice.reducers]),
                profile.model_bytes / 1e6,
                c.communication_per_iteration_s + c.aggregation_per_iteration_s,
                c.iterations,
                c.invocations,
                c.iteration_s,
            )
        ),
        exchange_link_puts=_i(link_puts),
        exchange_link_gets=_i(link_gets),
        exchange_link_lists=_i(link_lists),
    )
    low_s, high_s = catalog.prediction_interval.of(prediction.total_s)
    prediction = replace(prediction, total_low_s=low_s, total_high_s=high_s)
    cost = CostBreakdown(
        lambda_compute_usd=_f(c.lambda_usd),
        lambda_requests_usd=_f(c.requests_usd),
        ephemeral_storage_usd=_f(c.ephemeral_usd),
        ps_instances_usd=_f(c.ps_usd),
        step_functions_usd=_f(c.sfn_usd),
        s3_requests_usd=_f(c.s3_usd),
        total_usd=_f(c.total_usd),
        vpc_endpoints_usd=_f(c.endpoints_usd),
        s3_exchange_usd=_f(c.exchange_usd),
    )
    b_l = _i(c.local_batch)
    # The profile may pin the interval; otherwise the model's time-based one (checkpoint_interval_s)
    every = profile.checkpoint_every_iterations or _i(c.checkpoint_every)
    training = TrainingSpec(
        model=profile.model,
        dataset=profile.dataset,
        dataset_samples=profile.dataset_samples,
        dataset_bytes=profile.dataset_bytes,
        model_bytes=profile.model_bytes,
        epochs=profile.epochs,
        local_batch=b_l,
        global_batch=b_l * choice.n_workers,
        iterations=k,
        learning_rate=profile.learning_rate,
        momentum=profile.momentum,
        checkpoint_every_iterations=max(1, min(every, per_inv)),
        model_digest=profile.model_digest,
    )
    share = float(
        vcpu_share(np.array([choice.memory_mb]), catalog.mb_per_vcpu, catalog.max_vcpu)[0]
    )
    timeout_s = runaway.execution_timeout_s(prediction.total_s)
    # endpoints: the run closes them; an S3 plan has no PS, no secret and no endpoints
    idle = idle_cost(catalog, ps_count=choice.ps_count, secret=not s3)
    return Plan(
        job=job,
        workload=profile.name,
        catalog=catalog.name,
        goal=goal,
        n_workers=choice.n_workers,
        memory_mb=choice.memory_mb,
        arch=choice.arch,
        vcpu_share=round(share, 4),
        ps_type=choice.ps_type,
        ps_count=choice.ps_count,
        ps_arch=choice.arch if s3 else catalog.ps_type(choice.ps_type).arch,
        invocation_timeout_s=catalog.invocation_timeout_s,
        ephemeral_storage_mb=_i(c.ephemeral_mb),
        invocations_per_worker=links,
        iterations_per_invocation=per_inv,
        reserve_concurrency=limits.reserve_concurrency,
        training=training,
        prediction=prediction,
        cost=cost,
        notes=notes,
        interface_endpoints=() if s3 else catalog.interface_endpoints,
        max_links_per_worker=runaway.max_links(links),
        execution_timeout_s=timeout_s,
        worst_case_usd=runaway.worst_case_usd(
            catalog, cost, n_workers=choice.n_workers, ps_type=choice.ps_type,
            ps_count=choice.ps_count, billed_s=_f(c.billed_s), planned_links=links,
            timeout_s=timeout_s,
        ),
        ps_volume_gb=0 if s3 else catalog.ps_root_volume_gb,
        idle_usd_per_hour=idle.total_usd_per_hour,
        sync=choice.sync,
        reducers=choice.reducers,
    )  # fmt: skip


@dataclass(frozen=True)
class RunRules:
    """How a run was executed, where it differs from the catalog: the invocation limit and
    safety margin it enforced, its iteration cap (0 = none) and, when a bench ran fewer
    iterations than the workload needs, that count (None = the workload's own k)."""

    invocation_limit_s: float
    safety_margin_s: float
    max_iterations_per_invocation: int = 0
    iterations: int | None = None


def emulator_margin_s(limit_s: float, catalog: Catalog) -> float:
    """The safety margin the emulator keeps under a limit: a quarter of it, at most the
    catalog's (the rule of emulator.orchestrator.default_safety_margin_s, whose cap is the
    same 30 s AWS default)."""
    return min(catalog.safety_margin_s, 0.25 * limit_s)


def run_catalog(catalog: Catalog, rules: RunRules) -> Catalog:
    """The catalog under the run's rules. The timeout is whole seconds in the catalog, so a
    fractional limit rounds up and the margin grows by the same amount: usable time is exact."""
    timeout_s = math.ceil(rules.invocation_limit_s)
    return replace(
        catalog,
        invocation_timeout_s=timeout_s,
        safety_margin_s=rules.safety_margin_s + (timeout_s - rules.invocation_limit_s),
        max_iterations_per_invocation=rules.max_iterations_per_invocation,
    )


def profile_with_iterations(profile: WorkloadProfile, n_workers: int, k: int) -> WorkloadProfile:
    """The profile reshaped so k = ⌈n_t·e / b_g⌉ is exactly `k` at n workers: one epoch of
    k global batches (the dataset's bytes, hence load time and /tmp, are unchanged)."""
    n = np.array([n_workers])
    b_l = int(local_batch(n, profile.profiled_local_batch, profile.max_global_batch)[0])
    return replace(profile, epochs=1, dataset_samples=k * n_workers * max(b_l, 1))


def predict_run(
    profile: WorkloadProfile, catalog: Catalog, choice: Choice, rules: RunRules, job: str
) -> Plan:
    """The Plan of a configuration actually run, under the rules the run enforced (Infeasible
    if the model says it cannot run so)."""
    if rules.iterations is not None:
        profile = profile_with_iterations(profile, choice.n_workers, rules.iterations)
    return build_plan(
        profile, run_catalog(catalog, rules), choice, Goal(deadline_s=None), Limits(), job=job
    )


def _alternatives(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    goal: Goal,
    flat: Flat,
    chosen_ni: int,
    count: int,
) -> list[Choice]:
    """Next-best alternatives: the optimum at each other worker count n, best first.

    The search runs again with the worker counts found so far left out: the best cell of the
    counts that remain is, in particular, the best of its own count, so each alternative is the
    exact optimum of its slice and they come in goal order (the same order `exhaustive_per_n`
    enumerates).
    """
    left_out = np.arange(space.n.size) == chosen_ni
    out: list[Choice] = []
    for _ in range(count):
        res = solve_goal(profile, catalog, space, goal, flat.without_n(left_out))
        if res is None:
            break
        i, pool = res
        out.append(choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i])))
        left_out = left_out | (np.arange(space.n.size) == pool.ni[i])
    return out


def frontier(
    profile: WorkloadProfile, catalog: Catalog, space: Space, points: int = 12
) -> tuple[FrontierPoint, ...]:
    """Pareto (time, cost) points: exact cheapest plans at deadlines log-spaced between the fastest
    achievable time and the time of the cheapest plan; dominated duplicates removed."""
    fast_s, _ = fastest_cell(profile, catalog, space)
    flat = flatten(profile, catalog, space)
    cheap = solve_deadline(profile, catalog, space, math.inf, flat)
    if cheap is None:
        return ()
    slow_s = float(cheap[1].total_s[cheap[0]])
    deadlines = np.geomspace(fast_s, max(slow_s, fast_s), points) if slow_s > fast_s else [fast_s]
    found: dict[Choice, tuple[float, float]] = {}
    for d in deadlines:
        res = solve_deadline(profile, catalog, space, float(d) * (1 + SLACK), flat)
        if res is None:
            continue
        i, pool = res
        ch = choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))
        found[ch] = (float(pool.total_s[i]), float(pool.total_usd[i]))
    pts = sorted(found.items(), key=lambda kv: (kv[1][0], kv[1][1]))
    out: list[FrontierPoint] = []
    for ch, (t, c) in pts:
        if out and c >= out[-1].total_usd:
            continue
        out.append(
            FrontierPoint(
                total_s=t,
                total_usd=c,
                n_workers=ch.n_workers,
                memory_mb=ch.memory_mb,
                arch=ch.arch,
                ps_type=ch.ps_type,
                ps_count=ch.ps_count,
                sync=ch.sync,
                reducers=ch.reducers,
            )
        )
    return tuple(out)


def plan_job(
    profile: WorkloadProfile,
    catalog: Catalog,
    goal: Goal,
    limits: Limits,
    job: str,
    *,
    alternatives: int = 3,
    frontier_points: int = 12,
) -> PlanResult:
    """Plan a training job: the exact optimum for the goal, its frontier and alternatives."""
    if goal.deadline_s is None and goal.budget_usd is None:
        raise ValueError("goal: give a deadline, a budget or both")
    for value, what in ((goal.deadline_s, "deadline"), (goal.budget_usd, "budget")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{what} {value!r} is not a positive finite number")
    if goal.slack is not None and not 0.0 <= goal.slack < MAX_SLACK:
        raise ValueError(f"slack {goal.slack!r} is out of range ({SLACK_FORMS})")
    if goal.slack and goal.deadline_s is None:  # slack shortens a deadline; a budget has none
        raise ValueError(
            f"slack {goal.slack:.0%} holds back a share of the deadline, but only a budget was "
            "given: add a deadline or drop the slack"
        )
    # the user's slack, else the catalog's; plans meet the deadline at the interval's top
    goal = goal.for_catalog(catalog.default_slack, catalog.prediction_interval.high)
    try:
        space = build_space(profile, catalog, limits)
    except Infeasible:
        # the model fits no function: cut it into stages if its profile says how
        cut = pipelined_instead(profile, catalog, goal, limits, job, None)
        if cut is not None:
            return PlanResult(plan=cut)
        if profile.min_memory_mb > catalog.memory_max_mb:
            if not profile.blocks:
                raise Infeasible(needs_blocks_message(profile, catalog)) from None
            if may_pipeline(profile, catalog, fits=False):
                message = pipeline_infeasible_message(profile, catalog, goal, limits)
                raise Infeasible(message) from None
        raise
    flat = flatten(profile, catalog, space)
    res = solve_goal(profile, catalog, space, goal, flat)
    cost_first = goal.planning_deadline_s is not None
    if res is None:
        cut = pipelined_instead(profile, catalog, goal, limits, job, None)
        if cut is not None:
            return PlanResult(plan=cut)
        raise Infeasible(infeasible_message(profile, catalog, space, goal, limits.arch))
    best, pool = res
    choice = choice_of(space, int(pool.r[best]), int(pool.ni[best]), int(pool.j[best]))
    other = _other_sync(profile, catalog, space, goal, flat, limits, choice.sync)
    why = (
        "cheapest plan meeting the deadline (ties: faster)"
        if cost_first
        else "fastest plan within the budget (ties: cheaper)"
    )
    if goal.holds_back:
        why = f"cheapest plan meeting the deadline{reserve_words(goal)} (ties: faster)"
    notes = (
        why,
        "exact search over n, memory, arch, PS type and shard count, and S3 exchange with k "
        "reducers",
        *space.notes,
        "Lambda GB-s priced at tier 1 (one job stays below the first monthly tier)",
    )
    if profile.provisional:
        notes += (f"workload profile {profile.name} holds provisional figures: re-profile",)
    other_note = (f"best plan of the other gradient exchange (sync {other.sync if other else ''})",)
    other_plan = (
        build_plan(profile, catalog, other, goal, limits, job, other_note) if other else None
    )
    plan = build_plan(profile, catalog, choice, goal, limits, job, notes)
    plan = replace(
        plan,
        notes=(*plan.notes, sync_note(plan, other_plan, limits.sync)),
        other_sync_usd=None if other_plan is None else other_plan.cost.total_usd,
        other_sync_s=None if other_plan is None else other_plan.prediction.total_s,
    )
    alts = tuple(
        build_plan(
            profile,
            catalog,
            alt,
            goal,
            limits,
            job,
            (f"next-best alternative: {alternatives_rule(goal, f'n = {alt.n_workers}')}",),
        )
        for alt in _alternatives(
            profile, catalog, space, goal, flat, int(pool.ni[best]), alternatives
        )
    )
    front = frontier(profile, catalog, space, frontier_points) if frontier_points else ()
    cut = pipelined_instead(profile, catalog, goal, limits, job, plan)
    if cut is not None:  # the one-stage optimum becomes the first alternative
        return PlanResult(plan=cut, frontier=front, alternatives=(plan, *alts))
    return PlanResult(plan=plan, frontier=front, alternatives=alts, other_sync=other_plan)


def _other_sync(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    goal: Goal,
    flat: Flat,
    limits: Limits,
    chosen: str,
) -> Choice | None:
    """The optimum of the other exchange under the same goal; None if it cannot meet the goal or
    the limits force one exchange."""
    if limits.sync != "auto":
        return None
    other = flat.only_sync("s3" if chosen == "ps" else "ps")
    res = solve_goal(profile, catalog, space, goal, other)
    if res is None:
        return None
    i, pool = res
    return choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))
