"""app.py end to end in-process: context → real planner → plan.json → templates.

The numbers asserted here come from the planner at test time, never typed in: the point is that
the template equals the Plan, and that a tighter deadline moves the template where the Plan moves.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from provisioner import Goal, Limits, load_catalog, load_profile, parse_duration_s
from provisioner.plan import Plan
from provisioner.replan_attach import plan_with_replan
from stacks.replan_functions import worker_concurrency
from tests.stacks.conftest import Synth, run_synth


def worker(result: Synth) -> dict[str, Any]:
    """The plan's worker function (a re-planning plan's memory variants left out)."""
    (fn,) = [r["Properties"] for lid, r in result.template("training")["Resources"].items()
             if r["Type"] == "AWS::Lambda::Function" and not lid.startswith("WorkerFunctionMb")
             and r["Properties"].get("ImageConfig", {}).get("Command") == [
                 "functions.worker.handler"]]  # fmt: skip
    return fn  # type: ignore[no-any-return]


def ps_instances(result: Synth) -> list[dict[str, Any]]:
    if not any(name.endswith("-ps") for name in result.templates):  # an S3 plan has no PS stack
        return []
    return [r["Properties"] for r in result.template("ps")["Resources"].values()
            if r["Type"] == "AWS::EC2::Instance"]  # fmt: skip


def assert_template_equals_plan(result: Synth, plan: Plan) -> None:
    fn = worker(result)
    assert fn["MemorySize"] == plan.memory_mb
    assert fn["Architectures"] == [plan.arch]
    assert fn["Timeout"] == plan.invocation_timeout_s
    assert fn["EphemeralStorage"] == {"Size": plan.ephemeral_storage_mb}
    assert fn.get("ReservedConcurrentExecutions") == (
        worker_concurrency(plan) if plan.reserve_concurrency else None
    )
    # a re-planning plan: one more worker function per other memory variant
    variants = plan.replan.envelope.memory_variants_mb if plan.replan else (plan.memory_mb,)
    memories = sorted(
        r["Properties"]["MemorySize"]
        for lid, r in result.template("training")["Resources"].items()
        if lid.startswith("WorkerFunction") and r["Type"] == "AWS::Lambda::Function"
    )
    assert memories == sorted(variants)
    instances = ps_instances(result)
    assert len(instances) == plan.ps_count
    assert {i["InstanceType"] for i in instances} == ({plan.ps_type} if plan.ps_count else set())


def planner(workload: str, deadline: str, replan: str = "on", **limits: Any) -> Plan:
    """The plan the app makes: both exchanges searched (`-c sync` defaults to auto), re-planning
    on (`-c replan` defaults to on)."""
    limits = {"sync": "auto", **limits}
    return plan_with_replan(
        load_profile(workload),
        load_catalog("lambda-2025"),
        Goal(deadline_s=parse_duration_s(deadline)),
        Limits(**limits),
        "x",
        replan=replan,
    ).plan


@pytest.mark.parametrize("sync", [None, "ps"])
def test_default_synth_prints_the_plan_writes_plan_json_and_builds_it(
    synth: Any, sync: str | None
) -> None:
    """The default (both exchanges searched: the digits demo goes through S3) and `-c sync=ps`."""
    result = synth(deadline="2h", **({"sync": sync} if sync else {}))
    assert result.code == 0, result.stderr
    document = result.plan_json()
    plan = Plan.from_dict(document["plan"])
    assert plan.job == "digits-demo" and plan.workload == "digits-mlp"
    want = planner("digits-mlp", "2h", **({"sync": sync} if sync else {}))
    assert dataclasses.replace(plan, job="x") == dataclasses.replace(want, notes=plan.notes)
    assert plan.sync == (sync or "s3")
    assert "frontier" in document and "alternatives" in document
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"plan digits-demo: {plan.n_workers} x {plan.memory_mb} MB")
    assert lines[1].startswith("goal: deadline 2h00m00s; predicted ")
    exchange = "ps instances $" if plan.sync == "ps" else "s3 exchange $"
    assert lines[2].startswith("cost: lambda compute $") and exchange in lines[2]
    assert [f"why: {n}" for n in plan.notes] == [ln for ln in lines if ln.startswith("why: ")]
    # What the deploy builds, the runaway bounds, the idle bill and the AMI: one line each.
    image = "(workers and PS)" if plan.sync == "ps" else "(workers; no PS)"
    assert lines[3] == f"image: linux/amd64 {image}"
    assert lines[4].startswith(
        "if it goes wrong: links must advance (one stall is retried); at most 5 links"
    )
    assert plan.replan is not None
    env = plan.replan.envelope
    assert lines[5].startswith(f"re-planning: up to {env.max_workers} workers (")
    assert f"worst case ${plan.replan.worst_case_usd:.4f} if every re-plan goes" in lines[5]
    assert lines[6].startswith(f"between runs: ${plan.idle_usd_per_hour:.4f}/h until")
    pinned = any(ln.startswith("PS AMI: not pinned (no AWS account at synth)") for ln in lines)
    assert pinned == (plan.sync == "ps")  # no PS, no AMI to pin
    stacks = ["digits-demo-data", "digits-demo-ps", "digits-demo-training"]
    assert sorted(result.templates) == [s for s in stacks if plan.sync == "ps" or "-ps" not in s]
    assert_template_equals_plan(result, plan)


@pytest.mark.parametrize("replan", ["off", "scale-down"])
def test_replan_off_plans_as_without_it_and_scale_down_allows_it(synth: Any, replan: str) -> None:
    result = synth(deadline="2h", replan=replan)
    assert result.code == 0, result.stderr
    plan = Plan.from_dict(result.plan_json()["plan"])
    want = planner("digits-mlp", "2h", replan=replan)
    assert dataclasses.replace(plan, job="x") == dataclasses.replace(want, notes=plan.notes)
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("re-planning: ")]
    if replan == "off":
        assert plan.replan is None and not lines
        assert "replan" not in result.plan_json()["plan"]
    else:
        assert plan.replan is not None and plan.replan.scale_down
        assert lines and lines[0].endswith(")") and "scale-down when ahead on" in lines[0]
    assert_template_equals_plan(result, plan)


def test_a_tighter_deadline_changes_the_template_as_the_planner_says(synth: Any) -> None:
    workload = "paper-cifar10-mobilenetv2"
    loose = planner(workload, "24h")
    # 60% of the loose plan's predicted time: the loose plan cannot meet it, so the planner must
    # answer with another configuration (whatever the profile's current figures are).
    tight_deadline = f"{int(loose.prediction.total_s * 0.6)}s"
    tight = planner(workload, tight_deadline)
    changed = [f for f in ("n_workers", "memory_mb", "ps_type", "ps_count", "arch")
               if getattr(loose, f) != getattr(tight, f)]  # fmt: skip
    assert changed and tight.prediction.total_s < loose.prediction.total_s
    for deadline, plan in (("24h", loose), (tight_deadline, tight)):
        result = synth(deadline=deadline, workload=workload, dataset="synthetic-cifar:2000")
        assert result.code == 0, result.stderr
        assert_template_equals_plan(result, plan)
        assert Plan.from_dict(result.plan_json()["plan"]).n_workers == plan.n_workers


def test_limits_from_context_reach_the_plan(synth: Any) -> None:
    result = synth(
        deadline="1h",
        workload="cifar10-resnet18",
        dataset="synthetic-cifar:2000",
        arch="x86_64",
        max_memory_mb="3008",
        reserve_concurrency="true",
    )
    assert result.code == 0, result.stderr
    plan = Plan.from_dict(result.plan_json()["plan"])
    assert plan.arch == "x86_64" and plan.memory_mb <= 3008 and plan.reserve_concurrency
    assert_template_equals_plan(result, plan)


def test_same_inputs_give_byte_identical_templates(tmp_path: Path) -> None:
    context = {"deadline": "45m", "workload": "paper-cifar10-mobilenetv2",
               "dataset": "synthetic-cifar:2000"}  # fmt: skip
    first = run_synth(context, str(tmp_path / "a"))
    second = run_synth(context, str(tmp_path / "b"))
    assert first.code == second.code == 0
    names = sorted(p.name for p in (tmp_path / "a").glob("*.template.json"))
    sync = Plan.from_dict(first.plan_json()["plan"]).sync
    assert len(names) == (3 if sync == "ps" else 2)  # data, training and a PS stack if any
    for name in names + ["plan.json"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_bad_context_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    result = run_synth({"deadline": "soon", "workload": "nope", "arch": "sparc"},
                       str(tmp_path))  # fmt: skip
    assert result.code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == ("error: deadline='soon' is not accepted; use a positive amount: "
                        "seconds or e.g. 90m, 2h, 1h30m")  # fmt: skip
    assert lines[1].startswith("error: workload='nope': profile 'nope' not found")
    assert lines[2] == "error: arch='sparc' is not accepted; use one of x86_64, arm64, mixed, any"
    assert len(lines) == 3 and not os.path.exists(tmp_path / "plan.json")


def test_unknown_ps_type_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_synth({"deadline": "2h", "ps_types": "z9.huge"}, str(tmp_path))
    assert result.code == 2
    assert result.stderr.startswith("error: PS type 'z9.huge' is not in catalog lambda-2025")
    assert len(result.stderr.splitlines()) == 1


def test_infeasible_goal_is_one_line_exit_3(tmp_path: Path) -> None:
    result = run_synth({"deadline": "1s"}, str(tmp_path))
    assert result.code == 3
    assert result.stderr.startswith("infeasible: ") and len(result.stderr.splitlines()) == 1
    assert "fastest achievable" in result.stderr


def test_synth_is_offline_no_lookups_and_cli_network_features_off(synth: Any) -> None:
    import json as json_module

    from tests.stacks.conftest import REPO_ROOT

    result = synth(deadline="2h")
    assert result.code == 0, result.stderr
    manifest = json_module.loads(Path(result.outdir, "manifest.json").read_text())
    assert "missing" not in manifest  # no context lookups (VPC, AMI, AZs) pending
    for name in result.templates:
        assert manifest["artifacts"][name]["environment"] == "aws://unknown-account/unknown-region"
    settings = json_module.loads(Path(REPO_ROOT, "cdk.json").read_text())
    assert settings["app"] == ".venv/bin/python app.py"
    assert settings["versionReporting"] is False and settings["notices"] is False
    assert settings["context"]["cli-telemetry"] is False
