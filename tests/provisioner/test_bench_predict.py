"""The prediction benchmark's bookkeeping (no emulator run): cases, summary and table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bench.predict as bp


def _row(case: str, total: float | None, compute: float, planned: bool = False) -> dict:
    terms = {
        t: {"predicted_local_s": 1.0, "measured_s": 1.0, "predicted_aws_s": 2.0} for t in bp.TERMS
    }
    return {
        "case": case,
        "workload": "digits-mlp",
        "planned": planned,
        "deadline_s": 10.0 if planned else None,
        "n": 2,
        "memory_mb": 1024,
        "ps_count": 1,
        "iterations": 100,
        "links": [2, 2],
        "cpu_share": "CPU share enforced: test",
        "terms": terms,
        "accuracy_local": {"total": total, "compute": compute},
        "met_deadline": (total or 0) > 0.9 if planned else None,
        "run_s": 1.0,
    }


def test_the_grid_covers_what_the_issue_asks() -> None:
    """≥ 16 configurations, 3 models, n 1..8, ≥ 3 memory sizes, 1 and 2 shards, re-invocation."""
    assert len(bp.FIXED) >= 16
    assert len({c.workload for c in bp.FIXED}) >= 3
    assert {c.n for c in bp.FIXED} >= {1, 8} and len({c.memory_mb for c in bp.FIXED}) >= 3
    assert {c.ps_count for c in bp.FIXED} == {1, 2}
    assert any(c.per_invocation for c in bp.FIXED) and any(not c.per_invocation for c in bp.FIXED)
    assert all(c.deadline_s > 0 for c in bp.PLANNED)


def test_summary_gives_mean_and_worst_accuracy_and_deadlines_met() -> None:
    rows = [_row("a", 0.9, 0.8), _row("b", 1.0, None), _row("c", None, 0.6, planned=True)]
    summary = bp.summary_of(rows)
    assert summary["total"] == pytest.approx({"mean": 0.95, "worst": 0.9, "rows": 2})
    assert summary["compute"] == pytest.approx({"mean": 0.7, "worst": 0.6, "rows": 2})
    assert summary["deadlines_met"] == "0/1"


def test_results_are_written_as_table_json_and_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    meta = {"date": "d", "machine": "m", "loadavg": "0 0 0", "cpu_share": "s", "command": "c"}
    text = bp.write_results([_row("a", 0.9, 0.8), _row("p", 0.95, 0.9, planned=True)], meta)
    assert "| a | 100 | 2 | 1.00/1.00" in text and "| total | 0.925 | 0.900 | 2 |" in text
    assert "Deadlines met by plans the planner chose on the local catalog: 1/1." in text
    assert {p.name for p in tmp_path.iterdir()} == {"predict.md", "predict.json", "predict.png"}


def test_a_repeated_case_is_held_to_the_median_of_its_runs() -> None:
    runs = [_row("a", 0.5, 0.5, planned=True) for _ in range(3)]
    for run, total_s in zip(runs, (10.0, 12.0, 30.0), strict=True):
        run["terms"] = {t: dict(v) for t, v in run["terms"].items()}
        run["terms"]["total"].update(predicted_local_s=11.0, measured_s=total_s)
        run["met_deadline"] = total_s <= 12.0
    row = bp.median_row(runs)
    assert row["terms"]["total"]["measured_s"] == 12.0
    assert row["accuracy_local"]["total"] == pytest.approx(1 - 1 / 12)
    assert row["accuracy_local"]["load"] == 1.0  # 1.0 predicted, 1.0 measured
    assert row["measured_totals_s"] == [10.0, 12.0, 30.0]
    assert row["met_deadline"] is False  # one run of three missed it
    assert row["run_s"] == 3.0


def test_repeats_go_round_the_cases_with_each_workloads_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every case once, then again (a drift in the machine's speed meets every case alike), each
    with the profile measured for its workload in this run."""
    import contextlib

    cases = (bp.FIXED[0], bp.FIXED[6], bp.PLANNED[0])
    order: list[tuple[str, Path | None]] = []

    def fake_measure(case: bp.Case, endpoint: object, out: Path, profile: Path | None) -> dict:
        order.append((case.label, profile))
        return _row(case.label, 0.9, 0.9, planned=bool(case.deadline_s))

    paths = {w: tmp_path / f"{w}.json" for w in ("digits-mlp", "synthetic-cifar-cnn")}
    monkeypatch.setattr(bp, "QUICK", cases)
    monkeypatch.setattr(bp, "measure", fake_measure)
    monkeypatch.setattr(
        bp, "measure_platform", lambda workloads, out: {w: paths[w] for w in workloads}
    )
    monkeypatch.setattr(bp, "weed_server", lambda: contextlib.nullcontext("http://127.0.0.1:1"))
    names: list[str] = []
    monkeypatch.setattr(bp, "write_results", lambda rows, meta, name: names.append(name) or "")
    assert bp.main(["--quick", "--repeats", "2"]) == 0
    labels = [c.label for c in cases]
    assert [label for label, _ in order] == labels + labels
    assert names == ["predict-quick"]  # a partial run keeps the full grid's files
    assert [p for _, p in order[:3]] == [paths["digits-mlp"], paths["synthetic-cifar-cnn"],
                                         paths["digits-mlp"]]  # fmt: skip


