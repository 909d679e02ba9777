"""The prediction benchmark's bookkeeping (no emulator run): cases, summary and table."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

import bench.predict as bp
from bench.lab.anchor import anchor_move
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job

REPO = Path(__file__).resolve().parents[2]


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
    assert all(c.planned and bool(c.deadline_s) != bool(c.tight) for c in bp.PLANNED)
    assert {c.workload for c in bp.PLANNED if c.tight} == {c.workload for c in bp.FIXED}


def test_a_tight_deadline_is_missed_by_the_cheapest_plan_and_met_by_a_costlier_one() -> None:
    """The planning target of a tight deadline lies between the fastest and the cheapest plan
    (on any machine's profile), so the planner sizes up and the default slack is what protects
    the deadline; the row records the deadline it ran for."""
    catalog = dataclasses.replace(load_catalog("lambda-2025"), default_slack=0.2)
    profile = load_profile("digits-mlp")
    deadline_s = bp.tight_deadline_s(profile, catalog, 0.5)
    loose = plan_job(profile, catalog, Goal(deadline_s=1e6), Limits(), "t", frontier_points=0)
    tight = plan_job(profile, catalog, Goal(deadline_s=deadline_s), Limits(), "t",
                     frontier_points=0)  # fmt: skip
    target_s = deadline_s * 0.8
    assert tight.plan.prediction.total_s <= target_s < loose.plan.prediction.total_s
    assert tight.plan.cost.total_usd > loose.plan.cost.total_usd
    assert tight.plan.goal.slack == 0.2
    case = bp.Case("digits-mlp", tight=0.5)
    assert case.planned and case.label == "digits-mlp @ tight 0.5"
    # a loose deadline (share 1): its target is the cheapest plan's time, so that plan is chosen
    at_cheapest = Goal(deadline_s=bp.tight_deadline_s(profile, catalog, 1.0))
    relaxed = plan_job(profile, catalog, at_cheapest, Limits(), "t", frontier_points=0)
    assert relaxed.plan.cost.total_usd == loose.plan.cost.total_usd
    assert bp.Case("digits-mlp", tight=1.0).label == "digits-mlp @ loose 1"


@pytest.mark.parametrize("case", bp.FIXED + bp.PLANNED, ids=lambda c: c.label)
def test_every_cases_job_is_a_valid_stack_name(case: bp.Case) -> None:
    """The emulator synthesizes the case's stacks: `<job>-data` must be a CloudFormation stack
    name (a tight case's first job, 'bench-t0.5', was not)."""
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", f"{bp.job_of(case)}-data"), bp.job_of(case)


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
    meta = {"machine": "m", "loadavg": "0 0 0", "cpu_share": "s", "command": "c"}
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
    assert row["predicted_totals_s"] == [11.0, 11.0, 11.0]
    assert row["met_deadlines"] == [True, True, False]
    assert row["deadlines_s"] == [run["deadline_s"] for run in runs]
    assert row["met_deadline"] is False  # one run of three missed it
    assert row["run_s"] == 3.0


def test_a_planned_case_run_at_other_configurations_is_read_for_its_spread_against_prediction() -> (
    None
):
    """A planned case that chose 1,024 MB in one round and 2,048 MB in another ran two jobs:
    20 s and 10 s runs each predicted exactly have no spread, and are scaled to the median
    prediction (15 s); a case run at one configuration keeps its totals as measured."""
    row = _row("p", 0.9, 0.9, planned=True)
    row["measured_totals_s"] = [20.0, 10.0]
    row["predicted_totals_s"] = [20.0, 10.0]
    row["run_configurations"] = [{"memory_mb": 1024}, {"memory_mb": 2048}]
    assert bp.comparable_totals(row) == [15.0, 15.0]
    ceiling = bp.noise_ceiling([row])
    assert ceiling is not None and ceiling["worst"] == 1.0  # no spread left
    row["run_configurations"] = [{"memory_mb": 1024}, {"memory_mb": 1024}]
    assert bp.comparable_totals(row) == [20.0, 10.0]
    del row["predicted_totals_s"]  # rows written before per-run predictions were kept
    row["run_configurations"] = [{"memory_mb": 1024}, {"memory_mb": 2048}]
    assert bp.comparable_totals(row) == [20.0, 10.0]


def _fake_grid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[bp.Case, ...], list[tuple[str, Path | None]], dict[str, Path], list[dict]]:
    """A --quick grid of digits, CNN, digits-planned whose measuring is faked: (the cases, the
    (label, profile) each measure() got, the start-of-run profile per workload, the metas
    written)."""
    import contextlib

    cases = (bp.FIXED[0], bp.FIXED[6], bp.PLANNED[0])
    order: list[tuple[str, Path | None]] = []

    def fake_measure(
        case: bp.Case, endpoint: object, out: Path, profile: Path | None, catalog: Path | None
    ) -> dict:
        order.append((case.label, profile))
        return _row(case.label, 0.9, 0.9, planned=bool(case.deadline_s))

    def fake_anchor_catalog(start: Path, endpoint: object, work: Path, out: Path, k: int) -> Path:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"network": {"ps_request_cpu_s": {"value": 0.0001 * (k + 1)}}}))
        return out

    paths = {w: tmp_path / f"{w}.json" for w in ("digits-mlp", "synthetic-cifar-cnn")}
    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    monkeypatch.setattr(bp, "QUICK", cases)
    monkeypatch.setattr(bp, "measure", fake_measure)
    monkeypatch.setattr(bp, "anchor_catalog", fake_anchor_catalog)
    monkeypatch.setattr(bp, "load_catalog", lambda name: object())
    monkeypatch.setattr(
        bp, "measure_platform", lambda workloads, out: {w: paths[w] for w in workloads}
    )
    monkeypatch.setattr(bp, "weed_server", lambda: contextlib.nullcontext("http://127.0.0.1:1"))
    metas: list[dict] = []
    monkeypatch.setattr(
        bp, "write_results", lambda rows, meta, name: metas.append({**meta, "name": name}) or ""
    )
    return cases, order, paths, metas


