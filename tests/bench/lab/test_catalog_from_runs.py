"""bench.lab.catalog_from_runs: the local catalog's slack and start-up cores read from finished
runs, every other figure as `make calibrate` wrote it, and a bad RUNS one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.lab import catalog_from_runs
from bench.lab import interval as interval_runs
from bench.lab import slack as slack_runs
from emulator.calibration import catalog
from provisioner.catalog import load_catalog
from tests.emulator.test_calibrate import REFERENCE, WHERE, fake_measurements


def _runs(folder: Path, ratios: list[float]) -> Path:
    """Finished runs' reports under `folder`, one per ratio of measured to predicted total."""
    for i, ratio in enumerate(ratios):
        run = folder / f"case-{i}"
        run.mkdir(parents=True)
        total = {"term": "total", "predicted_local_s": 10.0, "measured_s": 10.0 * ratio}
        report = {"run_id": f"r{i}", "status": "done", "terms": [total]}
        (run / "report.json").write_text(json.dumps(report))
    return folder


def test_slack_from_runs_rewrites_only_the_catalogs_default_slack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Thirty runs landing at 0.9-1.1× their prediction call for the slack bench.lab.slack
    reads from them; the catalog's other figures stay as `make calibrate` wrote them, and the
    slack's figure says it was measured and from what."""
    out = tmp_path / "local.json"
    catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    before = json.loads(out.read_text())
    runs = _runs(tmp_path / "runs", [0.9, 1.1] * 15)
    assert catalog_from_runs.main(["--out", str(out), "--slack-from", str(runs)]) == 0
    after = json.loads(out.read_text())
    figure = after["orchestration"].pop("default_slack")
    before["orchestration"].pop("default_slack")
    assert after == before
    expected = slack_runs.slack_for([0.9, 1.1] * 15).slack
    assert figure["value"] == expected and load_catalog(out).default_slack == expected > 0.2
    assert figure["tag"] == "measured" and "from 30 finished runs" in figure["source"]
    assert f"default_slack {expected:.0%} from 30 runs" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("few", "5 runs too few to read a slack from"),
        ("none", "holds no finished run"),
        ("no-catalog", "cannot be read (FileNotFoundError)"),
    ],
)
def test_bad_slack_from_is_one_line_exit_2_and_keeps_the_catalog(
    given: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "local.json"
    if given != "no-catalog":
        catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    before = out.read_bytes() if out.exists() else None
    runs = _runs(tmp_path / "runs", [1.0] * (5 if given == "few" else 25))
    if given == "none":
        runs = tmp_path / "runs" / "case-0" / "empty"
        runs.mkdir()
    assert catalog_from_runs.main(["--out", str(out), "--slack-from", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err
    assert (out.read_bytes() if out.exists() else None) == before


def _startup_runs(folder: Path, startups: dict[int, list[float]]) -> Path:
    """Finished runs' reports under `folder`: a start-up per run, by the run's workers."""
    i = 0
    for n, times in startups.items():
        for startup_s in times:
            (folder / f"case-{i}").mkdir(parents=True)
            plan = {"model": "mlp", "dataset": "digits", "local_batch": 16, "n_workers": n}
            terms = [{"term": "startup", "measured_s": startup_s},
                     {"term": "total", "predicted_local_s": 10.0, "measured_s": 10.0}]  # fmt: skip
            report = {"run_id": f"r{i}", "status": "done", "plan": plan, "terms": terms}
            (folder / f"case-{i}" / "report.json").write_text(json.dumps(report))
            i += 1
    return folder


def test_init_cores_from_runs_rewrites_only_the_start_up_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs starting in 1 s alone, 1.25 s two at once and 2.5 s four at once call for 1.6
    cores at n = 2 and at 4; the catalog's other figures stay as `make calibrate` wrote them,
    the planner reads the new curve, and each figure says it was measured and from what."""
    out = tmp_path / "local.json"
    catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    before = json.loads(out.read_text())
    runs = _startup_runs(tmp_path / "runs", {1: [1.0, 1.0, 1.0], 2: [1.25], 4: [2.5, 2.5]})
    assert catalog_from_runs.main(["--out", str(out), "--init-cores-from", str(runs)]) == 0
    after = json.loads(out.read_text())
    by_n, one = after["lambda"].pop("init_cores_by_n"), after["lambda"].pop("init_cores")
    before["lambda"].pop("init_cores_by_n", None), before["lambda"].pop("init_cores")
    assert after == before
    assert by_n["value"] == [[2, 1.6], [4, 1.6]] and by_n["tag"] == one["tag"] == "measured"
    assert "from 6 start-ups of finished runs" in by_n["source"] and one["value"] == 1.6
    assert load_catalog(out).init_cores_by_n == ((2, 1.6), (4, 1.6))
    assert "start-up cores 1.6 at n = 2, 1.6 at n = 4 from 6 start-ups" in capsys.readouterr().out


def test_slack_and_init_cores_from_runs_are_written_together_or_not_at_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both options in one call write both figures; where one of them cannot be read, the
    other is not written either: the catalog is as it was, the error one line."""
    out = tmp_path / "local.json"
    catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    before = out.read_bytes()
    good = _startup_runs(tmp_path / "good", {1: [1.0] * 10, 2: [1.25] * 10, 4: [2.5] * 10})
    few = _startup_runs(tmp_path / "few", {1: [1.0], 2: [1.25]})
    args = ["--out", str(out), "--init-cores-from", str(good), "--slack-from", str(few)]
    assert catalog_from_runs.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 runs too few to read a slack from" in err
    assert out.read_bytes() == before
    args = ["--out", str(out), "--init-cores-from", str(good), "--slack-from", str(good)]
    assert catalog_from_runs.main(args) == 0
    cat = load_catalog(out)
    assert cat.init_cores_by_n == ((2, 1.6), (4, 1.6)) and cat.default_slack == 0.0
    assert capsys.readouterr().out.count("wrote ") == 2


def test_interval_from_runs_writes_the_spread_and_drops_the_slack_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Forty runs at 0.80-1.19× their prediction: the catalog's interval is their 5th and 95th
    percentiles, rounded outwards to a hundredth; the default_slack policy it replaces is gone
    and every other figure stays as `make calibrate` wrote it."""
    out = tmp_path / "local.json"
    catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    before = json.loads(out.read_text())
    ratios = [0.80 + 0.01 * i for i in range(40)]
    runs = _runs(tmp_path / "runs", ratios)
    assert catalog_from_runs.main(["--out", str(out), "--interval-from", str(runs)]) == 0
    after = json.loads(out.read_text())
    figure = after["orchestration"].pop("prediction_interval")
    before["orchestration"].pop("default_slack")
    assert after == before
    found = interval_runs.interval_for(ratios)
    assert figure["value"] == {"low": found.low, "high": found.high, "level": 0.9}
    assert 0.80 <= found.low < 0.83 and 1.16 < found.high <= 1.19
    loaded = load_catalog(out)
    assert (loaded.prediction_interval.low, loaded.prediction_interval.high) == (
        found.low, found.high,
    )  # fmt: skip
    assert loaded.default_slack == 0.0
    assert figure["tag"] == "measured" and "from 40 finished runs" in figure["source"]
    assert "default_slack dropped" in capsys.readouterr().out


def test_an_interval_always_holds_the_prediction() -> None:
    """Runs that all land above their prediction still give low = 1: the interval holds the
    point the plan prints; too few runs is one line."""
    found = interval_runs.interval_for([1.1 + 0.001 * i for i in range(25)])
    assert found.low == 1.0 and found.high >= 1.12
    with pytest.raises(ValueError, match="5 runs too few to read an interval from"):
        interval_runs.interval_for([1.0] * 5)
