"""The pace between link Maps (provisioner/replan_step.py), driven with link results and link
records as the state machine and the workers give them, and the elapsed time the test sets (no
clock is read). The workload is tests/provisioner/test_replan.py's: 8 × 896 MB, ten links of 32
iterations, a 160 s deadline."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.profile import WorkloadProfile
from provisioner.replan import KEEP, SWITCH, decide, figures_after
from provisioner.replan_attach import catalog_of_plan
from provisioner.replan_figures import Factors, compose
from provisioner.replan_pace import Progress
from provisioner.replan_spec import ReplanSpec
from provisioner.replan_step import (
    check,
    factors_from_dict,
    factors_to_dict,
    initial_pace,
    next_pace,
    records_wanted,
)
from tests.provisioner.test_replan import at_pace, case  # noqa: F401 (the module's fixture)


@pytest.fixture(scope="module")
def run(case) -> tuple[WorkloadProfile, Catalog, Plan]:  # noqa: F811
    profile, catalog, plan, envelope = case
    return profile, catalog, dataclasses.replace(plan, replan=ReplanSpec(envelope, 1.0))


def link_record(progress: Progress, iterations: int) -> dict[str, Any]:
    """One link's record as a worker writes it, at `progress`'s per-iteration and per-link
    figures (progress_from_links reads them back)."""
    handler_s = (
        progress.startup_per_link_s + progress.load_per_link_s + progress.checkpoint_per_link_s
        + iterations * (progress.compute_per_iteration_s + progress.exchange_per_iteration_s)
    )  # fmt: skip
    return {
        "iterations_run": iterations,
        "timings": {
            "compute_s": iterations * progress.compute_per_iteration_s,
            "communication_s": iterations * progress.exchange_per_iteration_s,
            "startup_s": progress.startup_per_link_s,
            "load_s": progress.load_per_link_s,
            "checkpoint_s": progress.checkpoint_per_link_s,
            "total_s": handler_s,
        },
        "wall_s": handler_s + progress.gap_per_link_s,
    }


def records_at(progress: Progress, n_workers: int, per_link: int) -> dict[str, list]:
    """Every rank's records of `progress.links_done` links (JSON keys: the ranks as text)."""
    one = link_record(progress, per_link)
    return {str(r): [one] * progress.links_done for r in range(n_workers)}


def links_at(n_workers: int, start: int, invocation: int, done: bool = False) -> list[dict]:
    return [{"done": done, "start_iteration": start, "invocation": invocation}] * n_workers


def step(run, pace, links_done: int, speed: float, seg_plan: Plan | None = None, since_s=0.0):
    """The pace after the segment's `links_done`-th link at `speed` × its plan's pace."""
    profile, catalog, plan = run
    seg = seg_plan or plan
    progress = at_pace(seg, catalog, links_done, speed)
    per = seg.iterations_per_invocation
    first = pace["segment"]["first_invocation"]
    links = links_at(seg.n_workers, pace["segment"]["start_iteration"] + links_done * per,
                     first + links_done)  # fmt: skip
    assert records_wanted(pace, links) == [list(range(first, first + links_done))] * seg.n_workers
    records = records_at(progress, seg.n_workers, per)
    elapsed_s = since_s + progress.elapsed_s
    new, record = next_pace(pace, links, records, elapsed_s, plan, profile, catalog)
    json.dumps(new), json.dumps(record)  # JSON in, JSON out
    return new, record, progress


def test_the_initial_pace_is_the_plans_own(run) -> None:
    _, _, plan = run
    pace = initial_pace(plan)
    assert pace == json.loads(json.dumps(pace))
    assert (pace["n_workers"], pace["memory_mb"], pace["local_batch"]) == (
        plan.n_workers, plan.memory_mb, plan.training.local_batch)  # fmt: skip
    assert pace["iterations_per_invocation"] == plan.iterations_per_invocation
    assert pace["dataset_prefix"] == f"t/shards-n{plan.n_workers}"
    assert pace["ranks"] == list(range(plan.n_workers))
    assert (pace["invocation"], pace["start_iteration"], pace["stalls"], pace["done"]) == (
        0, 0, 0, False)  # fmt: skip
    assert pace["segment"] == {"plan": None, "factors": None, "first_invocation": 0,
                               "start_iteration": 0, "started_s": 0.0}  # fmt: skip


