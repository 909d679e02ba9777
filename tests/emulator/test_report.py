"""Report arithmetic and the progress line: pure functions over made-up invocation results."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from emulator.progress import eta_s, render_line
from emulator.records import WorkerState
from emulator.report import loss_curve, smoothed_first_last
from tests.functions.test_terms import link_result


def test_loss_curve_averages_workers_per_iteration() -> None:
    a, b = WorkerState(rank=0, event={}), WorkerState(rank=1, event={})
    a.links = [link_result([[0, 2.0], [1, 1.0]])]
    b.links = [link_result([[0, 4.0], [1, 3.0]])]
    assert loss_curve([a, b]) == [(0, 3.0), (1, 2.0)]
    assert smoothed_first_last([(0, 3.0), (1, 2.0)], window=1) == (3.0, 2.0)


def test_progress_line_shows_eta_and_deadline_verdict() -> None:
    assert eta_s(0, 100, 5.0) is None
    assert eta_s(25, 100, 10.0) == 30.0
    line = render_line(25, 100, 0.5, 10.0, deadline_s=30.0, width=4)
    assert line.startswith("[#---] it 25/100")
    assert "loss 0.5000" in line and "ETA 30s" in line and "(LATE)" in line
    assert "(on time)" in render_line(50, 100, None, 10.0, deadline_s=60.0)


def test_json_safe_turns_nan_into_null() -> None:
    from emulator.report import json_safe

    assert json_safe({"a": [1.0, math.nan], "b": {"c": math.inf}}) == {
        "a": [1.0, None],
        "b": {"c": None},
    }


def _record(plan, train_wall_s: float, worker_cores: float = 1.0):  # type: ignore[no-untyped-def]
    """A RunRecord by hand: two workers, two links each, an 8 s limit and a 20-iteration cap."""
    from pathlib import Path

    from emulator.options import Options
    from emulator.records import RunRecord

    workers = []
    for rank in range(plan.n_workers):
        worker = WorkerState(rank=rank, event={})
        worker.links = [
            link_result([[0, 2.0]], load_s=0.5, compute_s=3.0, communication_s=1.0, startup_s=1.0),
            link_result([[1, 1.0]], load_s=0.2, compute_s=2.0, communication_s=0.5, startup_s=0.8),
        ]
        workers.append(worker)
    options = Options(invocation_limit_s=8.0, safety_margin_s=1.0, iterations_per_invocation=20)
    return RunRecord(
        plan=plan, options=options, cpu_scale=1.0, cpu_status="test", worker_cores=worker_cores,
        s3_kind="none", s3_url="-", buckets={}, prepare_s=0.0, ps_start_s=0.0,
        train_wall_s=train_wall_s, finalize_s=0.0, workers=workers, finalize_result={},
        out_dir=Path("."), throttled_s={}, child_pids=[],
    )  # fmt: skip


def _aws_plan():  # type: ignore[no-untyped-def]
    from tests.emulator.plans import planned_digits, with_iterations

    return with_iterations(planned_digits("report-test"), 50)


def test_report_predicts_the_run_here_and_scores_it_against_the_measurement() -> None:
    """Local column: the run's n, cores as memory, loopback PS, its limit, margin, cap and k."""
    import json

    from emulator.report import build_report, json_safe
    from emulator.report_table import format_table
    from provisioner import load_profile
    from provisioner.planner import RunRules, predict_run
    from provisioner.space import Choice
    from tests.local_catalog import local_catalog

    plan, catalog = _aws_plan(), local_catalog()
    choice = Choice(plan.n_workers, 1327, plan.arch, "loopback", plan.ps_count)  # 0.75 core
    expected = predict_run(
        load_profile(plan.workload), catalog, choice, RunRules(8.0, 1.0, 20, 50), job=plan.job
    ).prediction
    assert expected.chaining_s > 0  # 50 iterations at 20 per invocation: three links
    record = _record(plan, train_wall_s=2 * expected.total_s, worker_cores=0.75)
    report = build_report(record, None, local_catalog=catalog)
    rows = {row["term"]: row for row in report["terms"]}
    assert rows["total"]["predicted_local_s"] == expected.total_s
    assert rows["compute"]["predicted_local_s"] == expected.compute_s
    assert (
        rows["total"]["predicted_aws_s"] == plan.prediction.total_s == rows["total"]["predicted_s"]
    )
    accuracy = report["accuracy_local"]
    assert math.isclose(accuracy["total"], 0.5)  # predicted half of what was measured
    assert math.isclose(accuracy["compute"], 1 - abs(expected.compute_s - 5.0) / 5.0)
    assert accuracy["ps_aggregation"] is None  # not measured (no PS STATUS): no score
    # launch: the run's wall beyond the slowest chain of handlers (here no link reports a
    # handler total, so the first link's wall is all gap: the chain holds the second link's 10 s)
    late = build_report(_record(plan, train_wall_s=30.0), None, local_catalog=catalog)
    assert {r["term"]: r for r in late["terms"]}["launch"]["measured_s"] == pytest.approx(20.0)
    assert (
        rows["launch"]["predicted_local_s"]
        == expected.launch_s
        == pytest.approx(catalog.launch_s + catalog.restart_s)
    )
    assert report["predictions"]["local"].startswith(f"local: {plan.n_workers} x 1327 MB")
    assert report["predictions"]["aws"].startswith("lambda-2025: ")
    table = format_table(report)
    assert "predicted here s" in table and "predicted AWS s" in table and " 50%" in table
    shares = report["error_share_of_total_local"]
    measured_total = rows["total"]["measured_s"]
    assert shares["compute"] == pytest.approx((expected.compute_s - 5.0) / measured_total)
    assert shares["ps_aggregation"] is None
    assert not re.search(r"-\d+%", table)  # a miss reads "12% under", never "-12%"
    json.dumps(json_safe(report), allow_nan=False)


