"""Re-planning end to end: a plan that re-plans through the emulator with the real local pieces
(the SeaweedFS S3 server, the PS, the workers' processes, the synthesized re-planning loop and
the real pace function on the run's S3).

What a pace check decides must not depend on how fast this machine is, so the test fixes what
each check sees (`Options.pace_hook`): the link records it reads say the platform ran at 3× the
plan's predicted compute and exchange per iteration, with the plan's own start-up and load, and
its clock says the deadline has passed. The first check is then behind at 3.00× and switches to
the envelope's fastest configuration (faster than the plan at that pace); the re-plan's own goal
has no time left to hold, so the checks after it keep it. The rest is real: the next Maps run
the new count at the new memory, the PS averages over it, and the model trains to the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emulator.options import Options
from emulator.orchestrator import run
from emulator.pace import iso_after
from emulator.report_table import format_table
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint
from functions.runs import link_record_key
from provisioner import Goal, Limits, load_catalog, load_profile
from provisioner.plan import Plan
from provisioner.replan_attach import plan_with_replan
from provisioner.replan_step import records_wanted
from tests.emulator.plans import with_iterations

SLOWDOWN = 3.0  # the pace every check reads
ITERATIONS = 2000  # five links of 400
PER_INVOCATION = 400
LIMIT_S = 60.0  # room for the new workers' cold starts on a busy machine


def replanning_plan() -> Plan:
    """The cheapest digits-mlp plan for an hour on lambda-2025 (one worker), re-planning on
    (the default envelope: up to 2 workers, half to twice its memory), trained for ITERATIONS."""
    plan = plan_with_replan(load_profile("digits-mlp"), load_catalog("lambda-2025"),
                            Goal(deadline_s=3600.0), Limits(), "emu-replan", replan="on",
                            alternatives=0, frontier_points=0).plan  # fmt: skip
    assert plan.replan is not None and plan.pipeline is None
    return with_iterations(plan, ITERATIONS)


def fixed_pace(s3: Any, plan: Plan) -> Any:
    """The hook: each record the check reads rewritten to SLOWDOWN × the plan's predicted
    per-iteration figures (the plan's start-up, load and a small checkpoint per link), and the
    clock at the deadline plus the training so far."""
    p = plan.prediction

    def hook(event: dict[str, Any]) -> dict[str, Any]:
        bucket, job, run_id = event["artifacts_bucket"], event["job_id"], event["run_id"]
        for rank, invocations in enumerate(records_wanted(event["pace"], event["links"])):
            for invocation in invocations:
                key = link_record_key(job, run_id, rank, invocation)
                record = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                ran = int(record["iterations_run"])
                record["timings"] = {
                    **record["timings"],
                    "compute_s": ran * p.compute_per_iteration_s * SLOWDOWN,
                    "communication_s": ran * p.exchange_per_iteration_s * SLOWDOWN,
                    "startup_s": p.startup_s,
                    "load_s": p.load_s,
                    "checkpoint_s": 0.05,
                    "import_s": 0.0,
                    # the pace leaves a link's first wait out of its exchange: a real one
                    # (this machine's start-up skew) would move the pace the check reads
                    "first_wait_s": 0.0,
                }
                s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
        assert plan.goal.deadline_s is not None
        late_s = plan.goal.deadline_s + 1.0
        return {**event, "now": iso_after(event["run_started"], late_s)}

    return hook


def test_a_run_behind_its_deadline_switches_and_the_next_links_run_the_re_plan(
    tmp_path: Path, s3_endpoint: S3Endpoint
) -> None:
    plan = replanning_plan()
    assert plan.replan is not None
    s3 = s3_client_for(s3_endpoint)
    options = Options(invocation_limit_s=LIMIT_S, iterations_per_invocation=PER_INVOCATION,
                      out_dir=tmp_path / "run", quiet=True, print_report=False,
                      pace_hook=fixed_pace(s3, plan))  # fmt: skip
    record = run(plan, options, endpoint=s3_endpoint)
    report = json.loads((tmp_path / "run" / "report.json").read_text())

    states = report["state_machine"]
    assert states[states.index("PaceStart") :][:3] == ["PaceStart", "Links", "PaceCheck"]
    section = report["replan"]
    decisions = section["decisions"]
    first = decisions[0]
    assert (first["link"], first["action"], first["status"]) == (1, "switch", "behind")
    assert first["story"].startswith(f"link 1: pace {SLOWDOWN:.2f}× the plan's; ")
    assert first["from"] == {"n_workers": plan.n_workers, "memory_mb": plan.memory_mb}
    new = first["to"]
    assert new != first["from"]
    assert new["n_workers"] in plan.replan.envelope.worker_counts
    assert new["memory_mb"] in plan.replan.envelope.memory_variants_mb
    assert [d["action"] for d in decisions[1:]] == ["keep"] * (len(decisions) - 1)
    assert [s["link"] for s in section["switches"]] == [1]

    # The Map ran the re-plan: after the first link, every rank of the new count at its memory.
    by_rank = {w.rank: w.links for w in record.workers}
    assert by_rank[0][0]["memory_mb"] == plan.memory_mb
    assert sorted(by_rank) == list(range(max(plan.n_workers, new["n_workers"])))
    for rank in range(new["n_workers"]):
        later = by_rank[rank] if rank >= plan.n_workers else by_rank[rank][1:]
        assert later and {link["memory_mb"] for link in later} == {new["memory_mb"]}
        assert later[-1]["stopped"] == "done"
    assert report["iterations"]["completed"] == ITERATIONS

    assert report["loss"]["last"] < report["loss"]["first"]
    model_key = record.finalize_result.get("model_key") or f"{plan.job}/model.pt"
    assert s3.head_object(Bucket=record.buckets["artifacts"], Key=model_key)["ContentLength"] > 0
    table = format_table(report).splitlines()
    assert f"re-plan: {first['story']}" in table
    assert table[-1].startswith(f"deadline {plan.goal.deadline_s:.1f} s: measured total ")