def test_on_pace_it_keeps_and_counts_the_links(run) -> None:
    _, _, plan = run
    pace, record, _ = step(run, initial_pace(plan), 3, 1.0)
    assert record["action"] == KEEP and record["to"] is None and record["status"] == "on track"
    assert record["link"] == 3 and record["iterations_done"] == 96 and record["meets"]
    assert record["from"] == {"n_workers": plan.n_workers, "memory_mb": plan.memory_mb}
    assert record["pace_ratio"] == pytest.approx(1.0)
    assert record["story"].startswith("link 3: pace 1.00× the plan's; keep ")
    assert (pace["invocation"], pace["start_iteration"], pace["switches"]) == (3, 96, 0)
    assert pace["n_workers"] == plan.n_workers and pace["segment"]["plan"] is None


def test_behind_it_switches_to_the_re_plan(run) -> None:
    profile, catalog, plan = run
    pace, record, progress = step(run, initial_pace(plan), 2, 1.5)
    # a re-plan prices links as the plan was made: on its pace-checked catalog
    checked = catalog_of_plan(plan, catalog)
    d = decide(plan, profile, checked, progress, plan.replan.envelope)
    assert d.action == SWITCH and record["action"] == SWITCH and record["status"] == "behind"
    new = d.plan
    assert record["to"] == {"n_workers": new.n_workers, "memory_mb": new.memory_mb}
    assert (record["new_s"], record["keep_s"]) == (pytest.approx(d.new_s), pytest.approx(d.keep_s))
    assert record["story"] == d.story and record["story"].startswith("link 2: pace 1.50×")
    assert pace["n_workers"] == new.n_workers != plan.n_workers
    assert pace["ranks"] == list(range(new.n_workers))
    assert pace["local_batch"] * new.n_workers == plan.training.global_batch
    assert (pace["memory_mb"], pace["iterations_per_invocation"]) == (
        new.memory_mb, new.iterations_per_invocation)  # fmt: skip
    assert pace["dataset_prefix"] == f"t/shards-n{new.n_workers}"
    assert (pace["invocation"], pace["start_iteration"], pace["switches"]) == (2, 64, 1)
    seg = pace["segment"]
    assert Plan.from_dict(seg["plan"]) == new
    assert factors_from_dict(seg["factors"]) == d.factors
    assert (seg["first_invocation"], seg["start_iteration"]) == (2, 64)
    assert seg["started_s"] == pytest.approx(progress.elapsed_s)


def test_behind_near_the_runs_link_bound_it_keeps_the_plan(run) -> None:
    """The same check 1.5× behind, on a plan whose bound leaves each worker fewer links than
    the re-plan needs: the state machine would fail the run as runaway, so the check keeps."""
    _, _, plan = run
    _, switched, _ = step(run, initial_pace(plan), 2, 1.5)
    assert switched["action"] == SWITCH
    tight = dataclasses.replace(plan, max_links_per_worker=3)
    _, record, _ = step((run[0], run[1], tight), initial_pace(tight), 2, 1.5)
    assert record["action"] == KEEP and record["status"] == "behind"


