"""bench.replan's tables, so they cannot rot: on the model, at the catalog's speed the run keeps
its plan and at 1.5× slower re-planning meets the deadline the fixed plan misses; the emulator's
table (from its runs' rows) and the larger envelopes it tries for the slowest case."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replan import case_lines as model_case_lines
from bench.replan_emulator import (
    FIT_TRIES,
    SLOWDOWNS,
    Case,
    at_scale,
    candidate_envelopes,
    case_lines,
    next_scale,
    target_band,
)
from provisioner.plan import Goal
from provisioner.replan_attach import plan_with_replan
from provisioner.space import Limits


def test_the_fixed_plan_misses_at_one_and_a_half_and_the_replanned_meets() -> None:
    lines = model_case_lines("paper-cifar10-mobilenetv2", 1200.0)
    rows = {line.split(" | ")[0]: line.split(" | ") for line in lines if line.startswith("| ")}
    same = rows["| 1×"]
    assert same[2] == same[5] == "yes" and same[1] == same[4] and same[-1] == "– |"
    slow = rows["| 1.5×"]
    assert (slow[2], slow[5]) == ("no", "yes")
    assert slow[-1].startswith("link 1: pace 1.50× the plan's")


def _case() -> Case:
    from provisioner import load_profile
    from provisioner.catalog import catalog_from_dict
    from provisioner.replan_pace import pace_checked_catalog
    from tests.local_catalog import shared_core_catalog_dict

    catalog = pace_checked_catalog(catalog_from_dict(shared_core_catalog_dict()), 20.0)
    profile = load_profile("digits-mlp")
    plan = plan_with_replan(profile, catalog, Goal(deadline_s=20.0), Limits(), "bench",
                            replan="on", alternatives=0, frontier_points=0).plan  # fmt: skip
    return Case("digits-mlp", 20.0, plan, profile, catalog)


def test_the_emulator_table_has_a_row_per_slowdown_fixed_beside_re_planned() -> None:
    case = _case()
    rows = []
    for slowdown in SLOWDOWNS:
        rows.append({"slowdown": slowdown, "replan": False, "total_s": 14.0 * slowdown,
                     "met": 14.0 * slowdown <= 20.0, "cost_usd": 0.004, "stories": [],
                     "checks": 0})  # fmt: skip
        rows.append({"slowdown": slowdown, "replan": True, "total_s": 14.0, "met": True,
                     "cost_usd": 0.005, "stories": ["link 1: pace 2.00× the plan's"],
                     "checks": 14, "first_pace": 2.0})  # fmt: skip
    rows[-1] = {"slowdown": 3.0, "replan": True, "failed": "run timeout"}
    lines = case_lines(case, rows, "needed: more")
    table = [line for line in lines if line.startswith("| ") and "×" in line.split(" | ")[0]]
    assert [line.split(" | ")[0] for line in table] == ["| 1×", "| 1.5×", "| 2×", "| 3×"]
    cells = table[2].split(" | ")  # 2×: the fixed plan misses, the re-planned meets
    assert cells[1:8] == ["0.500", "28.0 s", "no", "$0.0040", "14.0 s", "yes", "$0.0050"]
    assert cells[-3:] == ["14", "2.00×", "link 1: pace 2.00× the plan's |"]
    assert "failed (run timeout) | no" in table[3]
    assert lines[-2] == "needed: more"


def test_larger_envelopes_are_tried_and_this_machine_holds_more_vcpu_at_a_slower_scale() -> None:
    case = _case()
    slow = at_scale(case.catalog, 3.0)
    assert case.catalog.total_vcpu is not None and slow.total_vcpu is not None
    assert slow.total_vcpu == 3 * case.catalog.total_vcpu
    envelopes = candidate_envelopes(case.plan, slow)
    assert max(e.max_workers for e in envelopes) > case.plan.n_workers
    assert max(max(e.memory_variants_mb) for e in envelopes) > 2 * case.plan.memory_mb
    assert all(e.max_workers <= case.plan.training.global_batch for e in envelopes)


def test_a_rows_cpu_scale_is_the_one_it_ran_at_for_its_deadline_ratio() -> None:
    """Rows carry the cpu scale for-deadline:R gave them; the table shows it, not 1 / R."""
    case = _case()
    rows = []
    for slowdown in SLOWDOWNS:
        for replan in (False, True):
            rows.append({"slowdown": slowdown, "cpu_scale": 0.9 / slowdown, "replan": replan,
                         "total_s": 19.0, "met": True, "cost_usd": 0.004, "stories": [],
                         "checks": 3, "first_pace": 1.0})  # fmt: skip
    table = [line for line in case_lines(case, rows, "") if line.startswith("| 1.5×")]
    assert table[0].split(" | ")[1] == "0.600"


def test_the_next_scale_follows_the_measured_runs_to_the_target() -> None:
    assert next_scale([(0.5, 30.0)], 60.0) == 0.25  # one run: time ∝ 1 / scale
    # two runs on T = 10 / s²: the log-log secant lands on s = √(10 / 90)
    assert abs(next_scale([(0.5, 40.0), (0.4, 62.5)], 90.0) - (10 / 90) ** 0.5) < 1e-9
    # a run that failed (too slow) at 0.2: no lower than it, halfway to the run above
    assert abs(next_scale([(0.4, 50.0), (0.2, None)], 200.0) - (0.2 * 0.4) ** 0.5) < 1e-9
    assert abs(next_scale([(0.3, None)], 20.0) - 0.45) < 1e-9  # only a failed run: 1.5× it
    assert next_scale([(0.9, 1.0)], 0.1) == 1.0  # never past a full core per vCPU


def test_a_rows_fixed_run_is_fitted_until_it_takes_its_slowdown_of_the_deadline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A platform whose run takes 20 s × (0.5 / scale)^2.5, worse than the model's 1 / scale:
    every row's fixed run ends in its band within FIT_TRIES runs, and keeps its tries."""
    import bench.replan_emulator as bench

    def emulate(case: Case, slowdown: float, scale: float, replan: bool, *_: object) -> dict:
        total = None if scale < 0.15 else 20.0 * (0.5 / scale) ** 2.5
        return {"slowdown": slowdown, "cpu_scale": scale, "replan": replan, "total_s": total}

    monkeypatch.setattr(bench, "emulate", emulate)
    case = _case()
    points: list[tuple[float, float | None]] = [(0.5, 20.0)]
    for slowdown in SLOWDOWNS:
        row = bench.fit_fixed_run(case, slowdown, 0.5 / slowdown, points, None, tmp_path)
        low, high = target_band(slowdown, 20.0)
        assert low <= row["total_s"] <= high, (slowdown, row["tries"])
        assert 1 <= len(row["tries"]) <= FIT_TRIES and row["tries"][-1][0] == row["cpu_scale"]
    assert target_band(1.0, 20.0) == (16.0, 20.0)


