"""The allocator benchmark: its switch reaches the workers, and its table from given runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import bench.allocator as ba
from functions.allocator import OFF_SWITCH


def _run(way: str, ms: float, faults: float) -> dict[str, object]:
    return {"way": way, "allocator": way, "compute_ms_per_step": ms, "faults_per_step": faults,
            "total_s": ms / 10}  # fmt: skip


def test_the_defaults_way_sets_the_switch_the_workers_inherit_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(OFF_SWITCH, raising=False)
    with ba._way("defaults"):
        assert os.environ[OFF_SWITCH] == "1"
    assert OFF_SWITCH not in os.environ
    monkeypatch.setenv(OFF_SWITCH, "1")
    with ba._way("fixed"):
        assert OFF_SWITCH not in os.environ
    assert os.environ[OFF_SWITCH] == "1"


def test_the_table_is_the_median_of_each_way_and_their_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ba, "RESULTS", tmp_path)
    runs = [_run("fixed", 130.0, 0.0), _run("defaults", 160.0, 6000.0),
            _run("defaults", 150.0, 6100.0), _run("fixed", 120.0, 2.0),
            _run("fixed", 200.0, 1.0), _run("defaults", 170.0, 5900.0)]  # fmt: skip
    summary = ba.summarise(runs)
    assert summary["fixed"]["compute_ms_per_step"] == 130.0
    assert summary["defaults"]["faults_per_step"] == 6000.0
    text = ba.write_results(runs, {"machine": "m", "repeats": 3, "iterations": 60})
    assert "| fixed | 3 | 130.0 | 1 | 13.00 |" in text
    assert f"**{160.0 / 130.0:.3f}**" in text
    assert len(json.loads((tmp_path / "allocator.json").read_text())["runs"]) == 6
    assert (tmp_path / "allocator.png").stat().st_size > 0