def test_rescore_predicts_the_configuration_that_ran_again_against_its_measurements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--rescore measures nothing: each row's terms are predicted again from the run's own
    platform figures (its catalog and profile), the measurements stay, and the accuracy is
    recomputed from the two; the table says it is a re-scoring, and of which run."""
    measured_s = 7.0
    row = _earlier_run(tmp_path, monkeypatch, bp.FIXED[0], measured_s)  # digits-mlp n=1 m=1024
    assert bp.main(["--rescore", "--quick"]) == 0
    out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
    (again,) = out["rows"]
    total = again["terms"]["total"]
    assert total["measured_s"] == measured_s and total["predicted_local_s"] != 999.0
    assert 0 < total["predicted_local_s"] < 100
    expected = 1 - abs(total["predicted_local_s"] - measured_s) / measured_s
    assert again["accuracy_local"]["total"] == pytest.approx(expected)
    text = (tmp_path / "predict-quick-rescored.md").read_text()
    assert "Re-scored, nothing measured" in text and "`python -m bench.predict --quick`" in text
    # the source run's files are untouched
    assert json.loads((tmp_path / "predict-quick.json").read_text())["rows"][0] == row


def _earlier_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: bp.Case, measured_s: float
) -> dict[str, Any]:
    """A --quick run's results and platform (the test catalog; the committed profile) under
    tmp_path, one row of `case` whose total measured `measured_s`; the row."""
    from tests.local_catalog import local_catalog_dict

    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    platform = tmp_path / "predict-quick-platform"
    platform.mkdir()
    (platform / "local.json").write_text(json.dumps(local_catalog_dict()))
    row = _row(case.label, 0.5, 0.5)
    row.update(n=case.n, memory_mb=case.memory_mb, ps_count=case.ps_count,
               iterations=case.iterations)  # fmt: skip
    row["terms"]["total"].update(predicted_local_s=999.0, measured_s=measured_s)
    meta = {"date": "then", "machine": "m", "loadavg": "0 0 0", "cpu_share": "s",
            "command": "python -m bench.predict --quick"}  # fmt: skip
    (tmp_path / "predict-quick.json").write_text(json.dumps({"meta": meta, "rows": [row]}))
    return row


def test_rescore_with_a_catalog_figure_set_predicts_with_it_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--set section.field=number changes the run's catalog for the re-scoring only: 4 digits
    workers at 1024 MB (2.3 vCPU between them) compute faster on 2 compute cores than on 1.5
    (total_vcpu, added the same way), and the table names the figures set."""
    _earlier_run(tmp_path, monkeypatch, bp.FIXED[4], 10.0)  # digits-mlp n=4 m=1024

    def compute_s(*settings: str) -> float:
        argv = ["--rescore", "--quick"] + [a for s in settings for a in ("--set", s)]
        assert bp.main(argv) == 0
        out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
        return float(out["rows"][0]["terms"]["compute"]["predicted_local_s"])

    on_total_vcpu = compute_s("lambda.total_vcpu=1.5")
    on_two_cores = compute_s("lambda.total_vcpu=1.5", "lambda.compute_cores=2")
    assert on_two_cores == pytest.approx(on_total_vcpu * 1.5 / 2, rel=0.05)
    text = (tmp_path / "predict-quick-rescored.md").read_text()
    assert "the run's catalog with lambda.total_vcpu=1.5, lambda.compute_cores=2" in text
    platform = json.loads((tmp_path / "predict-quick-platform" / "local.json").read_text())
    assert "compute_cores" not in platform["lambda"]  # the run's own record is untouched


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("compute_cores=2", "bad --set 'compute_cores=2': expected section.field=number"),
        ("lambda.compute_cores", "bad --set 'lambda.compute_cores': expected section"),
        ("lambda.compute_cores=two", "bad --set 'lambda.compute_cores=two': expected section"),
        ("lambda.compute_cores=inf", "bad --set 'lambda.compute_cores=inf': expected section"),
        ("cpu.cores=2", "bad --set 'cpu.cores=2': no catalog section 'cpu' (lambda, network"),
    ],
)
def test_a_bad_catalog_setting_is_one_line(setting: str, message: str) -> None:
    from tests.local_catalog import local_catalog_dict

    with pytest.raises(ValueError) as err:
        bp.catalog_figures_set(local_catalog_dict(), [setting])
    assert str(err.value).startswith(message)


def test_set_without_rescore_is_refused() -> None:
    with pytest.raises(ValueError, match="only a re-scoring"):
        bp.main(["--set", "lambda.compute_cores=2"])


def test_rescore_without_the_runs_results_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    with pytest.raises(ValueError, match="bad --rescore: no .*predict-quick.json"):
        bp.main(["--rescore", "--quick"])


def test_repeatability_is_how_well_a_cases_median_predicts_its_other_runs() -> None:
    """The noise the model is read against: runs of 10, 12 and 15 s have median 12, which
    scores 1 − 2/10 and 1 − 3/15 on the other two; a case run once says nothing."""
    a = _row("a", 0.9, 0.9)
    a["measured_totals_s"] = [10.0, 12.0, 15.0]
    once = _row("b", 0.9, 0.9)
    once["measured_totals_s"] = [5.0]
    got = bp.repeatability([a, once])
    assert got == pytest.approx({"mean": 0.8, "worst": 0.8, "spread": 1.5})
    assert bp.repeatability([once]) is None
    summary = bp.summary_of([a, once])
    assert summary["repeatability"] == pytest.approx(got)
