"""Re-planning attached to a plan: which plans re-plan during their run, the catalog they are
made on and the envelope they carry (docs/replan.md).

A plan re-plans when the user leaves it on (`--replan on|scale-down`, `-c replan=`), the goal
has a deadline (a budget has no pace to fall behind) and the plan is one-stage (a pipelined
plan runs as it is). Such a plan is made on `replan_pace.pace_checked_catalog`: its links last
at most a tenth of the deadline, so the run is checked often enough, each extra link and each
check priced. Every other plan is the one made without re-planning, byte for byte.
"""

from __future__ import annotations

import math
from dataclasses import replace

from provisioner.catalog import Catalog
from provisioner.envelope import (
    CEILING_FACTOR,
    check_ceiling_factor,
    default_envelope,
    envelope_worst_case_usd,
)
from provisioner.parse import format_duration_s
from provisioner.plan import Goal, Plan
from provisioner.planner import Infeasible, PlanResult, plan_job
from provisioner.profile import WorkloadProfile
from provisioner.replan_pace import PACE_CHECKS, pace_checked_catalog
from provisioner.replan_spec import Envelope, ReplanSpec
from provisioner.space import Limits

REPLAN_CHOICES = ("on", "off", "scale-down")  # `on` is the default
DEFAULT_REPLAN = "on"
REPLAN_FORMS = "on (re-plan when behind), off (run as planned) or scale-down (also when ahead)"


def check_replan_mode(mode: str) -> str:
    """The mode, or ValueError naming it and the accepted ones (one line)."""
    if mode not in REPLAN_CHOICES:
        raise ValueError(f"replan {mode!r} is not accepted; use {REPLAN_FORMS}")
    return mode


def replan_catalog(mode: str, goal: Goal, catalog: Catalog) -> Catalog | None:
    """The catalog a re-planning plan is made on, None where the plan runs as it is (off, or a
    goal without a deadline; a deadline that is no positive number is plan_job's to refuse)."""
    deadline_s = goal.deadline_s
    if check_replan_mode(mode) == "off" or deadline_s is None:
        return None
    if not (math.isfinite(deadline_s) and deadline_s > 0):
        return None
    return pace_checked_catalog(catalog, deadline_s)


def plan_with_replan(
    profile: WorkloadProfile,
    catalog: Catalog,
    goal: Goal,
    limits: Limits,
    job: str,
    *,
    replan: str = "off",
    alternatives: int = 3,
    frontier_points: int = 12,
    ceiling: int = CEILING_FACTOR,
) -> PlanResult:
    """plan_job's result, re-planning attached where it applies (the module's rule), its
    envelope up to `ceiling` × the plan's workers and memory (default_envelope). Where the
    pace-checked catalog gives no one-stage plan (its extra links miss the deadline, or a
    pipelined plan wins), the plan is the one made without re-planning, with a note saying so
    when it is one-stage."""
    check_ceiling_factor(ceiling)
    checked = replan_catalog(replan, goal, catalog)
    kwargs = {"alternatives": alternatives, "frontier_points": frontier_points}
    if checked is None:
        return plan_job(profile, catalog, goal, limits, job, **kwargs)
    try:
        result: PlanResult | None = plan_job(profile, checked, goal, limits, job, **kwargs)
    except Infeasible:
        result = None
    if result is not None and result.plan.pipeline is None:
        plan = with_replan(result.plan, checked, limits, profile.min_memory_mb, replan, ceiling)
        return replace(result, plan=plan)
    plain = plan_job(profile, catalog, goal, limits, job, **kwargs)
    if plain.plan.pipeline is not None:
        return plain  # a pipelined plan runs as it is: no word, byte for byte
    why = ("with links cut for pace checks no plan meets the deadline" if result is None
           else "with links cut for pace checks the best plan is pipelined")  # fmt: skip
    note = runs_as_planned_note(why)
    return replace(plain, plan=replace(plain.plan, notes=(*plain.plan.notes, note)))


def catalog_of_plan(plan: Plan, catalog: Catalog) -> Catalog:
    """The catalog `plan` was made on from `catalog` (the one it names): the pace-checked one
    for a plan that re-plans, so its pace checks and re-plans price links as the plan did."""
    if plan.replan is None or plan.goal.deadline_s is None:
        return catalog
    return pace_checked_catalog(catalog, plan.goal.deadline_s)


def plan_envelope(
    plan: Plan, catalog: Catalog, limits: Limits, min_memory_mb: int,
    ceiling: int = CEILING_FACTOR,
) -> Envelope:  # fmt: skip
    """The default envelope (up to `ceiling` ×) within the user's limits: no memory variant
    above --max-memory-mb; an S3-exchange plan keeps its reducers across a switch (k ≤ n), so
    no count below them."""
    env = default_envelope(plan, catalog, limits, factor=ceiling, min_memory_mb=min_memory_mb)
    top_mb = limits.max_memory_mb
    variants = tuple(m for m in env.memory_variants_mb
                     if top_mb is None or m <= top_mb or m == plan.memory_mb)  # fmt: skip
    counts = env.worker_counts
    if plan.sync == "s3":
        counts = tuple(n for n in counts if n >= plan.reducers or n == plan.n_workers)
    return Envelope(env.max_workers, counts, variants)


def with_replan(
    plan: Plan, catalog: Catalog, limits: Limits, min_memory_mb: int, mode: str,
    ceiling: int = CEILING_FACTOR,
) -> Plan:  # fmt: skip
    """The plan (made on `catalog`, the pace-checked one) with its envelope, its worst case at
    the envelope's ceiling, and a note that its links are cut for the checks."""
    env = plan_envelope(plan, catalog, limits, min_memory_mb, ceiling)
    spec = ReplanSpec(env, envelope_worst_case_usd(plan, catalog, env), mode == "scale-down")
    return replace(plan, replan=spec, notes=(*plan.notes, pace_note(catalog)))


def pace_note(catalog: Catalog) -> str:
    """The plan note on its links: cut so the pace is checked, and priced."""
    return (
        f"links cut to at most {format_duration_s(catalog.max_link_s)} of training (deadline / "
        f"{PACE_CHECKS}) so the run's pace is checked at every boundary; each extra link and "
        "each check priced"
    )


def runs_as_planned_note(why: str) -> str:
    """The plan note where re-planning was asked for but the plan runs as it is."""
    return f"re-planning off: {why}; the plan runs as it is"