def test_after_a_switch_the_check_uses_the_new_plan_its_figures_and_the_links_since(run) -> None:
    profile, catalog, plan = run
    pace, _, progress = step(run, initial_pace(plan), 2, 1.5)
    first = decide(plan, profile, catalog, progress, plan.replan.envelope)
    new = first.plan
    # the run goes on at the re-plan's own (corrected) pace: one link of the new segment
    _, corrected = figures_after(profile, catalog, first)
    since = at_pace(new, corrected, 1, 1.0)
    per = new.iterations_per_invocation
    links = links_at(new.n_workers, 64 + per, 3)
    assert records_wanted(pace, links) == [[2]] * new.n_workers  # the segment's link only
    records = records_at(since, new.n_workers, per)
    after, record = next_pace(pace, links, records, progress.elapsed_s + since.elapsed_s,
                              plan, profile, catalog)  # fmt: skip
    # the invocation keeps counting across segments: the runaway cap spans them
    assert (after["invocation"], after["start_iteration"]) == (3, 64 + per)
    assert after["segment"]["first_invocation"] in (2, 3)
    expected = decide(new, *figures_after(profile, catalog, first), since, plan.replan.envelope)
    assert record["keep_s"] == pytest.approx(expected.keep_s, rel=1e-9)
    assert record["link"] == 3 and record["iterations_done"] == 64 + per
    assert record["from"] == {"n_workers": new.n_workers, "memory_mb": new.memory_mb}
    # not the check of the new plan at the original figures (the fit nearly recovers them:
    # 13 ms apart here, a thousand times the tolerance above)
    naive = decide(new, profile, catalog, since, plan.replan.envelope)
    assert abs(naive.keep_s - expected.keep_s) > 1e-3


def test_factors_compose_across_switches(run) -> None:
    profile, catalog, plan = run
    earlier = Factors(compute=1.2, exchange=1.1, gap_s=0.3)
    progress = at_pace(plan, catalog, 2, 1.5)
    d, after = check(plan, profile, catalog, earlier, progress, plan)
    assert d.action == SWITCH and after == compose(earlier, d.factors)
    kept, same = check(plan, profile, catalog, earlier, at_pace(plan, catalog, 2, 1.0), plan)
    assert same == earlier


def test_a_link_map_that_did_not_advance_is_a_stall(run) -> None:
    profile, catalog, plan = run
    pace, _, _ = step(run, initial_pace(plan), 1, 1.0)
    stuck = links_at(plan.n_workers, pace["start_iteration"], pace["invocation"] + 1)
    assert records_wanted(pace, stuck) == []
    once, record = next_pace(pace, stuck, {}, 99.0, plan, profile, catalog)
    assert record is None and once["stalls"] == 1
    assert (once["invocation"], once["start_iteration"]) == (pace["invocation"], 32)
    twice, _ = next_pace(once, stuck, {}, 120.0, plan, profile, catalog)
    assert twice["stalls"] == 2
    moved, record, _ = step(run, once, 2, 1.0)
    assert moved["stalls"] == 0 and record is not None


def test_all_links_done_ends_the_run(run) -> None:
    profile, catalog, plan = run
    pace = initial_pace(plan)
    links = links_at(plan.n_workers, 320, 10, done=True)
    assert records_wanted(pace, links) == []
    out, record = next_pace(pace, links, {}, 150.0, plan, profile, catalog)
    assert out["done"] is True and record is None


def test_a_check_that_fails_keeps_and_says_why(run) -> None:
    profile, catalog, plan = run
    pace = initial_pace(plan)
    links = links_at(plan.n_workers, 32, 1)
    records = {str(r): [{"iterations_run": 0, "timings": {}}] for r in range(plan.n_workers)}
    out, record = next_pace(pace, links, records, 20.0, plan, profile, catalog)
    assert record["action"] == KEEP and "0 iterations done" in record["story"]
    assert out["n_workers"] == plan.n_workers and out["invocation"] == 1


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"compute": 0}, "compute = 0"),
        ({"speed": 1.0}, "expected an object"),
        ({"gap_s": "x"}, "gap_s = 'x'"),
    ],  # fmt: skip
)
def test_bad_factors_are_refused_in_one_line(data, match) -> None:
    with pytest.raises(ValueError, match=match):
        factors_from_dict(data)


def test_factors_round_trip() -> None:
    f = Factors(compute=1.5, exchange=2.0, startup=1.1, load=0.9, gap_s=0.25)
    assert factors_from_dict(json.loads(json.dumps(factors_to_dict(f)))) == f
    assert factors_from_dict(factors_to_dict(Factors())) == Factors()


def test_links_without_their_counts_are_refused(run) -> None:
    profile, catalog, plan = run
    with pytest.raises(ValueError, match="each needs done, start_iteration and invocation"):
        next_pace(initial_pace(plan), [{"done": False}], {}, 1.0, plan, profile, catalog)
