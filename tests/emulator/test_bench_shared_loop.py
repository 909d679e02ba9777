"""The shared-loop benchmark: its CPU bound by hand, and one tiny real run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import bench.shared_loop as sl
from emulator import cpu


def _child(step_ms: float, loop_ms: float, wall_ms: float) -> dict[str, float]:
    return {
        "crowded_step_cpu_s": step_ms / 1e3,
        "crowded_loop_cpu_s": loop_ms / 1e3,
        "crowded_iteration_s": wall_ms / 1e3,
    }


def test_a_row_sets_the_workers_and_shards_cpu_over_the_cores_against_the_slowest_rank() -> None:
    children = [_child(1.4, 2.0, 11.0), _child(1.6, 2.2, 12.0), _child(1.5, 1.8, 11.5)]
    row = sl.row_of(3, 2, children, shard_cpu_s=0.006, alone_step_cpu_s=0.00075, cores=2.0)
    assert row["iteration_s"] == pytest.approx(0.012)  # lockstep: the slowest rank's
    assert row["loop_cpu_s"] == pytest.approx(0.002) and row["step_cpu_s"] == pytest.approx(0.0015)
    assert row["step_ratio"] == pytest.approx(2.0)
    assert row["cpu_bound_s"] == pytest.approx((3 * 0.002 + 0.006) / 2.0)
    assert row["bound_over_measured"] == pytest.approx(0.006 / 0.012)


def test_a_tiny_real_run_writes_table_json_and_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sl, "RESULTS", tmp_path)
    argv = ["--counts", "2", "--shards", "2", "--iterations", "20"]
    with cpu.CpuLimiter(f"lambda-dnn-test-{os.getpid()}") as probe:
        enforced = probe.enforced
    code = sl.main(argv)
    if not enforced:  # no CPU group here: refused in one line, nothing written
        assert code == 1 and "nothing measured" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == []
        return
    assert code == 0
    (row,) = json.loads((tmp_path / "shared-loop.json").read_text())["rows"]
    assert (row["n"], row["shards"]) == (2, 2)
    # the shards' CPU is read in /proc's 10 ms ticks: a fast machine's 20 iterations can read 0
    assert row["iteration_s"] > 0 and row["shard_cpu_s"] >= 0 and row["step_ratio"] > 0
    assert row["loop_cpu_s"] >= row["step_cpu_s"] > 0  # the loop is the step and the exchange
    assert "| 2 | 2 |" in (tmp_path / "shared-loop.md").read_text()
    assert (tmp_path / "shared-loop.png").stat().st_size > 0


def test_a_bad_workload_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert sl.main(["--workload", "no-such-profile"]) == 2
    assert "bad --workload 'no-such-profile'" in capsys.readouterr().err