def test_repeats_go_round_the_cases_with_each_workloads_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every case once, then again (a drift in the machine's speed meets every case alike), a
    workload's cases together, each with the profile measured for its workload in this run."""
    cases, order, paths, metas = _fake_grid(tmp_path, monkeypatch)
    assert bp.main(["--quick", "--repeats", "2", "--no-anchor"]) == 0
    digits, cnn, planned = (c.label for c in cases)
    assert [label for label, _ in order] == [digits, planned, cnn] * 2
    assert [m["name"] for m in metas] == ["predict-quick"]  # a partial run keeps the grid's files
    assert [p for _, p in order[:3]] == [paths["digits-mlp"], paths["digits-mlp"],
                                         paths["synthetic-cifar-cnn"]]  # fmt: skip
    assert metas[0]["anchors"] == {}


def test_each_round_anchors_a_workloads_profile_just_before_its_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default each round measures a workload's speed again right before its cases, which run
    on that anchored profile; each run is also predicted from the start-of-run profile, so the
    table can say what the anchor changed."""
    cases, order, paths, metas = _fake_grid(tmp_path, monkeypatch)
    anchored: list[tuple[str, Path | None, Path]] = []
    factors = iter((1.1, 0.9, 1.2, 0.8))

    def fake_anchor(workload: str, base: Path | None, out: Path) -> tuple[Path, dict]:
        anchored.append((workload, base, out))
        order.append(("anchor " + workload, out))
        f = next(factors)
        return out, {"0.5": round(f - 0.05, 2), "1": f}

    unanchored_from: list[Path | str] = []

    def fake_predicted(row: dict, profile: Path | str, catalog: object) -> dict[str, float]:
        unanchored_from.append(profile)
        return {"total": 42.0}

    measured = bp.measure
    catalogs: list[Path | None] = []

    def measure_on(case: bp.Case, endpoint: object, out: Path, profile: Path | None,
                   catalog: Path | None) -> dict:  # fmt: skip
        catalogs.append(catalog)
        return measured(case, endpoint, out, profile, catalog)

    monkeypatch.setattr(bp, "anchor_profile", fake_anchor)
    monkeypatch.setattr(bp, "predicted_terms", fake_predicted)
    monkeypatch.setattr(bp, "measure", measure_on)
    read_loop = bp.anchor_catalog

    def loop_anchor(start: Path, endpoint: object, work: Path, out: Path, k: int) -> Path:
        order.append(("loop anchor", out))
        return read_loop(start, endpoint, work, out, k)

    monkeypatch.setattr(bp, "anchor_catalog", loop_anchor)
    assert bp.main(["--quick", "--repeats", "2"]) == 0
    digits, cnn, planned = (c.label for c in cases)
    anchors = tmp_path / "predict-quick-platform" / "anchors"
    round_ = ["anchor digits-mlp", digits, planned, "anchor synthetic-cifar-cnn", cnn]
    # each round reads the catalog's loop first, and every row of the round runs on its catalog
    assert [label for label, _ in order] == (["loop anchor"] + round_) * 2
    assert catalogs == [anchors / "local-round0.json"] * 3 + [anchors / "local-round1.json"] * 3
    assert metas[0]["loop_anchors"] == [{"ps_request_cpu_s": 0.0001}, {"ps_request_cpu_s": 0.0002}]
    assert [out for _, _, out in anchored] == [
        anchors / "digits-mlp-round0.json", anchors / "synthetic-cifar-cnn-round0.json",
        anchors / "digits-mlp-round1.json", anchors / "synthetic-cifar-cnn-round1.json",
    ]  # fmt: skip
    bases = [paths["digits-mlp"], paths["synthetic-cifar-cnn"]]
    assert [base for _, base, _ in anchored] == bases * 2
    # a case runs on its round's anchored profile; its unanchored prediction uses the base one
    assert order[2] == (digits, anchors / "digits-mlp-round0.json")
    assert order[8] == (digits, anchors / "digits-mlp-round1.json")
    assert unanchored_from[:3] == [paths["digits-mlp"], paths["digits-mlp"],
                                   paths["synthetic-cifar-cnn"]]  # fmt: skip
    assert metas[0]["anchors"] == {
        "digits-mlp": [{"0.5": 1.05, "1": 1.1}, {"0.5": 1.15, "1": 1.2}],
        "synthetic-cifar-cnn": [{"0.5": 0.85, "1": 0.9}, {"0.5": 0.75, "1": 0.8}],
    }
    text = bp.anchor_factors_text(metas[0]["anchors"])
    assert text.startswith("digits-mlp (0.5 vCPU 1.05, 1.15; 1 vCPU 1.10, 1.20); ")


def test_anchor_factors_of_an_earlier_run_read_as_1_vcpu_ones() -> None:
    """Runs before the two-share anchor kept one 1-vCPU factor per round; a re-scoring of them
    names those as such."""
    assert bp.anchor_factors_text({"cnn": [1.1, 1.2]}) == "cnn (1 vCPU 1.10, 1.20)"


def test_a_row_predicted_per_run_is_held_at_the_median_of_its_predictions() -> None:
    """With anchors every run has its own prediction: the row's predicted figure is their median,
    set against the measured median, and the unanchored prediction is kept beside it."""
    runs = [_row("a", 0.5, 0.5) for _ in range(3)]
    figures = ((9.0, 10.0, 20.0), (12.0, 12.0, 21.0), (30.0, 31.0, 22.0))
    for k, (run, (pred, meas, un)) in enumerate(zip(runs, figures, strict=True)):
        run["terms"] = {t: dict(v) for t, v in run["terms"].items()}
        run["terms"]["total"].update(predicted_local_s=pred, measured_s=meas)
        run.update(unanchored_total_s=un, profile=f"anchors/a-round{k}.json")
    row = bp.median_row(runs)
    assert row["terms"]["total"]["predicted_local_s"] == 12.0
    assert row["accuracy_local"]["total"] == 1.0
    assert row["unanchored_total_s"] == 21.0
    assert row["profiles"] == [f"anchors/a-round{k}.json" for k in range(3)]
    summary = bp.summary_of([row])
    assert summary["total_unanchored"]["mean"] == pytest.approx(1 - 9 / 12)


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
    assert "date" not in out["meta"] and "then" not in text  # the old run's date is not carried
    # the source run's files are untouched
    assert json.loads((tmp_path / "predict-quick.json").read_text())["rows"][0] == row


def test_rescore_of_an_anchored_run_predicts_each_run_from_its_own_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose runs kept their anchored profiles is re-predicted from each of them, at the
    median: a profile twice as fast predicts the compute in about half the time."""
    from bench.lab.anchor import anchored_profile

    row = _earlier_run(tmp_path, monkeypatch, bp.FIXED[6], 20.0)  # CNN n=1 m=1024
    base = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    rate = next(p for p in base["training_rate"]["x86_64"]["points"] if p["vcpu_share"] == 1.0)
    platform = tmp_path / "predict-quick-platform"
    (platform / "anchors").mkdir()
    names = []
    for k, speed in enumerate((1.0, 2.0, 2.0)):
        doc = anchored_profile(
            base, {"samples_per_s": rate["samples_per_s"] * speed, "startup_s": 1.0},
            "x86_64", "2026-11-25", weight=1.0,
        )  # fmt: skip
        names.append(f"anchors/synthetic-cifar-cnn-round{k}.json")
        (platform / names[-1]).write_text(json.dumps(doc))
    data = json.loads((tmp_path / "predict-quick.json").read_text())
    data["rows"][0].update(workload="synthetic-cifar-cnn", profiles=names)
    (tmp_path / "predict-quick.json").write_text(json.dumps(data))
    assert bp.main(["--rescore", "--quick"]) == 0
    (again,) = json.loads((tmp_path / "predict-quick-rescored.json").read_text())["rows"]
    catalog = bp.catalog_from_dict(json.loads((platform / "local.json").read_text()))
    at_speed = {s: bp.predicted_terms(again, platform / names[k], catalog)
                for k, s in ((0, 1), (1, 2))}  # fmt: skip
    assert again["terms"]["compute"]["predicted_local_s"] == at_speed[2]["compute"]
    assert at_speed[2]["compute"] == pytest.approx(at_speed[1]["compute"] / 2, rel=0.05)
    assert again["terms"]["startup"]["predicted_local_s"] == pytest.approx(1.0)
    assert row["terms"]["total"]["measured_s"] == again["terms"]["total"]["measured_s"]


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
    # an older run's meta, with the date the renderers no longer write: it still re-scores
    meta = {"date": "then", "machine": "m", "loadavg": "0 0 0", "cpu_share": "s",
            "command": "python -m bench.predict --quick"}  # fmt: skip
    (tmp_path / "predict-quick.json").write_text(json.dumps({"meta": meta, "rows": [row]}))
    return row


def _anchored_cnn_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str, dict[str, Any]]:
    """An earlier run of one CNN row (n=1 m=1024) whose one round kept an anchor that read
    twice the committed profile's speed (the whole move): (platform, the anchor's file name
    under it, the anchored profile)."""
    from bench.lab.anchor import anchored_profile

    _earlier_run(tmp_path, monkeypatch, bp.FIXED[6], 20.0)
    base = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    rate = next(p for p in base["training_rate"]["x86_64"]["points"] if p["vcpu_share"] == 1.0)
    platform = tmp_path / "predict-quick-platform"
    (platform / "synthetic-cifar-cnn.json").write_text(json.dumps(base))
    (platform / "anchors").mkdir()
    kept = anchored_profile(
        base, {"samples_per_s": rate["samples_per_s"] * 2.0, "startup_s": 1.0},
        "x86_64", "2026-11-26", weight=1.0,
    )  # fmt: skip
    name = "anchors/synthetic-cifar-cnn-round0.json"
    (platform / name).write_text(json.dumps(kept))
    data = json.loads((tmp_path / "predict-quick.json").read_text())
    data["rows"][0].update(workload="synthetic-cifar-cnn", profiles=[name])
    (tmp_path / "predict-quick.json").write_text(json.dumps(data))
    return platform, name, kept