@pytest.mark.parametrize(
    ("share", "words"),
    [(0.031, "3% over"), (-0.12, "12% under"), (0.004, "0%"), (-4.63, "463% under"), (None, "n/a")],
)
def test_a_terms_miss_reads_as_a_share_of_the_total_with_no_minus(
    share: float | None, words: str
) -> None:
    from emulator.report_table import off_by_words

    assert off_by_words(share) == words


def test_the_totals_accuracy_is_floored_at_zero_and_shares_need_a_measured_total() -> None:
    from emulator.report import error_share_of_total
    from emulator.report_table import accuracy_words

    assert accuracy_words(-0.88) == "0%"
    assert accuracy_words(0.925) == "92%"
    assert error_share_of_total(3.0, 1.0, 4.0) == 0.5
    assert error_share_of_total(3.0, 1.0, 0.0) is None
    assert error_share_of_total(3.0, float("nan"), 4.0) is None


def test_report_without_a_local_catalog_says_so_and_leaves_the_local_columns_null(
    tmp_path: object,
) -> None:
    from pathlib import Path

    from emulator.options import NO_LOCAL_CATALOG
    from emulator.report import build_report
    from emulator.report_table import format_table

    absent = Path(str(tmp_path)) / "local.json"
    report = build_report(_record(_aws_plan(), train_wall_s=10.0), None, local_catalog=str(absent))
    assert all(row["predicted_local_s"] is None for row in report["terms"])
    assert set(report["accuracy_local"].values()) == {None}
    assert report["predictions"]["local"] == NO_LOCAL_CATALOG
    assert all(row["predicted_aws_s"] is not None for row in report["terms"])
    assert f"predicted here: {NO_LOCAL_CATALOG}" in format_table(report).splitlines()
    absent.write_text("{")  # there but broken: the report still builds and says why
    broken = build_report(_record(_aws_plan(), train_wall_s=10.0), None, str(absent))
    assert broken["predictions"]["local"].startswith("no local prediction: catalog ")
    assert broken["terms"][0]["predicted_local_s"] is None


def _local_plan(deadline_s: float):  # type: ignore[no-untyped-def]
    from provisioner import Goal, Limits, load_profile, plan_job
    from tests.local_catalog import local_catalog

    result = plan_job(
        load_profile("digits-mlp"), local_catalog(), Goal(deadline_s=3600.0), Limits(), job="j"
    )
    return dataclasses.replace(result.plan, goal=Goal(deadline_s=deadline_s))


def test_a_local_plans_aws_column_is_the_same_configuration_on_lambda_2025() -> None:
    """n, memory, arch and PS count kept; the PS type the cheapest lambda-2025 has for them."""
    from emulator.report import build_report, predict_aws
    from provisioner import Goal, Limits, load_catalog, load_profile
    from provisioner.planner import build_plan
    from provisioner.space import Choice

    plan = _local_plan(deadline_s=30.0)
    assert plan.catalog == "local" and plan.ps_type == "loopback"
    aws, label = predict_aws(plan)
    assert aws is not None and aws.catalog == "lambda-2025" and aws.ps_type != "loopback"
    assert (aws.n_workers, aws.memory_mb, aws.ps_count) == (
        plan.n_workers, plan.memory_mb, plan.ps_count,
    )  # fmt: skip
    catalog, profile = load_catalog("lambda-2025"), load_profile("digits-mlp")
    for ps in catalog.ps_types:
        choice = Choice(plan.n_workers, plan.memory_mb, plan.arch, ps.name, plan.ps_count)
        other = build_plan(profile, catalog, choice, Goal(), Limits(), job="j")
        assert aws.cost.total_usd <= other.cost.total_usd
    assert label.startswith("lambda-2025, cheapest PS type: ")
    report = build_report(_record(plan, train_wall_s=29.0), None, local_catalog=None)
    assert report["cost_usd"]["total_usd"] == aws.cost.total_usd  # AWS's, not the copied prices
    met = build_report(_record(plan, train_wall_s=29.0), None, local_catalog=None)["deadline"]
    late = build_report(_record(plan, train_wall_s=31.0), None, local_catalog=None)["deadline"]
    assert (met["met"], late["met"]) == (True, False)


