"""Re-planning at a link boundary: keep the plan, or switch the rest of the run to a new one.

The pace check (replan_pace) says whether the run is behind or well ahead; if so, the same
exact search re-plans the remaining iterations at the figures the run measured (replan_figures)
within the envelope the deployed app allows (envelope, replan_search), for the time left: the
deadline less the reserve left, the time spent and the switch's own cost. A switch goes through
the checkpoint every link writes: the new workers resume from it at the same global batch.
What a switch costs beyond the new plan's first link (its cold start and shard load, which the
model prices as any first link) is `switch_s`: the pace step's own hand-over (one gap between
links) and the re-shard where shards for the new count were not prepared at synth, with the PS
and its endpoints billed while it lasts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from provisioner.catalog import Catalog
from provisioner.parse import format_usd
from provisioner.plan import Goal, Plan
from provisioner.planner import build_plan
from provisioner.profile import WorkloadProfile
from provisioner.replan_figures import (
    Factors,
    corrected_catalog,
    corrected_profile,
    fitted_factors,
    remaining_profile,
)
from provisioner.replan_pace import AHEAD, BEHIND, PaceCheck, Progress, check_pace
from provisioner.replan_search import cheapest_within, envelope_limits, fastest_within, plan_choice
from provisioner.replan_spec import Envelope
from provisioner.space import Choice, Infeasible

KEEP, SWITCH = "keep", "switch"


@dataclass(frozen=True)
class Decision:
    """What to do at a boundary, and the figures that decided it (the rest of the run only)."""

    action: str  # KEEP or SWITCH
    pace: PaceCheck
    plan: Plan | None  # SWITCH: the new plan of the remaining iterations (its training resumes)
    resume_iteration: int  # the iteration the rest starts from (the checkpoint's)
    keep_s: float  # the rest on the plan as it is, at the measured pace (the model's)
    keep_usd: float
    new_s: float  # the rest on the new plan, with the switch (keep_s on KEEP)
    new_usd: float
    meets_deadline: bool  # whether the chosen way's predicted finish is within the deadline
    story: str  # one line for the report
    # measured / predicted against the figures `decide` was given; after a switch the next
    # check passes figures_after(...) of them with the new plan and the progress since the switch
    factors: Factors = Factors()


def figures_after(
    profile: WorkloadProfile, catalog: Catalog, decision: Decision
) -> tuple[WorkloadProfile, Catalog]:
    """The figures the decision's new plan was made from (the given ones, corrected)."""
    return corrected_profile(profile, decision.factors), corrected_catalog(
        catalog, decision.factors
    )


def switch_s(catalog: Catalog, reshard_s: float) -> float:
    """A switch's time beyond the new plan's own first link: one hand-over and the re-shard."""
    return catalog.restart_s + reshard_s


def switch_usd(plan: Plan, catalog: Catalog, seconds: float) -> float:
    """What runs while a switch lasts: the PS shards and the endpoints (Lambda bills nothing)."""
    hourly = 0.0
    if plan.sync == "ps":
        hourly = plan.ps_count * catalog.ps_type(plan.ps_type).usd_per_hour
        hourly += len(plan.interface_endpoints) * catalog.endpoint_usd_per_hour
    return hourly * seconds / 3600.0


def rest_goal(pace: PaceCheck, elapsed_s: float, switch_s_: float) -> Goal:
    """The new plan's goal, for the checks after a switch (their progress counted from the
    switch): the deadline less the time spent, holding back the reserve still left and the
    switch's own time, so the next check's target is this one's."""
    if pace.deadline_s is None or pace.deadline_s <= elapsed_s:
        return Goal()  # no deadline, or one already passed: nothing left to hold back from
    left_s = pace.deadline_s - elapsed_s
    held_s = pace.deadline_s - pace.target_s + switch_s_
    return Goal(deadline_s=left_s, slack=min(held_s / left_s, 1.0), interval_high=1.0)


def _rest_plan(
    profile: WorkloadProfile, catalog: Catalog, plan: Plan, envelope: Envelope, choice: Choice,
    goal: Goal, left: int,
) -> Plan:  # fmt: skip
    """The Plan of `choice` for the remaining `left` iterations, its training the run's own (the
    dataset, epochs and global batch stay; the local batch is b_g / n)."""
    rest = build_plan(
        profile, catalog, choice, goal, envelope_limits(plan, envelope),
        plan.job, (f"re-planned for the remaining {left} iterations",),
    )  # fmt: skip
    b_g = plan.training.global_batch
    training = replace(
        plan.training,
        local_batch=b_g // choice.n_workers,
        iterations=left,
        checkpoint_every_iterations=rest.training.checkpoint_every_iterations,
    )
    return replace(rest, workload=plan.workload, catalog=plan.catalog, training=training)


