"""Report arithmetic and the progress line: pure functions over made-up invocation results."""

from __future__ import annotations

import math

from emulator.orchestrator import WorkerState
from emulator.progress import eta_s, render_line
from emulator.report import link_timing, loss_curve, smoothed_first_last, worker_terms


def _link(losses: list[list[float]], **timings: float) -> dict:  # type: ignore[type-arg]
    return {
        "losses": losses,
        "timings": timings,
        "wall_s": 10.0,
        "emulator_timings": {"handler_import_s": 2.0},
    }


def test_worker_terms_sum_links_and_split_startup_from_chaining() -> None:
    worker = WorkerState(rank=0, event={})
    worker.links = [
        _link([], load_s=0.5, compute_s=3.0, communication_s=1.0, startup_s=4.0, checkpoint_s=0.1),
        _link([], load_s=0.2, compute_s=2.0, communication_s=0.5, startup_s=3.0, checkpoint_s=0.1),
    ]
    terms = worker_terms(worker)
    assert terms["compute"] == 5.0
    assert terms["communication"] == 1.5
    assert terms["load"] == 0.5  # the first link's load; later reloads are chaining
    assert terms["startup"] == 4.0
    assert math.isclose(terms["chaining"], 3.0 + 0.2 + 0.1 + 0.1)
    assert terms["wall"] == 20.0


def test_link_timing_falls_back_to_push_plus_pull_and_to_zero() -> None:
    assert link_timing({"timings": {"push_s": 1.0, "pull_s": 2.0}}, "communication") == 3.0
    assert link_timing({"timings": {}}, "compute") == 0.0


def test_loss_curve_averages_workers_per_iteration() -> None:
    a, b = WorkerState(rank=0, event={}), WorkerState(rank=1, event={})
    a.links = [_link([[0, 2.0], [1, 1.0]])]
    b.links = [_link([[0, 4.0], [1, 3.0]])]
    assert loss_curve([a, b]) == [(0, 3.0), (1, 2.0)]
    assert smoothed_first_last([(0, 3.0), (1, 2.0)], window=1) == (3.0, 2.0)


def test_progress_line_shows_eta_and_deadline_verdict() -> None:
    assert eta_s(0, 100, 5.0) is None
    assert eta_s(25, 100, 10.0) == 30.0
    line = render_line(25, 100, 0.5, 10.0, deadline_s=30.0, width=4)
    assert line.startswith("[#---] it 25/100")
    assert "loss 0.5000" in line and "ETA 30s" in line and "(LATE)" in line
    assert "(on time)" in render_line(50, 100, None, 10.0, deadline_s=60.0)


def test_json_safe_turns_nan_into_null() -> None:
    from emulator.report import json_safe

    assert json_safe({"a": [1.0, math.nan], "b": {"c": math.inf}}) == {
        "a": [1.0, None],
        "b": {"c": None},
    }
