"""The emulator's side of re-planning, piece by piece: the worker slots and the segment that runs,
each link's CPU group at its memory, the pace step's clock and figures, the report's re-planning
lines, and `--cpu-scale for-deadline:R`. The whole loop runs in test_replan_end_to_end.py."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from emulator import cpu
from emulator.deadline_scale import parse_ratio, predicted_total_s, scale_for_deadline
from emulator.options import Options
from emulator.pace import (
    local_bundle,
    on_training_clock,
    pace_note,
    run_catalog_document,
    segment_cap,
)
from emulator.placements import Placements, group_name
from emulator.records import (
    RunRecord,
    WorkerState,
    check_memory_ceiling,
    segment_workers,
    worker_slots,
)
from emulator.report_replan import measured_cost_usd, replan_lines, replan_section
from emulator.report_table import deadline_lines
from provisioner.catalog import catalog_from_dict, load_catalog
from provisioner.plan import Goal, Plan
from provisioner.planner import RunRules, run_catalog
from provisioner.profile import load_profile
from provisioner.replan_attach import plan_with_replan
from provisioner.replan_spec import Envelope, ReplanSpec
from provisioner.space import Limits
from tests.local_catalog import local_catalog_dict, shared_core_catalog_dict
from tests.stacks.conftest import make_plan

ENVELOPE = Envelope(4, (1, 2, 4), (512, 1024, 2048))


def replanning(plan: Plan) -> Plan:
    return dataclasses.replace(plan, replan=ReplanSpec(ENVELOPE, 1.0))


def test_a_replanning_plan_has_a_slot_per_rank_up_to_the_envelope_and_runs_its_segment() -> None:
    plan = make_plan(n_workers=2)
    assert [r for _, r in worker_slots(plan)] == [0, 1]
    slots = worker_slots(replanning(plan))
    assert slots == [(None, r) for r in range(4)]
    workers = [WorkerState(rank=r, event={}) for _, r in slots]
    assert [w.rank for w in segment_workers(workers, 2)] == [0, 1]
    assert segment_workers(workers, None) == workers


def test_each_link_runs_in_the_group_of_its_memory_made_once() -> None:
    made: list[tuple[str, float]] = []

    def place(name: str, cores: float) -> cpu.Placement:
        made.append((name, cores))
        return cpu.Placement(name=name, cores=cores, procs_file=None)

    groups = Placements(place, cpu_scale=0.5)
    first = groups.get("0", 1769, 1769)
    assert groups.get("0", 1769, 1769) is first  # made once
    doubled = groups.get("0", 3538, 1769)
    assert (first.name, doubled.name) == ("worker-0", "worker-0-mb3538")
    assert made == [("worker-0", 0.5), ("worker-0-mb3538", 1.0)]  # share × scale
    assert groups.names() == ["worker-0", "worker-0-mb3538"]
    assert group_name("1", 512, 1024) == "worker-1-mb512"


def test_the_memory_ceiling_holds_every_variant_a_re_plan_may_run() -> None:
    plan = replanning(make_plan(n_workers=2))
    with pytest.raises(ValueError, match="re-planning envelope's functions hold 2048 MB"):
        check_memory_ceiling(plan, 1536)
    check_memory_ceiling(plan, 2048)


def test_the_pace_step_sees_the_training_clock_and_the_run_s_platform() -> None:
    event = {"run_started": "2026-01-01T00:00:00Z", "now": "2026-01-01T00:09:00Z",
             "bundle": {"plan": {}, "catalog": shared_core_catalog_dict(),
                        "profile": {"a": 1}}}  # fmt: skip
    clocked = on_training_clock(event, 12.5)
    now = datetime.datetime.fromisoformat(clocked["now"].replace("Z", "+00:00"))
    assert now == datetime.datetime(2026, 1, 1, 0, 0, 12, 500000, tzinfo=datetime.UTC)
    out = local_bundle(clocked, cpu_scale=0.5, limit_s=7.5, margin_s=1.875, profile={"b": 2},
                       plan={"p": 3})  # fmt: skip
    assert out["bundle"]["plan"] == {"p": 3}
    catalog = catalog_from_dict(out["bundle"]["catalog"])
    assert catalog.invocation_timeout_s == 8  # whole seconds, the margin takes the rest
    assert catalog.safety_margin_s == pytest.approx(2.375)
    assert catalog.total_vcpu == pytest.approx(3.0)  # 1.5 cores hold 3 vCPU at half a core each
    assert catalog.compute_cores == pytest.approx(4.0)
    assert out["bundle"]["profile"] == {"b": 2}
    assert event["bundle"]["catalog"]["lambda"]["total_vcpu"]["value"] == 1.5  # not mutated
    aws = json.loads((Path("catalog") / "lambda-2025.json").read_text())
    untouched = run_catalog_document(aws, cpu_scale=0.5, limit_s=60, margin_s=15)
    assert "total_vcpu" not in untouched["lambda"]


def test_a_switch_is_noted_and_a_segment_s_links_keep_its_own_cap() -> None:
    before = {"n_workers": 1, "memory_mb": 1024, "switches": 0}
    after = {"n_workers": 2, "memory_mb": 2048, "switches": 1, "invocation": 3,
             "start_iteration": 1200}  # fmt: skip
    assert pace_note(before, after) == (
        "re-plan at link 3: 1 × 1024 MB → 2 × 2048 MB from iteration 1200"
    )
    assert pace_note(before, {**before, "invocation": 3}) is None
    assert (
        segment_cap({"iterations_per_invocation": 300}, {"iterations_per_invocation": 400}) == 300
    )
    assert (
        segment_cap({"iterations_per_invocation": 500}, {"iterations_per_invocation": 400}) == 400
    )
    assert segment_cap({"iterations_per_invocation": 500}, {"iterations_per_invocation": 0}) == 500


def _record(plan: Plan, tmp_path: Path, links: list[dict[str, Any]], wall_s: float,
            options: Options | None = None) -> RunRecord:  # fmt: skip
    worker = WorkerState(rank=0, event={}, links=links)
    return RunRecord(
        plan=plan, options=options or Options(), cpu_scale=1.0, cpu_status="", worker_cores=1.0,
        s3_kind="weed", s3_url="", buckets={}, prepare_s=0.0, ps_start_s=0.0,
        train_wall_s=wall_s, finalize_s=0.0, workers=[worker], finalize_result={},
        out_dir=tmp_path, throttled_s={}, child_pids=[],
    )  # fmt: skip


def test_the_report_tells_each_switch_the_cost_and_both_accuracies(tmp_path: Path) -> None:
    plan = replanning(dataclasses.replace(make_plan(n_workers=1), catalog="lambda-2025"))
    keep = {"link": 1, "action": "keep", "elapsed_s": 4.0, "new_s": 12.0, "story": "kept"}
    switch = {"link": 2, "action": "switch", "elapsed_s": 6.0, "new_s": 14.0,
              "story": "link 2: pace 1.50× the plan's; 1 × 1024 MB → 2 × 2048 MB",
              "to": {"n_workers": 2, "memory_mb": 2048}}  # fmt: skip
    links = [{"wall_s": 10.0, "memory_mb": 1024}, {"wall_s": 10.0, "memory_mb": 2048}]
    record = _record(plan, tmp_path, links, wall_s=25.0)
    section = replan_section(record, [keep, switch])
    assert section["checks"] == 2 and [s["link"] for s in section["switches"]] == [2]
    assert section["predicted_total_s"]["replanned"] == 20.0  # the switch's predicted finish
    assert section["accuracy"]["replanned"] == pytest.approx(0.8)
    original = plan.prediction.total_s
    assert section["accuracy"]["original"] == pytest.approx(1 - abs(original - 25.0) / 25.0)
    # the links' GB-s at the memory each ran at: 2048 MB bills twice 1024 MB's
    cheap = measured_cost_usd(_record(plan, tmp_path, [links[0]] * 2, 25.0))
    dear = measured_cost_usd(_record(plan, tmp_path, [links[1]] * 2, 25.0))
    per_gb_s = load_catalog("lambda-2025").arch(plan.arch).usd_per_gb_s
    assert dear is not None and cheap is not None
    assert dear - cheap == pytest.approx(per_gb_s * 2 * 10.0)
    lines = replan_lines(section)
    assert "re-plan: link 2: pace 1.50× the plan's; 1 × 1024 MB → 2 × 2048 MB" in lines
    assert any(line.startswith("accuracy of the total: ") and "(20.0 s)" in line for line in lines)
    assert any(line.startswith("cost: $") for line in lines)
    off = _record(dataclasses.replace(plan, replan=None), tmp_path, links, 25.0,
                  Options(replan=False))  # fmt: skip
    assert replan_lines(replan_section(off, []))[0].startswith("re-planning: off (--no-replan")
    assert deadline_lines({"deadline_s": 20.0, "measured_total_s": 25.04, "met": False}) == [
        "deadline 20.0 s: measured total 25.0 s, MISSED"
    ]
    assert deadline_lines({"deadline_s": None, "measured_total_s": 25.0, "met": None}) == []


def _local_plan(tmp_path: Path) -> Plan:
    path = tmp_path / "local.json"
    path.write_text(json.dumps(local_catalog_dict()))
    base = load_catalog(path)
    catalog = run_catalog(base, RunRules(8.0, 2.0, 400))
    plan = plan_with_replan(load_profile("digits-mlp"), catalog, Goal(deadline_s=20.0),
                            Limits(), "scale", replan="on", alternatives=0,
                            frontier_points=0).plan  # fmt: skip
    return dataclasses.replace(plan, catalog=str(path))


def test_for_deadline_finds_the_scale_whose_local_prediction_is_that_share_of_the_deadline(
    tmp_path: Path,
) -> None:
    plan = _local_plan(tmp_path)
    catalog = load_catalog(plan.catalog)
    scale = scale_for_deadline(plan, 1.33, workload="digits-mlp", limit_s=8.0,
                               iterations_per_invocation=400, catalog=catalog)  # fmt: skip
    rules = RunRules(8.0, 2.0, 400)
    profile = load_profile("digits-mlp")
    total = predicted_total_s(plan, profile, catalog, rules, scale)
    # the slowest scale predicted within 1.33 × the deadline: a little slower is over it (the
    # total steps where a link fits fewer iterations, so "at most" is what can be found)
    assert total <= 1.33 * 20.0 < predicted_total_s(plan, profile, catalog, rules, 0.999 * scale)
    assert predicted_total_s(plan, profile, catalog, rules, 2 * scale) < total
    assert parse_ratio("for-deadline:1.5") == 1.5
    with pytest.raises(ValueError, match="expected for-deadline:R"):
        parse_ratio("for-deadline:fast")
    budget = dataclasses.replace(plan, goal=Goal(budget_usd=1.0))
    with pytest.raises(ValueError, match="has no deadline"):
        scale_for_deadline(budget, 1.33, workload="digits-mlp", limit_s=8.0,
                           iterations_per_invocation=400, catalog=catalog)  # fmt: skip
    with pytest.raises(ValueError, match="no scale from 0.02 to 4 makes"):  # 0.2 s: none does
        scale_for_deadline(plan, 0.01, workload="digits-mlp", limit_s=8.0,
                           iterations_per_invocation=400, catalog=catalog)  # fmt: skip