def test_rescore_with_another_profile_anchors_it_by_the_readings_the_run_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--profile W=PATH: a re-profile that reads half the start profile's speed, anchored by
    the run's reading (twice the start profile's, 4× the re-profile's): the default weight (1)
    and weight 1 move it onto the reading, weight 0.5 half way within the drift band and the
    whole way beyond it, weight 0 leaves the re-profile's own; the table names it."""
    platform, name, _ = _anchored_cnn_run(tmp_path, monkeypatch)
    start = json.loads((platform / "synthetic-cifar-cnn.json").read_text())
    slower = json.loads(json.dumps(start))
    for point in slower["training_rate"]["x86_64"]["points"]:
        point["samples_per_s"] /= 2.0
    other = tmp_path / "cnn-reprofiled.json"
    other.write_text(json.dumps(slower))
    catalog = bp.catalog_from_dict(json.loads((platform / "local.json").read_text()))

    def compute(*weight: str) -> tuple[float, str]:
        argv = ["--rescore", "--quick", "--profile", f"synthetic-cifar-cnn={other}", *weight]
        assert bp.main(argv) == 0
        out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
        return float(out["rows"][0]["terms"]["compute"]["predicted_local_s"]), out["meta"][
            "rescored"
        ]

    row = json.loads((tmp_path / "predict-quick.json").read_text())["rows"][0]
    as_started = bp.predicted_terms(row, platform / "synthetic-cifar-cnn.json", catalog)
    as_kept = bp.predicted_terms(row, platform / name, catalog)
    as_other = bp.predicted_terms(row, other, catalog)
    (half, says), (whole, _), (none, _), (default, _) = (
        compute("--anchor-weight", "0.5"),
        compute("--anchor-weight", "1"),
        compute("--anchor-weight", "0"),
        compute(),
    )
    assert default == pytest.approx(whole, rel=1e-9)
    # the reading is 4× the re-profile, beyond the drift band: half the way within it, the rest
    # whole (bench.lab.anchor.anchor_move), where half the way in all would land on as_started
    assert half == pytest.approx(as_other["compute"] / anchor_move(4.0, 0.5), rel=0.05)
    assert half < as_started["compute"] * 0.7
    assert whole == pytest.approx(as_kept["compute"], rel=1e-3)
    assert none == pytest.approx(as_other["compute"], rel=1e-3)
    assert f"the profile synthetic-cifar-cnn={other} in place of its start profile" in says


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "digits-mlp=profiles/digits-mlp.json"], r"only a re-scoring"),
        (["--rescore", "--profile", "digits-mlp"], r"expected WORKLOAD=PATH"),
        (["--rescore", "--profile", "digits-mlp=/nonexistent.json"], r"No such file"),
        (["--rescore", "--profile", "synthetic-cifar-cnn=profiles/digits-mlp.json"],
         r"is the profile of 'digits-mlp', not 'synthetic-cifar-cnn'"),
        (["--anchor-weight", "0.5"], r"bad --anchor-weight 0\.5: only a re-scoring"),
        (["--rescore", "--anchor-weight", "1.5"], r"bad --anchor-weight 1\.5: expected a number"),
        (["--rescore-held-out", "x.json", "--anchor-weight", "2"], r"bad --anchor-weight 2: "),
        (["--rescore-held-out", "x.json", "--profile", "digits-mlp=profiles/digits-mlp.json"],
         r"only a re-scoring \(--rescore\)"),
        (["--precision", "0"], r"bad --precision 0: expected a fraction above 0, below 1"),
        (["--repeats", "5", "--max-repeats", "4"], r"bad --max-repeats 4: expected at least"),
        (["--precision", "0.04", "--extra-minutes", "-1"], r"bad --extra-minutes -1: expected"),
    ],
)  # fmt: skip
def test_a_bad_option_is_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bp.main(argv)


