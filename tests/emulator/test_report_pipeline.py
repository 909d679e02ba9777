"""The report's "predicted here" of a pipelined plan is the pipelined model's (report_pipeline.py):
the plan's own stages priced on the local catalog, not a one-stage plan of the same workers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from emulator.options import Options
from emulator.records import RunRecord, WorkerState
from emulator.report import build_report, local_choice, run_rules
from emulator.report_pipeline import predict_local_pipelined
from provisioner import load_profile
from provisioner.catalog import Catalog, catalog_from_dict
from provisioner.plan import Goal, Plan
from provisioner.planner import plan_job, predict_run
from provisioner.space import Limits
from tests.functions.test_terms import link_result
from tests.local_catalog import shared_core_catalog_dict

WORKLOAD = "digits-mlp-blocks"
CEILING_MB = 320  # below digits-mlp's 384 MB: the local planner cuts it


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return catalog_from_dict(shared_core_catalog_dict(CEILING_MB))


@pytest.fixture(scope="module")
def cut_plan(catalog: Catalog) -> Plan:
    profile = load_profile(WORKLOAD)
    plan = plan_job(profile, catalog, Goal(deadline_s=3600), Limits(max_concurrency=4), "t").plan
    assert plan is not None and plan.pipeline is not None and len(plan.pipeline.stages) >= 2
    return plan


def _record(plan: Plan, catalog: Catalog, cpu_scale: float) -> RunRecord:
    """A pipelined run by hand, under the catalog's own limit, margin and iteration cap."""
    assert plan.pipeline is not None
    workers = []
    for stage in plan.pipeline.stages:
        for rank in range(plan.n_workers):
            worker = WorkerState(rank=rank, event={}, stage=stage.index)
            link = link_result([[0, 2.0]], compute_s=3.0 + stage.index, communication_s=1.0)
            link["timings"].update(boundary_wait_s=0.5 + rank, boundary_transfer_s=0.25)
            worker.links = [link]
            workers.append(worker)
    options = Options(
        invocation_limit_s=float(catalog.invocation_timeout_s),
        safety_margin_s=catalog.safety_margin_s,
        iterations_per_invocation=catalog.max_iterations_per_invocation,
    )
    return RunRecord(
        plan=plan, options=options, cpu_scale=cpu_scale, cpu_status="test",
        worker_cores=cpu_scale * plan.vcpu_share, s3_kind="none", s3_url="-", buckets={},
        prepare_s=0.0, ps_start_s=0.0, train_wall_s=400.0, finalize_s=0.0, workers=workers,
        finalize_result={}, out_dir=Path("."), throttled_s={}, child_pids=[],
    )  # fmt: skip


def _local(report: dict) -> dict[str, float | None]:  # type: ignore[type-arg]
    return {row["term"]: row["predicted_local_s"] for row in report["terms"]}


def test_a_pipelined_plans_local_prediction_is_the_pipelined_models(
    catalog: Catalog, cut_plan: Plan
) -> None:
    # at one core per vCPU every stage runs at its planned memory on the catalog it was planned
    # on, so the pipelined model predicts exactly the plan's own figures
    record = _record(cut_plan, catalog, cpu_scale=1.0)
    report = build_report(record, None, local_catalog=catalog)
    local = _local(report)
    assert local["total"] == cut_plan.prediction.total_s
    assert local["compute"] == cut_plan.prediction.compute_s
    assert local["communication"] == cut_plan.prediction.communication_s
    assert "pipelined model: 2 stages" in report["predictions"]["local"]
    # ... which is not what the one-stage model of the same workers says
    profile = load_profile(WORKLOAD)
    choice = local_choice(cut_plan, record.worker_cores, catalog)
    one_stage = predict_run(profile, catalog, choice, run_rules(record), job="t")
    assert one_stage.prediction.total_s != pytest.approx(local["total"], rel=0.01)


def test_each_stage_is_priced_at_the_cores_its_workers_got(
    catalog: Catalog, cut_plan: Plan
) -> None:
    assert cut_plan.pipeline is not None
    shortened = dataclasses.replace(
        cut_plan, training=dataclasses.replace(cut_plan.training, iterations=24)
    )
    record = _record(shortened, catalog, cpu_scale=0.5)
    local = _local(build_report(record, None, local_catalog=catalog))
    half_mb = [round(s.memory_mb / 2) for s in cut_plan.pipeline.stages]
    profile = load_profile(WORKLOAD)
    expected = predict_local_pipelined(
        profile, catalog, shortened, run_rules(record), half_mb, "loopback"
    )
    assert expected.training.iterations == 24
    assert local["total"] == expected.prediction.total_s
    # half the cores: every stage computes slower than planned
    full = _local(build_report(_record(shortened, catalog, 1.0), None, local_catalog=catalog))
    assert local["compute"] is not None and full["compute"] is not None
    assert local["compute"] > full["compute"]


def test_a_pipelined_runs_measured_communication_is_the_rest_of_the_stragglers_iteration(
    catalog: Catalog, cut_plan: Plan
) -> None:
    # the straggler computed longest: the last stage's (4 + index s) first replica; its
    # communication 1 s and its boundary 0.5 s of waits and 0.25 of transfers
    report = build_report(_record(cut_plan, catalog, 1.0), None, local_catalog=catalog)
    measured = {row["term"]: row["measured_s"] for row in report["terms"]}
    assert measured["compute"] == 3.0 + len(cut_plan.pipeline.stages) - 1  # type: ignore[union-attr]
    assert measured["communication"] == 1.0 + 0.5 + 0.25
    assert (
        "measured communication is the straggler's sync plus its boundary"
        in (report["predictions"]["local"])
    )


def test_a_profile_without_the_plans_blocks_leaves_the_local_columns_null_and_says_why(
    catalog: Catalog, cut_plan: Plan
) -> None:
    record = _record(cut_plan, catalog, 1.0)
    record = dataclasses.replace(record, options=Options(workload="digits-mlp"))
    report = build_report(record, None, local_catalog=catalog)
    assert all(v is None for v in _local(report).values())
    assert report["predictions"]["local"] == (
        "no local prediction: the pipelined model needs the plan's 6 blocks in the profile, "
        "and profile 'digits-mlp' declares 0; accepted: its profile with blocks (--workload, "
        "profiles/README.md)"
    )
