"""The fixed-cost benchmark: its variants, its rows and its table (the runs are bench.predict's)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import bench.fixed_cost as fc


def _run(compute: tuple[float, float], total: tuple[float, float]) -> dict:
    return {"terms": {
        "compute": {"predicted_local_s": compute[0], "measured_s": compute[1]},
        "total": {"predicted_local_s": total[0], "measured_s": total[1]},
    }}  # fmt: skip


def test_each_variant_changes_one_thing_of_the_grids_row() -> None:
    row, one_link, one_shard, longer = fc.CASES
    assert (row.n, row.memory_mb, row.ps_count, row.iterations, row.per_invocation) == (
        8, 1280, 2, 8, 4)  # fmt: skip
    assert one_link == dataclasses.replace(row, per_invocation=0)
    assert one_shard == dataclasses.replace(one_link, ps_count=1)
    assert longer == dataclasses.replace(one_link, iterations=16)


def test_a_row_is_the_median_and_its_excess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [_run((9.5, 17.2), (16.0, 24.8)), _run((9.5, 15.9), (16.0, 23.4)),
            _run((9.5, 16.5), (16.0, 24.0))]  # fmt: skip
    row = fc.row_of(fc.CASES[0], runs)
    assert row["compute"] == pytest.approx({"predicted_s": 9.5, "measured_s": 16.5,
                                            "excess_s": 7.0})  # fmt: skip
    assert row["total"]["excess_s"] == pytest.approx(8.0)
    monkeypatch.setattr(fc, "RESULTS", tmp_path)
    meta = {"cores": 2, "repeats": 3, "profile": "p", "machine": "m", "command": "c"}
    text = fc.write_results([row], meta)
    assert "| 8 | 9.50/16.50 | 7.00 | 16.00/24.00 | 8.00 |" in text
    assert json.loads((tmp_path / "fixed-cost.json").read_text())["rows"] == [row]
    assert (tmp_path / "fixed-cost.png").stat().st_size > 0
