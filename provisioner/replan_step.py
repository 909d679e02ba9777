"""The pace between two link Maps of a run that re-plans: `$.pace` in the state machine, JSON in
and JSON out, so the state machine's Pass state, the pace function (functions/pace.py: IO only)
and the emulator share one spelling of it.

A segment is the part of a run on one plan: the plan as it is, then each re-plan's. A check
reads the segment's link records (from `segment.first_invocation`), measures the progress since
the segment began, and decides on the segment's plan at the figures that plan was made from:
the given profile and catalog corrected by the segment's factors (each switch composes its own
onto them). `check` is that chaining, shared with replan_sim's played run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.profile import WorkloadProfile
from provisioner.replan import SWITCH, Decision, decide
from provisioner.replan_attach import catalog_of_plan
from provisioner.replan_figures import Factors, compose, corrected_catalog, corrected_profile
from provisioner.replan_pace import Progress, progress_from_links
from provisioner.runaway import plan_bounds
from provisioner.space import Infeasible

PACE_KEYS = ("n_workers", "memory_mb", "local_batch", "iterations_per_invocation", "dataset_prefix")


def shards_prefix(job: str, n_workers: int) -> str:
    """Where the shards of `n_workers` workers are (the prepare step's layout for that count)."""
    return f"{job}/shards-n{n_workers}"


def factors_to_dict(f: Factors) -> dict[str, Any]:
    return dataclasses.asdict(f)


def factors_from_dict(data: Any) -> Factors:
    """Factors from their dict; ValueError (one line) naming the bad member."""
    names = {f.name for f in dataclasses.fields(Factors)}
    if not isinstance(data, Mapping) or set(data) - names:
        raise ValueError(f"pace factors {data!r}: expected an object with {sorted(names)}")
    for key, value in data.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        if not (ok and math.isfinite(value)) and not (key == "gap_s" and value is None):
            raise ValueError(f"pace factors: {key} = {value!r} is not a positive number")
    values: dict[str, Any] = {k: (None if v is None else float(v)) for k, v in data.items()}
    return Factors(**values)


def figures_of(
    profile: WorkloadProfile, catalog: Catalog, factors: Factors | None
) -> tuple[WorkloadProfile, Catalog]:
    """The figures a segment's plan was made from: the given ones (the first segment's: None),
    else corrected by the segment's composed factors."""
    if factors is None:
        return profile, catalog
    return corrected_profile(profile, factors), corrected_catalog(catalog, factors)


def check(
    seg_plan: Plan, profile: WorkloadProfile, catalog: Catalog, factors: Factors | None,
    progress: Progress, plan: Plan, *, reshard_s: float = 0.0, links_run: int | None = None,
) -> tuple[Decision, Factors | None]:  # fmt: skip
    """One check of a segment (`progress` counted from the segment's start) and the factors of
    the next segment's figures (the segment's own on KEEP; composed with the decision's on a
    SWITCH). `plan`: the run's plan, whose `replan` holds the envelope and scale-down, and whose
    link bound a new plan must fit within after the `links_run` each worker has run."""
    if plan.replan is None:
        raise ValueError(f"plan {plan.job!r} has no replan (envelope); it runs as it is")
    figures = figures_of(profile, catalog, factors)
    left = None if links_run is None else plan_bounds(plan)[0] - links_run
    d = decide(seg_plan, *figures, progress, plan.replan.envelope,
               scale_down=plan.replan.scale_down, reshard_s=reshard_s,
               links_left=left)  # fmt: skip
    if d.action != SWITCH or d.plan is None:
        return d, factors
    return d, d.factors if factors is None else compose(factors, d.factors)


def _segment(plan: Plan | None, factors: Factors | None, first: int, start: int,
             started_s: float) -> dict[str, Any]:  # fmt: skip
    return {
        "plan": None if plan is None else plan.to_dict(),
        "factors": None if factors is None else factors_to_dict(factors),
        "first_invocation": first,
        "start_iteration": start,
        "started_s": float(started_s),
    }


def _values(plan: Plan, start_iteration: int, invocation: int) -> dict[str, Any]:
    return {
        "n_workers": plan.n_workers,
        "memory_mb": plan.memory_mb,
        "local_batch": plan.training.local_batch,
        "iterations_per_invocation": plan.iterations_per_invocation,
        "dataset_prefix": shards_prefix(plan.job, plan.n_workers),
        "start_iteration": start_iteration,
        "invocation": invocation,
        "ranks": list(range(plan.n_workers)),
    }


def initial_pace(plan: Plan) -> dict[str, Any]:
    """The pace before the first link: the plan's own values."""
    return {"done": False, **_values(plan, 0, 0), "stalls": 0, "switches": 0,
            "segment": _segment(None, None, 0, 0, 0.0)}  # fmt: skip


def _link_counts(links: Sequence[Mapping[str, Any]]) -> tuple[bool, int, int]:
    if not links:
        raise ValueError("pace: no link results (the Map returned an empty list)")
    try:
        done = all(bool(link["done"]) for link in links)
        start = min(int(link["start_iteration"]) for link in links)
        invocation = max(int(link["invocation"]) for link in links)
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"pace: link results {list(links)!r}: each needs done, start_iteration "
                         "and invocation") from None  # fmt: skip
    return done, start, invocation