def test_rescore_at_an_anchor_weight_builds_each_runs_profile_again_from_its_readings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--anchor-weight W: each run's anchored profile is built again from the run's start
    profile and the reading its anchor kept (twice the profile's speed here): at 1 it predicts
    as the kept profile, at 0 as the start profile with the anchor's start-up, at 0.5 the
    compute of a profile anchor_move(2, 0.5) as fast; the table says which weight."""
    platform, name, kept = _anchored_cnn_run(tmp_path, monkeypatch)

    def rescored(weight: str) -> tuple[dict[str, Any], str]:
        assert bp.main(["--rescore", "--quick", "--anchor-weight", weight]) == 0
        out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
        return out["rows"][0], out["meta"]["rescored"]

    (at_one, _), (at_zero, _), (at_half, says) = rescored("1"), rescored("0"), rescored("0.5")
    catalog = bp.catalog_from_dict(json.loads((platform / "local.json").read_text()))
    as_kept = bp.predicted_terms(at_one, platform / name, catalog)
    as_started = bp.predicted_terms(at_one, platform / "synthetic-cifar-cnn.json", catalog)

    def compute(row: dict[str, Any]) -> float:
        return float(row["terms"]["compute"]["predicted_local_s"])

    assert compute(at_one) == pytest.approx(as_kept["compute"], rel=1e-3)
    assert compute(at_zero) == pytest.approx(as_started["compute"], rel=1e-3)
    assert at_zero["terms"]["startup"]["predicted_local_s"] == pytest.approx(1.0)
    # 2× is beyond the drift band: half the way within it, the rest whole (2**0.5 without it)
    assert compute(at_half) == pytest.approx(
        as_started["compute"] / anchor_move(2.0, 0.5), rel=0.05
    )
    assert "its anchors applied at weight 0.5" in says
    assert json.loads((platform / name).read_text()) == kept  # the run's own file as it was


def test_rescore_predicts_each_run_of_a_planned_row_at_the_configuration_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planned case plans again every round, so its runs can differ: the row keeps each run's
    configuration and a re-scoring predicts each run at its own (the median of the three), not
    every run at the first one's."""
    runs = [_row("a", 0.5, 0.5, planned=True) for _ in range(3)]
    for run, memory_mb in zip(runs, (1024, 1400, 1769), strict=True):
        run.update(n=1, memory_mb=memory_mb, iterations=1500)
    assert bp.median_row(runs)["run_configurations"] == [
        {"n": 1, "memory_mb": m, "ps_count": 1, "iterations": 1500} for m in (1024, 1400, 1769)
    ]
    _earlier_run(tmp_path, monkeypatch, bp.FIXED[0], 7.0)  # digits-mlp n=1 m=1024
    data = json.loads((tmp_path / "predict-quick.json").read_text())
    (row,) = data["rows"]
    row["run_configurations"] = bp.median_row(runs)["run_configurations"]
    row["predicted_totals_s"] = [1.0, 1.0, 1.0]  # as the run predicted them
    (tmp_path / "predict-quick.json").write_text(json.dumps(data))
    assert bp.main(["--rescore", "--quick"]) == 0
    (again,) = json.loads((tmp_path / "predict-quick-rescored.json").read_text())["rows"]
    platform = tmp_path / "predict-quick-platform"
    catalog = bp.catalog_from_dict(json.loads((platform / "local.json").read_text()))
    each = [bp.predicted_terms(row, "digits-mlp", catalog, c) for c in row["run_configurations"]]
    totals = sorted(p["total"] for p in each)
    assert totals[0] < totals[1] < totals[2]  # more memory, faster: three different predictions
    assert again["terms"]["total"]["predicted_local_s"] == pytest.approx(totals[1])
    assert again["predicted_totals_s"] == pytest.approx([p["total"] for p in each])
    first_only = bp.predicted_terms(row, "digits-mlp", catalog)
    assert first_only["total"] == pytest.approx(max(totals))  # 1024 MB, what it did before


def test_rescore_with_a_catalog_figure_set_predicts_with_it_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--set section.field=number changes the run's catalog for the re-scoring only: 4 digits
    workers at 1024 MB (2.3 vCPU between them) train faster on 2 compute cores than on 1.5
    (total_vcpu, added the same way), though never by more than the cores' ratio (the loop's
    CPU over the cores bounds it; the exchange stays on total_vcpu); and the table names the
    figures set."""
    _earlier_run(tmp_path, monkeypatch, bp.FIXED[4], 10.0)  # digits-mlp n=4 m=1024

    def compute_s(*settings: str) -> float:
        argv = ["--rescore", "--quick"] + [a for s in settings for a in ("--set", s)]
        assert bp.main(argv) == 0
        out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
        terms = out["rows"][0]["terms"]
        return sum(
            float(terms[t]["predicted_local_s"])
            for t in ("compute", "communication", "ps_aggregation")
        )

    on_total_vcpu = compute_s("lambda.total_vcpu=1.5")
    on_two_cores = compute_s("lambda.total_vcpu=1.5", "lambda.compute_cores=2")
    assert on_total_vcpu * 1.5 / 2 * (1 - 1e-9) <= on_two_cores < on_total_vcpu * 0.95
    text = (tmp_path / "predict-quick-rescored.md").read_text()
    assert "the run's catalog with lambda.total_vcpu=1.5, lambda.compute_cores=2" in text
    platform = json.loads((tmp_path / "predict-quick-platform" / "local.json").read_text())
    assert "compute_cores" not in platform["lambda"]  # the run's own record is untouched


def test_rescore_predicts_each_run_on_its_rounds_catalog_and_sets_figures_on_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that kept their round's catalog (the loop anchor's) are re-predicted each on its
    own: a round whose round trip read 5 ms predicts its run's communication far slower than
    one at 0.1 ms, the row is the median of its runs, and --set sets the figure on every
    round's catalog (so both rounds then predict the same)."""
    from tests.local_catalog import local_catalog_dict

    _earlier_run(tmp_path, monkeypatch, bp.FIXED[4], 10.0)  # digits-mlp n=4 m=1024
    platform = tmp_path / "predict-quick-platform"
    (platform / "anchors").mkdir()
    names = []
    for k, rtt_s in enumerate((0.0001, 0.005)):
        doc = local_catalog_dict()
        doc["network"]["function_ps_rtt_s"]["value"] = rtt_s
        names.append(f"anchors/local-round{k}.json")
        (platform / names[-1]).write_text(json.dumps(doc))
    data = json.loads((tmp_path / "predict-quick.json").read_text())
    (row,) = data["rows"]
    row["catalogs"] = [names[0], names[1], names[1]]
    row["run_configurations"] = [{"n": 4, "memory_mb": 1024, "ps_count": 1,
                                  "iterations": row["iterations"]}] * 3  # fmt: skip
    row["predicted_totals_s"] = [1.0, 1.0, 1.0]
    (tmp_path / "predict-quick.json").write_text(json.dumps(data))

    def rescored(*settings: str) -> dict[str, Any]:
        argv = ["--rescore", "--quick"] + [a for s in settings for a in ("--set", s)]
        assert bp.main(argv) == 0
        return json.loads((tmp_path / "predict-quick-rescored.json").read_text())["rows"][0]

    fast, slow = (bp.predicted_terms(row, "digits-mlp", bp.load_catalog(platform / n))
                  for n in names)  # fmt: skip
    assert slow["communication"] > 5 * fast["communication"]
    again = rescored()
    assert again["predicted_totals_s"] == pytest.approx(
        [fast["total"], slow["total"], slow["total"]]
    )
    assert again["terms"]["total"]["predicted_local_s"] == pytest.approx(slow["total"])
    both = rescored("network.function_ps_rtt_s=0.001")["predicted_totals_s"]
    assert both[0] == pytest.approx(both[1]) and fast["total"] < both[0] < slow["total"]


