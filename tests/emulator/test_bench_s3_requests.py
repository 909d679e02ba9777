"""bench/s3_requests.py's rows and table, from reports' figures (no emulator run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import s3_requests
from bench.predict.cases import Case

CASE = Case("digits-mlp", 4, 448, 0, 150, 75, sync="s3", reducers=2)


def measured(get: float, priced: float) -> dict[str, object]:
    """What bench.predict.run_case.measure returns, the fields a row reads."""
    return {
        "memory_mb": 448,
        "iterations": 150,
        "links": [2, 2, 2, 2],
        "run_s": 60.0,
        "terms": {"total": {"measured_s": 34.0, "predicted_local_s": 37.1}},
        "requests_per_iteration": {
            "measured": {"get": get, "get_miss": get - 16, "put": 10.0},
            "predicted_local": {"get": priced, "get_miss": priced - 16, "put": 10.0},
        },
    }


def test_a_row_holds_the_gets_measured_over_priced() -> None:
    row = s3_requests.row(CASE, measured(26.4, 24.0))
    assert row["get_ratio"] == pytest.approx(1.1)
    assert (row["n"], row["reducers"], row["cpu_scale"]) == (4, 2, "1")
    assert row["total_s"] == {"measured": 34.0, "predicted_local": 37.1}


def test_the_table_sets_both_runs_against_both_prices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tmp_path / "before.json"
    after = tmp_path / "after.json"
    before.write_text(json.dumps({"rows": [s3_requests.row(CASE, measured(26.4, 24.0))]}))
    after.write_text(json.dumps({"rows": [s3_requests.row(CASE, measured(25.6, 25.6))]}))
    s3_requests.main(["--out", str(tmp_path / "unused.json"), "--table", str(before), str(after)])
    line = capsys.readouterr().out.splitlines()[-1]
    # run 1 and run 2 against the price before (24.0) and after (25.6)
    assert "| 26.4, 25.6 | 24.0 | 1.10, 1.07 | 25.6 | **1.03, 1.00** | 34.0 / 37.1 |" in line
    assert not (tmp_path / "unused.json").exists()  # a table runs nothing