def records_wanted(pace: Mapping[str, Any], links: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """The invocations of the segment whose link records a check reads, per rank (rank i's list
    at index i): from the segment's first invocation to the links just run. Empty when the
    check reads none (the run is done, or the links did not advance: a stall)."""
    done, start, invocation = _link_counts(links)
    if done or start <= int(pace["start_iteration"]):
        return []
    first = int(pace["segment"]["first_invocation"])
    return [list(range(first, invocation)) for _ in pace["ranks"]]


def _records_by_rank(records: Any) -> list[list[dict[str, Any]]]:
    if isinstance(records, Mapping):
        return [list(records[k]) for k in sorted(records, key=int)]
    return [list(r) for r in records]


def _decision_record(
    d: Decision | None, invocation: int, done: int, elapsed_s: float, seg_plan: Plan,
    story: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    new = None if d is None else d.plan

    def finite(x: float) -> float | None:  # JSON has no inf
        return float(x) if math.isfinite(x) else None

    return {
        "link": invocation,
        "iterations_done": done,
        "elapsed_s": float(elapsed_s),
        "status": "on track" if d is None else d.pace.status,
        "pace_ratio": 1.0 if d is None else float(d.pace.pace_ratio),
        "action": "keep" if new is None else "switch",
        "story": story if d is None else d.story,
        "from": {"n_workers": seg_plan.n_workers, "memory_mb": seg_plan.memory_mb},
        "to": None if new is None else {"n_workers": new.n_workers, "memory_mb": new.memory_mb},
        "keep_s": None if d is None else finite(d.keep_s),
        "keep_usd": None if d is None else finite(d.keep_usd),
        "new_s": None if d is None else finite(d.new_s),
        "new_usd": None if d is None else finite(d.new_usd),
        "deadline_s": seg_plan.goal.deadline_s if d is None else d.pace.deadline_s,
        "meets": True if d is None else bool(d.meets_deadline),
    }


def next_pace(
    pace: Mapping[str, Any], links: Sequence[Mapping[str, Any]], records: Any, elapsed_s: float,
    plan: Plan, profile: WorkloadProfile, catalog: Catalog,
) -> tuple[dict[str, Any], dict[str, Any] | None]:  # fmt: skip
    """The pace after a Map of links, and the decision record of its check (None when the run is
    done or the links did not advance: a stall runs the same event again, unchecked).
    `records`: the segment's link records per rank (records_wanted's invocations), `elapsed_s`:
    the run's wall time so far. `catalog`: the one the plan names; a re-plan prices its links
    on the pace-checked one the plan was made on (replan_attach.catalog_of_plan)."""
    catalog = catalog_of_plan(plan, catalog)
    out = {**pace, "segment": dict(pace["segment"])}
    done, start, invocation = _link_counts(links)
    if done:
        return {**out, "done": True}, None
    if start <= int(pace["start_iteration"]):
        return {**out, "stalls": int(pace["stalls"]) + 1}, None
    out.update(start_iteration=start, invocation=invocation, stalls=0)
    seg = pace["segment"]
    seg_plan = plan if seg["plan"] is None else Plan.from_dict(seg["plan"])
    factors = None if seg["factors"] is None else factors_from_dict(seg["factors"])
    since_s = float(elapsed_s) - float(seg["started_s"])
    try:
        progress = progress_from_links(_records_by_rank(records), since_s)
        d, after = check(seg_plan, profile, catalog, factors, progress, plan, links_run=invocation)
    except (Infeasible, ValueError) as err:  # the run goes on as it is; the record says why
        story = f"link {invocation}: keep {seg_plan.n_workers} × {seg_plan.memory_mb} MB ({err})"
        return out, _decision_record(None, invocation, start, elapsed_s, seg_plan, story)
    head = f"link {progress.links_done}:"  # decide counts the segment's links; the run's here
    if d.story.startswith(head):
        d = dataclasses.replace(d, story=f"link {invocation}:{d.story[len(head) :]}")
    record = _decision_record(d, invocation, start, elapsed_s, seg_plan)
    if d.action != SWITCH or d.plan is None:
        return out, record
    out.update(_values(d.plan, start, invocation))
    out["dataset_prefix"] = shards_prefix(plan.job, d.plan.n_workers)
    out["switches"] = int(pace["switches"]) + 1
    out["segment"] = _segment(d.plan, after, invocation, start, elapsed_s)
    return out, record