def test_rescore_with_a_curve_set_predicts_on_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--set lambda.init_cores_by_n=[[x, y], ...] sets a curve: 4 digits workers starting at
    once on 1 core take twice as long as on 2."""
    _earlier_run(tmp_path, monkeypatch, bp.FIXED[4], 10.0)  # digits-mlp n=4 m=1024

    def startup_s(points: str) -> float:
        argv = ["--rescore", "--quick", "--set", f"lambda.init_cores_by_n={points}"]
        assert bp.main(argv) == 0
        out = json.loads((tmp_path / "predict-quick-rescored.json").read_text())
        return float(out["rows"][0]["terms"]["startup"]["predicted_local_s"])

    assert startup_s("[[2, 1], [8, 1]]") == pytest.approx(2 * startup_s("[[2,2],[8,2]]"))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("compute_cores=2", "bad --set 'compute_cores=2': expected section.field=number"),
        ("lambda.compute_cores", "bad --set 'lambda.compute_cores': expected section"),
        ("lambda.compute_cores=two", "bad --set 'lambda.compute_cores=two': expected section"),
        ("lambda.compute_cores=inf", "bad --set 'lambda.compute_cores=inf': expected section"),
        ("cpu.cores=2", "bad --set 'cpu.cores=2': no catalog section 'cpu' (lambda, network"),
        ("lambda.init_cores_by_n=[]", "bad --set 'lambda.init_cores_by_n=[]': expected"),
        ("lambda.init_cores_by_n=[[2]]", "bad --set 'lambda.init_cores_by_n=[[2]]': expected"),
        ('lambda.init_cores_by_n=[[2,"a"]]', "bad --set 'lambda.init_cores_by_n=[[2,\"a\"]]'"),
        ("lambda.init_cores_by_n=[[2,Infinity]]", "bad --set 'lambda.init_cores_by_n=[[2,Inf"),
        ("lambda.compute_cores=true", "bad --set 'lambda.compute_cores=true': expected"),
    ],
)
def test_a_bad_catalog_setting_is_one_line(setting: str, message: str) -> None:
    from tests.local_catalog import local_catalog_dict

    with pytest.raises(ValueError) as err:
        bp.catalog_figures_set(local_catalog_dict(), [setting])
    assert str(err.value).startswith(message)


def test_a_held_out_rescoring_at_an_anchor_weight_passes_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.predict.cli as cli

    seen = {}

    def fake(
        source: Path,
        command: str,
        anchor_weight: float | None = None,
        settings: list[str] | None = None,
    ) -> str:
        seen.update(source=source, weight=anchor_weight, settings=settings)
        return "rescored"

    monkeypatch.setattr(cli, "rescore_heldout", fake)
    assert bp.main(["--rescore-held-out", str(tmp_path / "h.json"), "--anchor-weight", "0.5"]) == 0
    assert seen == {"source": tmp_path / "h.json", "weight": 0.5, "settings": []}
    # a catalog what-if: a figure the run's calibration did not read yet
    argv = ["--rescore-held-out", str(tmp_path / "h.json"), "--set", "lambda.x=1", "--set", "a.b=2"]
    assert bp.main(argv) == 0
    assert seen["settings"] == ["lambda.x=1", "a.b=2"]


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


def _spread_rows(totals_s: list[float], count: int = 24) -> list[dict]:
    rows = [_row(f"c{k}", 0.9, 0.9) for k in range(count)]
    for r in rows:
        r["measured_totals_s"] = list(totals_s)
    return rows


def test_the_noise_ceiling_is_what_an_exact_model_scores_against_the_grids_own_spread() -> None:
    """Runs that never vary leave an exact model at 1; runs spread 20% a case (stdev over mean)
    take the median of three 10% off in some row of nearly every 24-row grid, and more runs a
    case bring the worst back; the same rows give the same figures (seeded); a case run once
    has no spread to read."""
    still = bp.noise_ceiling(_spread_rows([10.0, 10.0, 10.0]))
    assert still == {
        "runs": 3, "runs_range": [3, 3], "mean": 1.0, "worst": 1.0, "p_mean": 1.0, "p_worst": 1.0
    }  # fmt: skip
    wide_rows = _spread_rows([8.0, 10.0, 12.0])  # stdev 2 over mean 10
    wide = bp.noise_ceiling(wide_rows)
    assert wide is not None and wide == bp.noise_ceiling(wide_rows)
    assert wide["runs"] == 3 and 0.85 < wide["mean"] < 0.95 and wide["worst"] < 0.8
    assert wide["p_worst"] < 0.01
    more = bp.noise_ceiling(wide_rows, runs=9)
    assert more is not None and more["worst"] > wide["worst"] and more["mean"] > wide["mean"]
    once = _row("b", 0.9, 0.9)
    once["measured_totals_s"] = [5.0]
    assert bp.noise_ceiling([once]) is None


def test_the_ceiling_draws_each_case_as_often_as_the_grid_ran_it() -> None:
    """A grid that ran its noisy cases more: each case is drawn with its own count, so the extra
    runs of the wide cases bring the worst back as they would in the grid."""
    wide = _spread_rows([8.0, 10.0, 12.0])
    more = [{**r, "measured_totals_s": [8.0, 10.0, 12.0] * 3} for r in wide]
    mixed = wide[:12] + more[12:]
    ceiling = bp.noise_ceiling(mixed)
    assert ceiling is not None and ceiling["runs_range"] == [3, 9]
    assert ceiling["worst"] > bp.noise_ceiling(wide)["worst"]
    assert bp.runs_text(ceiling) == "each case's own 3-9"
    assert bp.runs_text({"runs": 5}) == "5"  # a ceiling written before runs_range


def test_the_median_error_is_the_runs_spread_over_root_r() -> None:
    """√(π/2)·stdev/√R over the median: 8, 10, 12 (stdev 2) stray about 14% at three runs and half
    that at four times as many; runs that never vary do not stray; one run has no spread."""
    three = bp.median_error([8.0, 10.0, 12.0])
    assert three == pytest.approx(math.sqrt(math.pi / 2) * 2.0 / math.sqrt(3) / 10.0)
    twelve = bp.median_error([8.0, 10.0, 12.0] * 4)
    assert twelve is not None and twelve < three / 1.9
    assert bp.median_error([10.0, 10.0]) == 0.0
    assert bp.median_error([10.0]) is None


def _runs_of(totals: list[float]) -> list[dict]:
    runs = []
    for t in totals:
        run = _row("a", 0.9, 0.9)
        run["terms"] = {**run["terms"], "total": {**run["terms"]["total"], "measured_s": t}}
        runs.append(run)
    return runs


def test_a_case_wants_more_runs_for_its_spread_alone_until_the_cap() -> None:
    """Wide runs want more, still runs do not, a case at the cap does not; the predictions play
    no part (a case far from its prediction but measured alike each time wants none)."""
    wide, still = _runs_of([8.0, 10.0, 12.0]), _runs_of([10.0, 10.0, 10.0])
    for run in still:
        run["terms"]["total"]["predicted_local_s"] = 50.0  # far off, and no reason to run again
    assert bp.cases_wanting_runs([wide, still], 0.04, 12) == [0]
    assert bp.cases_wanting_runs([wide, still], 0.2, 12) == []  # within 20% already
    assert bp.cases_wanting_runs([_runs_of([8.0, 10.0, 12.0] * 4), still], 0.04, 12) == []
    assert bp.cases_wanting_runs([_runs_of([10.0])], 0.04, 12) == [0]  # no spread read yet


def test_extra_rounds_run_only_the_cases_still_spread_then_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--precision: after the repeats, rounds go on over the cases whose median may still stray,
    each workload's anchored again first, until each is precise or at --max-repeats; the table
    says how many runs each case got."""
    cases, order, paths, metas = _fake_grid(tmp_path, monkeypatch)
    digits, cnn, planned = (c.label for c in cases)
    totals = {digits: iter([8.0, 12.0, 10.0, 10.0, 9.0, 11.0]), cnn: iter([10.0] * 6),
              planned: iter([10.0] * 6)}  # fmt: skip

    def fake_measure(
        case: bp.Case, endpoint: object, out: Path, profile: Path | None, catalog: Path | None
    ) -> dict:
        order.append((case.label, profile))
        (run,) = _runs_of([next(totals[case.label])])
        return {**run, "case": case.label, "planned": bool(case.tight), "met_deadline": None}

    anchored: list[Path] = []

    def fake_anchor(workload: str, base: Path | None, out: Path) -> tuple[Path, dict]:
        anchored.append(out)
        return out, {"1": 1.0}

    monkeypatch.setattr(bp, "measure", fake_measure)
    monkeypatch.setattr(bp, "anchor_profile", fake_anchor)
    monkeypatch.setattr(bp, "predicted_terms", lambda *a: {"total": 1.0})
    argv = ["--quick", "--repeats", "2", "--precision", "0.04", "--max-repeats", "5"]
    assert bp.main(argv) == 0
    labels = [label for label, _ in order]
    assert labels == [digits, planned, cnn] * 2 + [digits] * 3  # only the spread case, to the cap
    anchors = tmp_path / "predict-quick-platform" / "anchors"
    assert anchored[-3:] == [anchors / f"digits-mlp-round{k}.json" for k in (2, 3, 4)]
    # the catalog's loop is read once a round that runs a row, just before its first
    assert len(metas[0]["loop_anchors"]) == 5
    rule = metas[0]["precision"]
    assert rule == {"median_error": 0.04, "max_repeats": 5, "extra_minutes": 30.0,
                    "runs": [5, 2, 2]}  # fmt: skip
    assert bp.runs_per_case_text(metas[0]).endswith(": 2-5 runs a case, 9 in all")


