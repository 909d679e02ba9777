"""The shared-cores benchmark: its ideal by hand, its table, and one tiny real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.shared_cores as sc


def test_the_ideal_divides_the_cores_only_when_the_quotas_ask_for_more() -> None:
    # 0.5 vCPU each on 2 cores: four fit (no slowdown), eight get 0.25 each (half speed).
    assert sc.ideal_samples_s(100.0, 0.5, 4, 2.0) == pytest.approx(100.0)
    assert sc.ideal_samples_s(100.0, 0.5, 8, 2.0) == pytest.approx(50.0)
    assert sc.ideal_samples_s(100.0, 1.0, 3, 1.5) == pytest.approx(50.0)


def test_a_row_is_the_median_against_both_ideals() -> None:
    row = sc.row_of("w", 8, [40.0, 50.0, 45.0], alone=100.0, share=0.5, cores=2.0)
    assert row["samples_s"] == 45.0
    assert row["vs_machine_cores"] == pytest.approx(45.0 / 50.0)  # C = 2: 0.25 each
    assert row["vs_catalog_cores"] == pytest.approx(45.0 / 37.5)  # C = 1.5: 0.1875 each


def test_a_tiny_real_run_writes_table_json_and_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sc, "RESULTS", tmp_path)
    argv = ["--workloads", "digits-mlp", "--share", "0.5", "--counts", "2", "--repeats", "1",
            "--measure-s", "0.5"]  # fmt: skip
    assert sc.main(argv) == 0
    rows = json.loads((tmp_path / "shared-cores.json").read_text())["rows"]
    assert [r["count"] for r in rows] == [1, 2]
    assert all(r["samples_s"] > 0 and r["vs_machine_cores"] > 0 for r in rows)
    assert "| digits-mlp | 2 |" in (tmp_path / "shared-cores.md").read_text()
    assert (tmp_path / "shared-cores.png").stat().st_size > 0


def test_bad_counts_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        sc.main(["--counts", "0,2"])
    assert exited.value.code == 2
    assert "bad counts '0,2'" in capsys.readouterr().err