def test_an_s3_runs_predictions_keep_its_exchange() -> None:
    """Both columns model the S3 exchange with the run's k (they modelled a PS of 0 shards)."""
    from emulator.report import local_choice, predict_aws
    from tests.emulator.plans import planned_digits_s3
    from tests.local_catalog import local_catalog

    plan = planned_digits_s3("j")
    choice = local_choice(plan, 0.5, local_catalog())
    assert (choice.sync, choice.reducers, choice.ps_type, choice.ps_count) == (
        "s3", plan.reducers, "", 0)  # fmt: skip
    aws, label = predict_aws(dataclasses.replace(plan, catalog="local"))
    assert aws is not None and (aws.sync, aws.reducers, aws.ps_count) == ("s3", plan.reducers, 0)
    size = f"{plan.n_workers} x {plan.memory_mb} MB {plan.arch}"
    assert label == f"lambda-2025: {size}, S3 k={plan.reducers}"


def test_local_plans_run_at_one_core_per_vcpu_unless_told_otherwise() -> None:
    from emulator import cpu
    from emulator.options import Options
    from emulator.orchestrator import resolve_cpu_scale

    local, aws = _local_plan(deadline_s=30.0), _aws_plan()
    assert resolve_cpu_scale(local, Options()) == 1.0
    assert resolve_cpu_scale(local, Options(cpu_scale=0.25)) == 0.25
    expected = cpu.default_cpu_scale(aws.n_workers, aws.memory_mb, cpu.machine_cores())
    assert resolve_cpu_scale(aws, Options()) == expected


def test_the_planners_margin_rule_is_the_emulators() -> None:
    """A local plan is made under the margin the run will keep (two copies of one rule)."""
    from emulator.options import default_safety_margin_s
    from provisioner import load_catalog
    from provisioner.planner import emulator_margin_s
    from tests.local_catalog import local_catalog

    for catalog in (load_catalog("lambda-2025"), local_catalog()):
        for limit_s in (3.0, 8.0, 60.0, 900.0):
            assert emulator_margin_s(limit_s, catalog) == default_safety_margin_s(limit_s)


def test_the_report_gives_the_local_interval_and_whether_the_total_fell_inside() -> None:
    """With a measured spread in the local catalog the report scales the local prediction by it
    and says whether the measured total fell inside; without one it gives no interval."""
    from emulator.report import build_report
    from emulator.report_table import format_table
    from provisioner.interval import PredictionInterval
    from tests.local_catalog import local_catalog

    plan = _aws_plan()
    noisy = dataclasses.replace(
        local_catalog(), prediction_interval=PredictionInterval(0.8, 1.25, "test")
    )
    inside = build_report(_record(plan, train_wall_s=1.0), None, local_catalog=noisy)
    predicted = {r["term"]: r for r in inside["terms"]}["total"]["predicted_local_s"]
    wall_s = predicted * 1.1  # inside [0.8, 1.25] × the prediction
    inside = build_report(_record(plan, train_wall_s=wall_s), None, local_catalog=noisy)
    assert inside["interval_local"] == {
        "level": 0.9,
        "low_s": pytest.approx(predicted * 0.8),
        "high_s": pytest.approx(predicted * 1.25),
        "inside": True,
    }
    line = next(x for x in format_table(inside).splitlines() if x.startswith("total: "))
    assert line == (
        f"total: predicted {predicted:.1f} s (90%: {predicted * 0.8:.1f}–{predicted * 1.25:.1f}"
        f" s), measured {wall_s:.1f} s, inside"
    )
    late = build_report(_record(plan, train_wall_s=predicted * 1.3), None, local_catalog=noisy)
    assert late["interval_local"]["inside"] is False
    assert format_table(late).count(", OUTSIDE") == 1
    point = build_report(_record(plan, train_wall_s=wall_s), None, local_catalog=local_catalog())
    assert point["interval_local"] is None  # no spread measured: a point is no interval
    assert "(90% interval not measured), measured" in format_table(point)