def test_no_extra_round_starts_once_the_extra_minutes_are_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--extra-minutes 0: the repeats run, and no extra round after them, however spread."""
    cases, order, paths, metas = _fake_grid(tmp_path, monkeypatch)
    spread = iter([8.0, 12.0] * 10)

    def fake_measure(
        case: bp.Case, endpoint: object, out: Path, profile: Path | None, catalog: Path | None
    ) -> dict:
        order.append((case.label, profile))
        (run,) = _runs_of([next(spread)])
        return {**run, "case": case.label, "planned": bool(case.tight), "met_deadline": None}

    monkeypatch.setattr(bp, "measure", fake_measure)
    argv = ["--quick", "--repeats", "2", "--no-anchor", "--precision", "0.04",
            "--extra-minutes", "0"]  # fmt: skip
    assert bp.main(argv) == 0
    assert len(order) == 6 and metas[0]["precision"]["runs"] == [2, 2, 2]


def test_the_table_reads_the_grid_against_its_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    meta = {"machine": "m", "loadavg": "0 0 0", "cpu_share": "s", "command": "c"}
    text = bp.write_results(_spread_rows([10.0, 10.0, 10.0], count=2), meta)
    assert (
        "Ceiling (noise_ceiling): a model exact on every case's mean, held to the median of 3 "
        "runs spread as each case's were, scores mean 1.000 and worst 1.000 in the median of "
        "2000 simulated grids; mean ≥ 0.95 in 100% of them, worst ≥ 0.9 in 100% (with 5 runs a "
        "case: 100% and 100%)." in text
    )
    summary = json.loads((tmp_path / "predict.json").read_text())["summary"]
    assert summary["ceiling_more_runs"]["runs"] == 5


def test_a_reuse_run_keeps_the_catalog_and_profiles_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--reuse copies catalog/local.json and the committed profiles beside its results, so the
    run can be re-scored (rescore reads <name>-platform/local.json)."""
    repo = tmp_path / "repo"
    (repo / "catalog").mkdir(parents=True)
    (repo / "profiles").mkdir()
    (repo / "catalog" / "local.json").write_text('{"name": "local"}')
    (repo / "profiles" / "digits-mlp.json").write_text('{"name": "digits-mlp"}')
    monkeypatch.setattr(bp, "REPO_ROOT", repo)
    kept = bp.keep_platform(["digits-mlp"], tmp_path / "out")
    assert kept == {"digits-mlp": tmp_path / "out" / "digits-mlp.json"}
    assert (tmp_path / "out" / "local.json").read_text() == '{"name": "local"}'
    assert kept["digits-mlp"].read_text() == '{"name": "digits-mlp"}'


