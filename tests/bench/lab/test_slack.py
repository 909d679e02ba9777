"""bench.lab.slack: the slack a machine's finished runs call for, read from their reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.lab import slack


def _report(
    run_id: str, predicted_s: float | None, measured_s: float, status: str = "done"
) -> dict:
    return {
        "run_id": run_id,
        "status": status,
        "terms": [
            {"term": "load", "predicted_local_s": 1.0, "measured_s": 9.0},
            {"term": "total", "predicted_local_s": predicted_s, "measured_s": measured_s},
        ],
    }


def test_runs_that_land_on_their_prediction_need_no_slack() -> None:
    got = slack.slack_for([1.0] * 30)
    assert got.slack == 0.0 and got.runs == 30 and got.highest == got.fitted == pytest.approx(1.0)


def test_the_slack_covers_the_fitted_tail_and_never_less_than_the_worst_run() -> None:
    """Ratios 0.9 and 1.1 alternating: the log-normal 1-in-1,000 ratio lies past 1.1, so the
    slack covers it; one run at 1.6 among steady ones is past any fit, so the slack covers it."""
    spread = [0.9, 1.1] * 15
    logs = [math.log(r) for r in spread]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    fitted = math.exp(mean + slack.TAIL_Z * sd)
    got = slack.slack_for(spread)
    assert got.fitted == pytest.approx(fitted) and fitted > 1.1
    assert got.slack == math.ceil((1 - 1 / fitted) * 100) / 100
    assert got.lowest == 0.9 and got.highest == 1.1 and got.p95 == 1.1
    outlier = slack.slack_for([1.0] * 29 + [1.6])
    assert outlier.slack >= 1 - 1 / 1.6 and outlier.slack == 0.38  # 37.5% rounded up


def test_too_few_runs_or_a_slack_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="19 runs too few to read a slack from; give 20"):
        slack.slack_for([1.0] * 19)
    with pytest.raises(ValueError, match="does not describe these runs"):
        slack.slack_for([1.0] * 29 + [20.0])


def test_ratios_are_read_once_per_run_from_reports_folders_and_bench_results(
    tmp_path: Path,
) -> None:
    """A run folder holds its report twice (report.json and the artifacts' copy) and the
    artifacts' own report.json (no terms): the run counts once and the other is passed over.
    Unfinished runs and runs without a local prediction give nothing; bench.predict results give
    every run of every row that kept per-run predictions."""
    run = tmp_path / "runs" / "case-0"
    (run / "artifacts" / "job" / "emulator").mkdir(parents=True)
    for where in (run, run / "artifacts" / "job" / "emulator"):
        (where / "report.json").write_text(json.dumps(_report("r0", 10.0, 12.0)))
    (run / "artifacts" / "job" / "report.json").write_text(json.dumps({"status": "done"}))
    other = tmp_path / "runs" / "case-1"
    other.mkdir()
    (other / "report.json").write_text(json.dumps(_report("r1", 10.0, 8.0)))
    (tmp_path / "runs" / "case-2").mkdir()
    (tmp_path / "runs" / "case-2" / "report.json").write_text(
        json.dumps(_report("r2", 10.0, 30.0, status="interrupted"))
    )
    (tmp_path / "runs" / "case-3").mkdir()
    (tmp_path / "runs" / "case-3" / "report.json").write_text(json.dumps(_report("r3", None, 3.0)))
    bench = tmp_path / "predict.json"
    rows = [
        {"predicted_totals_s": [2.0, 4.0], "measured_totals_s": [3.0, 4.0]},
        {"measured_totals_s": [5.0]},  # written before rows kept per-run predictions
    ]
    bench.write_text(json.dumps({"rows": rows}))
    got = slack.ratios_from([tmp_path / "runs", bench, run / "report.json"])
    assert sorted(got) == [0.8, 1.0, 1.2, 1.5]


def test_only_the_machines_own_runs_count_and_runs_naming_none_are_taken(tmp_path: Path) -> None:
    """A slack is the figure of one machine: a report or bench results naming another machine
    are left out, one naming none (written before reports named it) is taken as it is, and
    runs all from elsewhere are one error naming both machines."""
    here, there = "AMD EPYC, 2 cores", "Intel Xeon, 8 cores"
    for name, ran_on, ratio in (("a", here, 1.2), ("b", there, 3.0), ("c", None, 0.8)):
        doc = _report(name, 10.0, 10.0 * ratio)
        if ran_on:
            doc["emulation"] = {"machine": ran_on}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    bench = tmp_path / "predict.json"
    rows = [{"predicted_totals_s": [2.0], "measured_totals_s": [5.0]}]
    bench.write_text(json.dumps({"meta": {"machine": there}, "rows": rows}))
    paths = [tmp_path / f"{n}.json" for n in "abc"] + [bench]
    assert sorted(slack.ratios_from(paths, here)) == [0.8, 1.2]
    assert sorted(slack.ratios_from(paths)) == [0.8, 1.2, 2.5, 3.0]  # no machine given: all
    says = f"2 runs ran on {there}, not on this machine \\({here}\\)"
    with pytest.raises(ValueError, match=says):
        slack.ratios_from([tmp_path / "b.json", bench], here)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read"),
        ("{", "cannot be read"),
        ('{"status": "done"}', r"is neither a run report \(terms\) nor bench.predict results"),
        (json.dumps(_report("r", 10.0, 12.0, status="failed")), "holds no finished run"),
        (json.dumps({"rows": [{"measured_totals_s": [1.0]}]}), "holds no finished run"),
    ],
)
def test_a_path_without_runs_is_one_error_naming_it(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "given.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=says) as err:
        slack.ratios_from([path])
    assert "given.json" in str(err.value)


def test_an_empty_folder_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no finished run"):
        slack.ratios_from([tmp_path])


def test_the_catalog_keeps_every_other_figure() -> None:
    catalog = {"name": "local", "orchestration": {"a": 1, "default_slack": {"value": 0.2}}}
    got = slack.with_slack(catalog, {"value": 0.31})
    assert got == {"name": "local", "orchestration": {"a": 1, "default_slack": {"value": 0.31}}}
    assert catalog["orchestration"]["default_slack"] == {"value": 0.2}  # not changed in place