def test_a_fixed_run_that_cannot_finish_ends_the_fitting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past its link bound the fixed plan fails (misses): the row keeps that scale for the
    re-planning run instead of climbing to a scale where the fixed plan finishes."""
    import bench.replan_emulator as bench

    calls: list[float] = []

    def emulate(case: Case, slowdown: float, scale: float, replan: bool, *_: object) -> dict:
        calls.append(scale)
        return {"slowdown": slowdown, "cpu_scale": scale, "replan": replan, "failed": "runaway"}

    monkeypatch.setattr(bench, "emulate", emulate)
    row = bench.fit_fixed_run(_case(), 2.0, 0.2, [(0.4, 20.0)], None, tmp_path)
    assert calls == [0.2] and row["tries"] == [[0.2, None]] and row["cpu_scale"] == 0.2


def test_a_failed_run_is_shown_by_what_failed_it() -> None:
    from bench.replan_emulator import failure_words

    error = ("States.Fail: A step failed; see the execution history. (Workers caught "
             "TooManyLinks: A worker ran 17 links, the plan's bound.)")  # fmt: skip
    assert failure_words(error) == "TooManyLinks: A worker ran 17 links, the plan's bound"
    assert failure_words("worker 0 failed 3 times") == "worker 0 failed 3 times"