def test_a_run_on_its_rounds_catalog_is_planned_and_predicted_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """measure() with a round's catalog plans the case on it and hands it to the run, whose
    report (the real emulator.report.build_report) predicts every term on it: the row holds the
    run's measurements to the same figures --rescore predicts with (predicted_terms). A round
    trip of 5 ms predicts the digits exchange far slower than 0.1 ms, and accuracy follows."""
    from emulator.records import RunRecord, WorkerState
    from emulator.report import build_report
    from tests.functions.test_terms import link_result
    from tests.local_catalog import local_catalog_dict

    planned_on: list[Any] = []

    def fake_run(plan: Any, options: Any, endpoint: object) -> None:
        """The run's report as the emulator builds it, on made-up links of 2 s in all."""
        planned_on.append((plan, options.local_catalog))
        workers = [WorkerState(rank=r, event={}) for r in range(plan.n_workers)]
        for worker in workers:
            worker.links = [link_result([[0, 2.0]], load_s=0.5, compute_s=1.0,
                                        communication_s=0.2, startup_s=0.3)]  # fmt: skip
        cores = plan.memory_mb / bp.load_catalog(options.local_catalog).mb_per_vcpu
        record = RunRecord(
            plan=plan, options=options, cpu_scale=1.0, cpu_status="test", worker_cores=cores,
            s3_kind="none", s3_url="-", buckets={}, prepare_s=0.0, ps_start_s=0.0,
            train_wall_s=2.0, finalize_s=0.0, workers=workers, finalize_result={},
            out_dir=options.out_dir, throttled_s={}, child_pids=[],
        )  # fmt: skip
        report = build_report(record, None, options.local_catalog)
        report["emulation"] = {"cpu_share": "held"}
        options.out_dir.mkdir(parents=True)
        (options.out_dir / "report.json").write_text(json.dumps(report, default=str))

    monkeypatch.setattr(bp, "run", fake_run)
    case = bp.FIXED[0]  # digits-mlp n=1 m=1024
    results = {}
    for name, rtt_s in (("fast", 0.0001), ("slow", 0.005)):
        doc = local_catalog_dict()
        doc["network"]["function_ps_rtt_s"]["value"] = rtt_s
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        results[name] = bp.measure(case, None, tmp_path / name, None, path)
        expected = bp.predicted_terms(results[name], case.workload, bp.load_catalog(path))
        assert {t: v["predicted_local_s"] for t, v in results[name]["terms"].items()} == expected
        assert results[name]["terms"]["total"]["measured_s"] == 2.0  # the run's, untouched
        total = results[name]["accuracy_local"]["total"]
        assert total == pytest.approx(1 - abs(expected["total"] - 2.0) / 2.0)
        assert planned_on[-1][0].catalog == "local"
        assert planned_on[-1][1] == str(path)  # the report predicted on the round's catalog
    fast, slow = (results[n]["terms"]["communication"]["predicted_local_s"] for n in results)
    assert slow > 5 * fast


