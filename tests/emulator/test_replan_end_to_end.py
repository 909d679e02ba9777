"""Re-planning end to end: a plan that re-plans through the emulator with the real local pieces
(the SeaweedFS S3 server, the PS, the workers' processes, the synthesized re-planning loop and
the real pace function on the run's S3).

The pace check must not depend on how fast this machine is, so the test drives its clock
(`Options.pace_clock`): the first check sees the run at 95% of its deadline, behind whatever the
links measured, so it re-plans to the envelope's fastest configuration (the plan's own is the
cheapest, hence not the fastest); every later check sees the deadline passed, where the
re-plan's own goal has nothing left to hold, so it keeps the switched configuration. Nothing
asserts met or missed on the wall clock.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from emulator.options import Options
from emulator.orchestrator import run
from emulator.report_table import format_table
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint
from provisioner.catalog import load_catalog
from provisioner.plan import Goal, Plan
from provisioner.planner import RunRules, run_catalog
from provisioner.profile import load_profile
from provisioner.replan_attach import plan_with_replan
from provisioner.space import Limits
from tests.emulator.plans import with_iterations
from tests.local_catalog import shared_core_catalog_dict

DEADLINE_S = 20.0
LIMIT_S, PER_INVOCATION = 8.0, 400  # the demo's run rules
ITERATIONS = 3200  # eight links of 400 at the plan's configuration
CPU_SCALE = 0.5  # half a core per vCPU: compute outweighs a switch's fresh start-up


def replanning_plan(tmp_path: Path) -> Plan:
    """The demo's plan (digits-mlp on a 2-core machine's catalog, 20 s, 8 s links of at most
    400 iterations) with its re-planning envelope, trained for ITERATIONS."""
    path = tmp_path / "catalog.json"  # the stand-in of this machine's catalog/local.json
    path.write_text(json.dumps({**shared_core_catalog_dict(), "name": "local"}))
    catalog = run_catalog(load_catalog(path), RunRules(LIMIT_S, 2.0, PER_INVOCATION))
    plan = plan_with_replan(load_profile("digits-mlp"), catalog, Goal(deadline_s=DEADLINE_S),
                            Limits(), "emu-replan", replan="on", alternatives=0,
                            frontier_points=0).plan  # fmt: skip
    assert plan.replan is not None and plan.pipeline is None
    # the synth reads the catalog the plan names (for the pace check's bundle): this one
    return with_iterations(dataclasses.replace(plan, catalog=str(path)), ITERATIONS)


def near_the_deadline(link: int, training_s: float) -> float:
    """The elapsed time every pace check sees: the first behind, the later past the deadline."""
    return 0.95 * DEADLINE_S + training_s


def test_a_run_behind_its_deadline_switches_and_the_next_links_run_the_re_plan(
    tmp_path: Path, s3_endpoint: S3Endpoint
) -> None:
    plan = replanning_plan(tmp_path)
    assert plan.replan is not None
    options = Options(invocation_limit_s=LIMIT_S, iterations_per_invocation=PER_INVOCATION,
                      cpu_scale=CPU_SCALE, out_dir=tmp_path / "run", quiet=True,
                      print_report=False, workload="digits-mlp",
                      pace_clock=near_the_deadline)  # fmt: skip
    record = run(plan, options, endpoint=s3_endpoint)
    report = json.loads((tmp_path / "run" / "report.json").read_text())

    states = report["state_machine"]
    assert states[states.index("PaceStart") :][:3] == ["PaceStart", "Links", "PaceCheck"]
    section = report["replan"]
    decisions = section["decisions"]
    first = decisions[0]
    assert (first["link"], first["action"], first["status"]) == (1, "switch", "behind")
    assert first["from"] == {"n_workers": plan.n_workers, "memory_mb": plan.memory_mb}
    new = first["to"]
    assert new != first["from"]
    assert new["n_workers"] in plan.replan.envelope.worker_counts
    assert new["memory_mb"] in plan.replan.envelope.memory_variants_mb
    assert [d["action"] for d in decisions[1:]] == ["keep"] * (len(decisions) - 1)
    assert [s["link"] for s in section["switches"]] == [1]
    assert section["switches"][0]["story"] == first["story"]

    # The Map ran the re-plan: after the first link, every rank of the new count at its memory.
    by_rank = {w.rank: w.links for w in record.workers}
    assert by_rank[0][0]["memory_mb"] == plan.memory_mb
    assert sorted(by_rank) == list(range(max(plan.n_workers, new["n_workers"])))
    for rank in range(new["n_workers"]):
        later = by_rank[rank] if rank >= plan.n_workers else by_rank[rank][1:]
        assert later and {link["memory_mb"] for link in later} == {new["memory_mb"]}
    assert report["iterations"]["completed"] == ITERATIONS
    assert all(links[-1]["stopped"] == "done" for links in report["invocations"]["links"])

    assert report["loss"]["last"] < report["loss"]["first"]
    model_key = record.finalize_result.get("model_key") or f"{plan.job}/model.pt"
    s3 = s3_client_for(s3_endpoint)
    assert s3.head_object(Bucket=record.buckets["artifacts"], Key=model_key)["ContentLength"] > 0
    table = format_table(report).splitlines()
    assert f"re-plan: {first['story']}" in table
    assert table[-1].startswith(f"deadline {DEADLINE_S:.1f} s: measured total ")