def _story(
    link: int, pace: PaceCheck, plan: Plan, new: Plan | None, impact_usd: float, finish_s: float
) -> str:
    head = f"link {link}: pace {pace.pace_ratio:.2f}× the plan's"
    was = f"{plan.n_workers} × {plan.memory_mb} MB"
    of = "" if pace.deadline_s is None else f" of {pace.deadline_s:.1f} s"
    if new is None:
        return f"{head}; keep {was}, predicted finish {finish_s:.1f} s{of}"
    sign = "+" if impact_usd >= 0 else "-"
    return (
        f"{head}; {was} → {new.n_workers} × {new.memory_mb} MB, {sign}"
        f"{format_usd(abs(impact_usd))}, predicted finish {finish_s:.1f} s{of}"
    )


def decide(
    plan: Plan,
    profile: WorkloadProfile,
    catalog: Catalog,
    progress: Progress,
    envelope: Envelope,
    *,
    scale_down: bool = False,
    reshard_s: float = 0.0,
    links_left: int | None = None,
) -> Decision:
    """Keep the plan, or switch the rest of the run: behind, to the cheapest configuration of the
    envelope that meets the deadline (else the fastest, if it beats the plan as it is); well
    ahead with `scale_down`, to a cheaper one that still meets it, if it saves more than the
    switch costs. `profile` and `catalog`: the figures the plan was made from (the plan's own;
    after a switch, figures_after). `links_left`: the links each worker may still run under the
    run's bound (the state machine fails the run past it), which a new plan must fit. A
    pipelined plan is refused (one line): its stages are re-planned by nothing here."""
    if plan.pipeline is not None:
        raise ValueError(
            f"plan {plan.job!r} is pipelined ({len(plan.pipeline.stages)} stages); re-planning "
            "covers one-stage plans"
        )
    left = max(0, plan.training.iterations - progress.iterations_done)
    rest = remaining_profile(profile, plan, max(left, 1))
    f = fitted_factors(plan, rest, catalog, progress)
    rest_profile = corrected_profile(rest, f)
    rest_catalog = corrected_catalog(catalog, f)
    sw_s = switch_s(rest_catalog, reshard_s)
    pace = check_pace(plan, catalog, progress, sw_s)
    try:
        kept = _rest_plan(
            rest_profile, rest_catalog, plan, envelope, plan_choice(plan), Goal(), left
        )
        keep_s, keep_usd = kept.prediction.total_s, kept.cost.total_usd
    except Infeasible:  # at the measured pace not one iteration fits a link
        keep_s, keep_usd = math.inf, math.inf
    keep_finish = progress.elapsed_s + keep_s
    deadline = pace.deadline_s

    def keep(meets: bool) -> Decision:
        return Decision(KEEP, pace, None, progress.iterations_done, keep_s, keep_usd, keep_s,
                        keep_usd, meets, _story(progress.links_done, pace, plan, None, 0.0,
                                                keep_finish), f)  # fmt: skip

    on_time = deadline is None or keep_finish <= deadline
    wants = pace.status == BEHIND or (pace.status == AHEAD and scale_down)
    if left == 0 or not wants:
        return keep(on_time)
    time_left_s = pace.target_s - progress.elapsed_s - sw_s
    try:
        choice = cheapest_within(rest_profile, rest_catalog, plan, envelope, time_left_s)
        if choice is None and pace.status == BEHIND:
            choice = fastest_within(rest_profile, rest_catalog, plan, envelope)
    except Infeasible:
        choice = None
    if choice is None or choice == plan_choice(plan):
        return keep(on_time)
    goal = rest_goal(pace, progress.elapsed_s, sw_s)
    new = _rest_plan(rest_profile, rest_catalog, plan, envelope, choice, goal, left)
    extra_usd = switch_usd(plan, catalog, sw_s)
    new_s, new_usd = sw_s + new.prediction.total_s, extra_usd + new.cost.total_usd
    no_gain = new_s >= keep_s if pace.status == BEHIND else new_usd >= keep_usd
    if no_gain:  # behind: no faster than the plan as it is; ahead: no cheaper with the switch
        return keep(on_time)
    if links_left is not None and new.invocations_per_worker > links_left:
        return keep(on_time)  # the run's link bound would fail it before the new plan ends
    finish = progress.elapsed_s + new_s
    story = _story(progress.links_done, pace, plan, new, new_usd - keep_usd, finish)
    return Decision(
        action=SWITCH,
        pace=pace,
        plan=new,
        resume_iteration=progress.iterations_done,
        keep_s=keep_s,
        keep_usd=keep_usd,
        new_s=new_s,
        new_usd=new_usd,
        meets_deadline=deadline is None or finish <= deadline,
        story=story,
        factors=f,
    )