def test_a_run_without_a_rounds_catalog_is_predicted_on_catalog_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a round's catalog (--no-anchor) the run's report predicts on catalog/local.json,
    as every emulator run's does."""
    handed: list[str] = []

    def fake_run(plan: Any, options: Any, endpoint: object) -> None:
        handed.append(options.local_catalog)
        raise RuntimeError("stop here")

    monkeypatch.setattr(bp, "run", fake_run)
    monkeypatch.setattr(bp, "plan_of", lambda case, profile, catalog: None)
    with pytest.raises(RuntimeError, match="stop here"):
        bp.measure(bp.FIXED[0], None, tmp_path / "run", None, None)
    assert handed == ["local"]


def test_loop_anchors_read_per_round_in_ms_and_the_share_as_is() -> None:
    rounds = [
        {"function_ps_rtt_s": 9.4e-05, "exchange_cpu_fraction": 0.42, "ps_request_cpu_s": 2e-4},
        {"function_ps_rtt_s": 7.5e-05, "exchange_cpu_fraction": 0.39},
    ]
    assert bp.loop_anchors_text(rounds) == (
        "function_ps_rtt_s 0.094, 0.075 ms; exchange_cpu_fraction 0.420, 0.390; "
        "ps_request_cpu_s 0.200 ms"
    )


def test_the_loads_anchor_reads_in_ms_after_the_loops() -> None:
    rounds = [{"exchange_cpu_fraction": 0.42, "load_cpu_s": 0.241}, {"load_cpu_s": 0.2}]
    assert bp.loop_anchors_text(rounds) == (
        "exchange_cpu_fraction 0.420; load_cpu_s 241.000, 200.000 ms"
    )
