"""A run's pace at a link boundary: what it measured, and whether it is on track for its deadline.

At a boundary every worker has returned its link results (functions/worker.py: `timings` and
`iterations_run`); they give the measured figures per term, read as the report reads them
(functions/terms.py). The check projects the remaining iterations at the measured pace on the
plan as it is and compares the finish with the deadline less the share of its reserve that is
left. Pure: no clock is read; the caller passes the wall time since the run began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from functions.terms import link_timing, orchestration_gap_s, startup_of, warm_startup_s
from provisioner.catalog import Catalog
from provisioner.plan import Plan

ON_TRACK, BEHIND, AHEAD = "on track", "behind", "ahead"
PACE_CHECKS = 10  # a run that re-plans is checked at least this often over its deadline


def pace_checked_catalog(catalog: Catalog, deadline_s: float, checks: int = PACE_CHECKS) -> Catalog:
    """The catalog whose links train at most deadline / checks (model.timeline caps a link's
    iterations by it; the link's start-up, load and checkpoint come on top), so a run's
    boundaries, where the pace is checked, come at least `checks` times in its training. Each
    link this adds is priced as any chained link (a start-up, a shard reload, a checkpoint) and
    each check as one invocation of the pace function (costs.pace_checks_usd), so the planner
    weighs the checks against the deadline like any other cost."""
    if not (math.isfinite(deadline_s) and deadline_s > 0 and checks >= 1):
        raise ValueError(f"pace checks: deadline {deadline_s!r} s and {checks!r} checks; use a "
                         "positive deadline and at least one check")  # fmt: skip
    return replace(catalog, max_link_s=deadline_s / checks)


@dataclass(frozen=True)
class Progress:
    """What a run has done and measured by a link boundary (figures per term, not wall pace,
    so one slow spell is attributed to the term it slowed)."""

    iterations_done: int
    elapsed_s: float  # wall time since the run began (the state machine's start)
    links_done: int  # links each worker has completed
    compute_per_iteration_s: float
    exchange_per_iteration_s: float  # the workers' communication: push, pull and the PS's wait
    startup_per_link_s: float  # a link's start-up (import, model build, PS sync)
    load_per_link_s: float  # the segment's first link's shard load (from S3: its shards are new)
    checkpoint_per_link_s: float  # the checkpoint each link writes before it returns
    gap_per_link_s: float  # the orchestration's gap between links (the model's restart_s)
    # A warm link's start-up (model build, PS sync: its environment has imported already), what
    # the rest of the run's links pay on the plan as it is; None: as startup_per_link_s.
    warm_startup_per_link_s: float | None = None
    # A warm link's shard load (the environment's /tmp cache), measured once a warm link ran;
    # None: not yet (the links left pay the first's, or none where re-links land warm).
    warm_load_per_link_s: float | None = None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def steady_exchange_s(links: list[dict[str, Any]]) -> float:
    """A worker's communication over its links less each link's first wait: that one is for
    the peers' start-up (a newcomer's cold start after a switch), which the slowest worker's
    start-up per link already counts, not a pace every iteration keeps."""
    return sum(
        max(0.0, link_timing(link, "communication") - link_timing(link, "first_wait"))
        for link in links
    )


def progress_from_links(links_by_worker: list[list[dict[str, Any]]], elapsed_s: float) -> Progress:
    """The Progress in the workers' link results (each worker's links in order). Per-iteration
    terms are the straggler's (the worker that computed longest: BSP waits for it); per-link
    terms the mean over links of the slowest worker at each link."""
    if not links_by_worker or not all(links_by_worker):
        raise ValueError("progress: every worker needs at least one link result")
    done = min(sum(int(link.get("iterations_run", 0)) for link in w) for w in links_by_worker)
    if done < 1:
        raise ValueError(f"progress: {done} iterations done; a pace needs at least one")

    def total(w: list[dict[str, Any]], term: str) -> float:
        return sum(link_timing(link, term) for link in w)

    straggler = max(links_by_worker, key=lambda w: total(w, "compute"))
    links = min(len(w) for w in links_by_worker)
    at = [[w[i] for w in links_by_worker] for i in range(links)]  # each link, every worker

    def per_link(read: Any, links_read: list[list[dict[str, Any]]] = at) -> float:
        return _mean([max(read(link) for link in same) for same in links_read])

    # The links after the first run in warm environments; until one has, the first link's
    # start-up less its import stands for them (a cold first link counted for every link left
    # projected a run twice as fast as its plan to miss its deadline: the demo's first check).
    warm = per_link(startup_of, at[1:]) if links > 1 else per_link(warm_startup_s)

    def load(link: dict[str, Any]) -> float:
        return link_timing(link, "load")

    return Progress(
        iterations_done=done,
        elapsed_s=float(elapsed_s),
        links_done=links,
        compute_per_iteration_s=total(straggler, "compute") / done,
        exchange_per_iteration_s=steady_exchange_s(straggler) / done,
        startup_per_link_s=per_link(startup_of),
        load_per_link_s=per_link(load, at[:1]),
        checkpoint_per_link_s=per_link(lambda link: link_timing(link, "checkpoint")),
        gap_per_link_s=per_link(orchestration_gap_s),
        warm_startup_per_link_s=warm,
        warm_load_per_link_s=per_link(load, at[1:]) if links > 1 else None,
    )


@dataclass(frozen=True)
class PaceCheck:
    """The verdict at a boundary and the figures behind it (seconds since the run began)."""

    status: str  # ON_TRACK, BEHIND (of the deadline) or AHEAD (of the plan)
    pace_ratio: float  # measured / predicted seconds per iteration (1.5: 1.5× slower)
    remaining_iterations: int
    projected_finish_s: float  # the plan as it is, at the measured pace
    target_s: float  # the deadline less what is left of its reserve (inf without a deadline)
    deadline_s: float | None


def measured_iteration_s(plan: Plan, progress: Progress) -> float:
    """One iteration at the measured pace: the measured compute and exchange, plus the plan's
    periodic checkpoint share (no link result times it apart)."""
    p = plan.prediction
    periodic = max(0.0, p.iteration_s - p.compute_per_iteration_s - p.exchange_per_iteration_s)
    return progress.compute_per_iteration_s + progress.exchange_per_iteration_s + periodic


def measured_link_s(progress: Progress, relinks_warm: bool = False) -> float:
    """A further link's fixed cost at the measured pace: a warm start-up, its load, its
    checkpoint and the gap. The load is a warm link's where one ran; before that the first
    link's (its shards from S3), or none where re-links land on the warm environment, which
    keeps its shards in /tmp (`relinks_warm`: the catalog's warm_start_s, as the model has it)."""
    warm = progress.warm_startup_per_link_s
    load = progress.warm_load_per_link_s
    if load is None:
        load = 0.0 if relinks_warm else progress.load_per_link_s
    return (
        (progress.startup_per_link_s if warm is None else warm)
        + load
        + progress.checkpoint_per_link_s
        + progress.gap_per_link_s
    )


def projected_remaining_s(plan: Plan, catalog: Catalog, progress: Progress) -> float:
    """The rest of the run on the plan as it is, at the measured pace: the remaining iterations
    and a fresh link for every invocation they take (a link fits fewer iterations when each is
    slower; inf when none fits)."""
    left = max(0, plan.training.iterations - progress.iterations_done)
    if left == 0:
        return 0.0
    it_s = measured_iteration_s(plan, progress)
    link_s = measured_link_s(progress, catalog.warm_start_s is not None)
    usable_s = plan.invocation_timeout_s - catalog.safety_margin_s - link_s
    fit = math.floor(usable_s / it_s) if it_s > 0 else plan.iterations_per_invocation
    per_link = min(plan.iterations_per_invocation, fit)
    if per_link < 1:
        return math.inf
    return left * it_s + math.ceil(left / per_link) * link_s


def reserve_left_s(plan: Plan, remaining_iterations: int) -> float:
    """The deadline's reserve (slack and the interval's top: what the plan held back) that is
    left, in proportion to the iterations left: spent evenly, none at the end."""
    goal = plan.goal
    if goal.deadline_s is None or goal.planning_deadline_s is None:
        return 0.0
    reserve = goal.deadline_s - goal.planning_deadline_s
    return reserve * remaining_iterations / max(plan.training.iterations, 1)


def check_pace(plan: Plan, catalog: Catalog, progress: Progress, switch_s: float) -> PaceCheck:
    """On track, behind (the projected finish misses the deadline less its reserve left) or
    ahead (beats the plan's own predicted finish by more than `switch_s`, what a switch of plan
    costs in time: the plan is the cheapest that met the deadline, so only a run faster than it
    can afford a cheaper one)."""
    left = max(0, plan.training.iterations - progress.iterations_done)
    ratio = measured_iteration_s(plan, progress) / plan.prediction.iteration_s
    finish = progress.elapsed_s + projected_remaining_s(plan, catalog, progress)
    deadline = plan.goal.deadline_s
    target = math.inf if deadline is None else deadline - reserve_left_s(plan, left)
    status = ON_TRACK
    if finish > target:
        status = BEHIND
    elif deadline is not None and left > 0 and plan.prediction.total_s - finish > switch_s:
        status = AHEAD  # ahead of the plan's own finish, not of the deadline it had room under
    return PaceCheck(
        status=status,
        pace_ratio=ratio,
        remaining_iterations=left,
        projected_finish_s=finish,
        target_s=target,
        deadline_s=deadline,
    )
