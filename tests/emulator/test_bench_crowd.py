"""The crowd benchmark: its ideal by hand, its rows, and one tiny real run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import bench.crowd as bc


def test_the_ideal_iteration_is_the_quota_or_the_turns_on_the_cores() -> None:
    assert bc.ideal_iteration_s(0.3, 2, 2.0, 1.0) == pytest.approx(0.3)  # one worker per core
    assert bc.ideal_iteration_s(0.3, 8, 2.0, 1.0) == pytest.approx(1.2)  # four take turns
    assert bc.ideal_iteration_s(0.3, 2, 2.0, 0.5) == pytest.approx(0.6)  # held to its quota
    assert bc.ideal_iteration_s(0.3, 8, 2.0, 0.5) == pytest.approx(1.2)  # the turns are longer


def test_a_row_is_the_median_of_its_rounds_against_the_child_alone() -> None:
    rounds = [
        {"alone_step_cpu_s": 0.25, "alone_step_s": 0.25, "crowd_step_cpu_s": 0.30,
         "crowd_iteration_s": 1.5},
        {"alone_step_cpu_s": 0.20, "alone_step_s": 0.20, "crowd_step_cpu_s": 0.30,
         "crowd_iteration_s": 1.2},
        {"alone_step_cpu_s": 0.25, "alone_step_s": 0.25, "crowd_step_cpu_s": 0.25,
         "crowd_iteration_s": 1.0},
    ]  # fmt: skip
    row = bc.row_of(8, 0.5, rounds, 2.0)  # turns (×4) longer than the quota (×2)
    assert row["step_cpu_ratio"] == pytest.approx(1.2)  # of 1.2, 1.5, 1.0
    assert row["iteration_vs_ideal"] == pytest.approx(1.5)  # 1.5/1.0, 1.2/0.8, 1.0/1.0
    assert (row["count"], row["share"], row["rounds"]) == (8, 0.5, rounds)
    assert row["warmup_steps"] is None  # rounds kept before the warm-up was: none to show


def test_a_rows_warmup_is_the_median_first_steps_excess_in_steady_steps() -> None:
    rounds = [
        {"alone_step_cpu_s": 0.5, "alone_step_s": 0.5, "crowd_step_cpu_s": 0.6,
         "crowd_iteration_s": 2.0, "crowd_warmup_cpu_s": w}
        for w in (0.2, 0.4, 0.3)
    ]  # fmt: skip
    assert bc.row_of(4, 1.0, rounds, 2.0)["warmup_steps"] == pytest.approx(0.6)


def test_a_tiny_real_run_writes_table_json_and_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bc, "RESULTS", tmp_path)
    argv = ["--workload", "digits-mlp", "--counts", "2", "--shares", "0.5", "--repeats", "1",
            "--measure-s", "0.5"]  # fmt: skip
    assert bc.main(argv) == 0
    rows = json.loads((tmp_path / "crowd.json").read_text())["rows"]
    assert [(r["count"], r["share"]) for r in rows] == [(2, 0.5)]
    assert rows[0]["step_cpu_ratio"] > 0 and rows[0]["iteration_vs_ideal"] > 0
    # a measured excess: the first steps' CPU less the steady ones', which noise on a fast
    # machine can take below zero, so only that it was measured holds anywhere
    assert math.isfinite(rows[0]["warmup_steps"])
    assert "| 2 | 0.500 |" in (tmp_path / "crowd.md").read_text()
    assert (tmp_path / "crowd.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--counts", "0,2"], "bad list '0,2'"),
        (["--shares", "1.5"], "bad --repeats 2, --measure-s 6 or --shares (1.5,)"),
        (["--workload", "nope"], "bad --workload 'nope': no profiles/nope.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = bc.main(argv)
    except SystemExit as exited:  # argparse's own errors
        code = int(exited.code or 0)
    assert code == 2
    assert says in capsys.readouterr().err
