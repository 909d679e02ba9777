"""bench.lab.finished_runs: the RUNS --slack-from and --init-cores-from read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.lab import finished_runs


def test_a_folder_gives_its_run_reports_and_passes_over_other_report_files(
    tmp_path: Path,
) -> None:
    (tmp_path / "case-0" / "artifacts").mkdir(parents=True)
    (tmp_path / "case-0" / "report.json").write_text(json.dumps({"run_id": "r", "terms": []}))
    (tmp_path / "case-0" / "artifacts" / "report.json").write_text('{"accuracy": 1}')
    got = list(finished_runs.documents(tmp_path, "--x-from"))
    assert got == [("report", {"run_id": "r", "terms": []})]


def test_a_file_is_a_report_or_bench_results_or_one_line_naming_it(tmp_path: Path) -> None:
    report, bench, other, broken = (tmp_path / f"{n}.json" for n in ("a", "b", "c", "d"))
    report.write_text('{"terms": []}')
    bench.write_text('{"rows": []}')
    other.write_text("[1, 2]")
    broken.write_text("{not json")
    assert list(finished_runs.documents(report, "--x-from")) == [("report", {"terms": []})]
    assert list(finished_runs.documents(bench, "--x-from")) == [("bench", {"rows": []})]
    with pytest.raises(ValueError, match=r"^--x-from '.*c\.json' is neither a run report"):
        list(finished_runs.documents(other, "--x-from"))
    with pytest.raises(ValueError, match=r"^--x-from '.*d\.json' cannot be read"):
        list(finished_runs.documents(broken, "--x-from"))


def test_only_this_machines_readings_and_those_naming_none_count() -> None:
    found = [("a", "here"), ("b", None), ("c", "there")]
    assert finished_runs.on_machine(found, lambda r: r[1], "here", "--x-from", "why") == [
        ("a", "here"), ("b", None),
    ]  # fmt: skip
    assert finished_runs.on_machine(found, lambda r: r[1], None, "--x-from", "why") == found
    with pytest.raises(ValueError, match=r"^--x-from: its 1 runs ran on there, not on this "
                       r"machine \(here\): a figure is for its machine$"):  # fmt: skip
        finished_runs.on_machine([("c", "there")], lambda r: r[1], "here", "--x-from",
                                 "a figure is for its machine")  # fmt: skip


def test_positive_and_machine_named_take_only_what_they_say() -> None:
    assert finished_runs.positive(2) == 2.0 and finished_runs.positive(0.5) == 0.5
    for bad in (0, -1.0, math.inf, math.nan, "3", None):
        assert finished_runs.positive(bad) is None
    assert finished_runs.machine_named("AMD EPYC, 2 cores") == "AMD EPYC, 2 cores"
    assert finished_runs.machine_named("") is None and finished_runs.machine_named(3) is None
