"""The training stack of a plan that re-plans (`plan.replan`): the re-planning loop's states,
one worker function per memory variant, the pace function and its two grants; a plan without
`replan` keeps today's definition (the goldens pin it byte for byte)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from provisioner import load_catalog
from provisioner.envelope import default_envelope, envelope_worst_case_usd
from provisioner.plan import Plan
from provisioner.replan_spec import ReplanSpec
from provisioner.replan_step import initial_pace
from provisioner.runaway import LINK_RETRIES, plan_bounds
from stacks.context import DatasetSource
from stacks.events import PACE_EVENT_KEYS, replan_event_base, worker_event
from stacks.job import JobStacks, add_job_stacks
from stacks.nag import unacknowledged_findings
from stacks.replan_loop import plan_documents
from tests.stacks.conftest import make_plan, new_app
from tests.stacks.test_cfn_lint import lint_problems

DIGITS = DatasetSource(kind="builtin", spec="builtin:digits", name="digits")


def replanning(plan: Plan) -> Plan:
    """`plan` with the default envelope on the lambda-2025 catalog and its worst case."""
    catalog = load_catalog(plan.catalog)
    envelope = default_envelope(plan, catalog)
    worst = envelope_worst_case_usd(plan, catalog, envelope)
    return dataclasses.replace(plan, replan=ReplanSpec(envelope, worst, False))


PS_PLAN = replanning(make_plan(workload="digits-mlp", catalog="lambda-2025"))
S3_PLAN = replanning(make_plan(workload="digits-mlp", catalog="lambda-2025", sync="s3",
                               reducers=2, reserve_concurrency=False))  # fmt: skip


@dataclasses.dataclass
class Built:
    plan: Plan
    stacks: JobStacks
    app: Any
    training: dict[str, Any]  # the training template

    def functions(self) -> dict[str, dict[str, Any]]:
        return {lid: r["Properties"] for lid, r in self.training["Resources"].items()
                if r["Type"] == "AWS::Lambda::Function"}  # fmt: skip

    def function_id(self, prefix: str) -> str:
        (found,) = [lid for lid in self.functions() if lid.startswith(prefix)]
        return found

    def definition(self) -> dict[str, Any]:
        """The run's state machine definition, each function ARN as its logical id."""
        (machine,) = [r for lid, r in self.training["Resources"].items()
                      if r["Type"] == "AWS::StepFunctions::StateMachine"
                      and "StopPsWhenRunEnds" not in lid]  # fmt: skip
        parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
        text = "".join(p if isinstance(p, str) else _token(p) for p in parts)
        return json.loads(text)  # type: ignore[no-any-return]


def _token(part: dict[str, Any]) -> str:
    if "Fn::GetAtt" in part:
        return str(part["Fn::GetAtt"][0])
    return "TOKEN"


def build(plan: Plan, outdir: str | None = None) -> Built:
    app = new_app(**({"outdir": outdir} if outdir else {}))
    stacks = add_job_stacks(app, plan=plan, dataset=DIGITS, nag=False)
    return Built(plan, stacks, app, Template.from_stack(stacks.training).to_json())


@pytest.fixture(scope="module")
def ps_built() -> Built:
    return build(PS_PLAN)


@pytest.fixture(scope="module")
def s3_built() -> Built:
    return build(S3_PLAN)


def test_the_test_plans_re_plan_over_three_variants_and_up_to_twice_the_workers() -> None:
    for plan in (PS_PLAN, S3_PLAN):
        assert plan.replan is not None
        assert plan.replan.envelope.memory_variants_mb == (1024, 2048, 4096)
        assert plan.replan.envelope.max_workers == 2 * plan.n_workers


@pytest.mark.parametrize("which", ["ps", "s3"])
def test_the_run_goes_through_the_loop_to_finalize(which: str, ps_built: Built,
                                                   s3_built: Built) -> None:  # fmt: skip
    built = ps_built if which == "ps" else s3_built
    states = built.definition()["States"]
    before = "WaitForPs" if which == "ps" else "PrepareDataset"
    assert states[before]["Next"] == "PaceStart"
    assert states["PaceStart"]["Next"] == "Links"
    assert states["Links"]["Next"] == "PaceCheck"
    assert states["PaceCheck"]["Next"] == "PaceVerdict"
    assert "Workers" not in states and "WorkerRanks" not in states
    after = "StopPs" if which == "ps" else "TrainingFinished"
    assert states["Finalize"]["Next"] == after
    failed = "StopPsAfterFailure" if which == "ps" else "TrainingFailed"
    for name in ("Links", "PaceCheck"):
        assert [c["Next"] for c in states[name]["Catch"]] == [failed]


def test_pace_start_sets_the_plans_own_pace(ps_built: Built) -> None:
    start = ps_built.definition()["States"]["PaceStart"]
    assert start["ResultPath"] == "$.pace"
    assert start["Result"] == initial_pace(PS_PLAN)
    assert start["Result"]["segment"]["plan"] is None  # a null survives synth


def test_the_links_map_takes_its_items_and_event_from_the_pace(ps_built: Built) -> None:
    links = ps_built.definition()["States"]["Links"]
    assert links["Type"] == "Map" and links["ItemProcessor"]["ProcessorConfig"]["Mode"] == (
        "DISTRIBUTED"
    )
    assert links["ItemsPath"] == "$.pace.ranks"
    assert links["MaxConcurrency"] == PS_PLAN.replan.envelope.max_workers  # type: ignore[union-attr]
    assert links["ResultPath"] == "$.links"
    event = links["ItemSelector"]["event"]
    for key in PACE_EVENT_KEYS:
        assert event[f"{key}.$"] == f"$.pace.{key}"
        assert key not in event
    assert event["rank.$"] == "$$.Map.Item.Value"
    assert event["run_id.$"] == "$.run.run_id" and event["run_started.$"] == "$.run.run_started"
    base = replan_event_base(
        worker_event(
            PS_PLAN,
            rank=0,
            dataset_bucket="d",
            artifacts_bucket="a",
            ps_endpoints=[],
            secret_ref="",
        )
    )
    fixed = {k for k in event if not k.endswith(".$")}
    assert fixed == set(base)
    assert event["iterations"] == PS_PLAN.training.iterations


def test_each_memory_variant_has_its_function_and_its_invoke(ps_built: Built) -> None:
    processor = ps_built.definition()["States"]["Links"]["ItemProcessor"]
    states = processor["States"]
    choice = states[processor["StartAt"]]
    assert choice["Type"] == "Choice"
    variants = PS_PLAN.replan.envelope.memory_variants_mb  # type: ignore[union-attr]
    assert [(c["Variable"], c["NumericEquals"], c["Next"]) for c in choice["Choices"]] == [
        ("$.event.memory_mb", mb, f"RunWorkerMb{mb}") for mb in variants
    ]
    assert states[choice["Default"]]["Type"] == "Fail"
    functions = ps_built.functions()
    for mb in variants:
        run = states[f"RunWorkerMb{mb}"]
        assert run["End"] is True
        assert run["Parameters"]["Payload.$"] == "$.event"
        assert run["ResultSelector"] == {
            "done.$": "$.Payload.done",
            "start_iteration.$": "$.Payload.next_event.start_iteration",
            "invocation.$": "$.Payload.next_event.invocation",
        }
        (retry,) = [r for r in run["Retry"] if r["ErrorEquals"] == ["States.TaskFailed"]]
        assert retry["MaxAttempts"] == LINK_RETRIES
        name = run["Parameters"]["FunctionName"]
        assert functions[name]["MemorySize"] == mb
        expected = "WorkerFunction" if mb == PS_PLAN.memory_mb else f"WorkerFunctionMb{mb}"
        assert name.startswith(expected)


def test_variants_are_the_worker_at_another_memory(ps_built: Built) -> None:
    functions = ps_built.functions()
    worker = functions[ps_built.function_id("WorkerFunctionAF")]  # the plan's memory's
    variants = [p for lid, p in functions.items() if lid.startswith("WorkerFunctionMb")]
    assert len(variants) == 2
    same = ("Role", "ImageConfig", "Code", "Timeout", "EphemeralStorage", "VpcConfig",
            "Architectures", "ReservedConcurrentExecutions")  # fmt: skip
    for variant in variants:
        assert {k: variant.get(k) for k in same} == {k: worker.get(k) for k in same}
    # a switch may put every worker of the ceiling on one variant
    assert worker["ReservedConcurrentExecutions"] == PS_PLAN.replan.envelope.max_workers  # type: ignore[union-attr]
    assert "VpcConfig" in worker


def test_the_pace_check_sends_the_bundle_and_sets_the_pace(ps_built: Built) -> None:
    states = ps_built.definition()["States"]
    check = states["PaceCheck"]
    assert check["Resource"].startswith("PaceFunction")  # payload_response_only: the ARN itself
    assert check["ResultPath"] == "$.pace"
    params = check["Parameters"]
    assert {k: params[k] for k in ("pace.$", "links.$", "run_id.$", "run_started.$", "now.$")} == {
        "pace.$": "$.pace", "links.$": "$.links", "run_id.$": "$.run.run_id",
        "run_started.$": "$.run.run_started", "now.$": "$$.State.EnteredTime",
    }  # fmt: skip
    assert params["job_id"] == PS_PLAN.job
    assert params["artifacts_bucket"].startswith(f"{PS_PLAN.job}-artifacts-")
    profile, catalog = plan_documents(PS_PLAN)
    assert params["bundle"] == {"plan": json.loads(PS_PLAN.to_json()), "profile": profile,
                                "catalog": catalog}  # fmt: skip
    assert Plan.from_dict(params["bundle"]["plan"]) == PS_PLAN


def test_the_verdict_finishes_fails_on_the_guards_or_runs_the_next_links(ps_built: Built) -> None:
    states = ps_built.definition()["States"]
    verdict = states["PaceVerdict"]
    max_links, _ = plan_bounds(PS_PLAN)
    rules = [(c["Variable"], {k: v for k, v in c.items() if k not in ("Variable", "Next")},
              c["Next"]) for c in verdict["Choices"]]  # fmt: skip
    assert rules == [
        ("$.pace.done", {"BooleanEquals": True}, "Finalize"),
        ("$.pace.invocation", {"NumericGreaterThanEquals": max_links}, "TooManyLinks"),
        ("$.pace.stalls", {"NumericGreaterThanEquals": 2}, "LinkMadeNoProgress"),
    ]
    assert verdict["Default"] == "Links"
    # each guard leaves the state as a Catch would and takes the run's failure path: a PS
    # plan's instances are stopped by the run, not by the rule on a failed execution
    for name in ("TooManyLinks", "LinkMadeNoProgress"):
        assert states[name]["Type"] == "Pass" and states[name]["ResultPath"] == "$"
        assert states[name]["Result"]["Error"] == name
        assert states[name]["Next"] == "StopPsAfterFailure"


def test_the_pace_function_is_sized_and_granted_exactly_its_two_prefixes(ps_built: Built) -> None:
    lid = ps_built.function_id("PaceFunction")
    pace = ps_built.functions()[lid]
    assert pace["MemorySize"] == 1024 and pace["Timeout"] == 60
    assert pace["ImageConfig"] == {"Command": ["functions.pace.handler"]}
    assert "VpcConfig" not in pace and "ReservedConcurrentExecutions" not in pace
    role = pace["Role"]["Fn::GetAtt"][0]
    policies = [r["Properties"] for r in ps_built.training["Resources"].values()
                if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": role} in r["Properties"]["Roles"]]  # fmt: skip
    (policy,) = policies
    statements = [(s["Action"], "".join(p if isinstance(p, str) else "" for p in
                                        s["Resource"]["Fn::Join"][1]))
                  for s in policy["PolicyDocument"]["Statement"]]  # fmt: skip
    assert statements == [
        ("s3:GetObject", f"arn::s3:::{PS_PLAN.job}-artifacts-/{PS_PLAN.job}/runs/*/links/*"),
        ("s3:PutObject", f"arn::s3:::{PS_PLAN.job}-artifacts-/{PS_PLAN.job}/runs/*/replan/*"),
    ]


def test_the_state_machine_may_invoke_exactly_the_runs_functions(ps_built: Built) -> None:
    resources = ps_built.training["Resources"]
    (policy,) = [r["Properties"] for lid, r in resources.items()
                 if lid.startswith("OrchestrationStateMachineRoleDefaultPolicy")]  # fmt: skip
    (invoke,) = [s for s in policy["PolicyDocument"]["Statement"]
                 if s["Action"] == "lambda:InvokeFunction"]  # fmt: skip
    named = {r["Fn::GetAtt"][0] for r in invoke["Resource"] if "Fn::GetAtt" in r}
    prefixes = ("WorkerFunction", "PaceFunction", "PrepareFunction", "FinalizeFunction",
                "RunNetworkFunction", "PsWaitFunction")  # fmt: skip
    expected = {lid for lid in ps_built.functions() if lid.startswith(prefixes)}
    assert named == expected and len(expected) == 3 + 5


def test_the_prepare_step_writes_every_envelope_layout_and_the_workers_read_them(
    ps_built: Built,
) -> None:
    states = ps_built.definition()["States"]
    layouts = states["PrepareDataset"]["Parameters"]["Payload"]["layouts"]
    counts = PS_PLAN.replan.envelope.worker_counts  # type: ignore[union-attr]
    assert layouts == [{"n_shards": n, "dataset_prefix": f"demo/shards-n{n}"} for n in counts]
    text = json.dumps(ps_built.training)
    for n in counts:
        # prepare writes, the worker role reads: one statement each per layout
        assert text.count(f"/demo/shards-n{n}/*") >= 2


def test_the_ps_accepts_the_envelopes_ceiling_of_workers(ps_built: Built) -> None:
    assert ps_built.stacks.parameter_servers is not None
    ps = json.dumps(Template.from_stack(ps_built.stacks.parameter_servers).to_json())
    assert "--workers 8 " in ps and "--workers 4 " not in ps


def test_a_plan_that_runs_as_it_is_has_no_loop_and_no_pace_function() -> None:
    built = build(make_plan())
    states = built.definition()["States"]
    assert "Workers" in states and "PaceStart" not in states
    assert not [
        lid for lid in built.functions() if lid.startswith(("PaceFunction", "WorkerFunctionMb"))
    ]


@pytest.mark.parametrize("which", ["ps", "s3"])
def test_nag_and_cfn_lint_clean(which: str, tmp_path: Path) -> None:
    built = build(PS_PLAN if which == "ps" else S3_PLAN, outdir=str(tmp_path))
    assert unacknowledged_findings(built.app) == []
    built.app.synth()
    templates = sorted(tmp_path.glob("*.template.json"))
    assert len(templates) == (3 if which == "ps" else 2)
    assert lint_problems(templates) == []


def test_the_emulator_resolves_every_function_of_the_loop_to_its_role() -> None:
    from emulator.definition import synthesized_definition

    states = synthesized_definition(S3_PLAN, "builtin:digits")["States"]
    assert states["PaceCheck"]["Resource"] == "lambda:pace"
    items = states["Links"]["ItemProcessor"]["States"]
    variants = S3_PLAN.replan.envelope.memory_variants_mb  # type: ignore[union-attr]
    assert {items[f"RunWorkerMb{mb}"]["Parameters"]["FunctionName"] for mb in variants} == {
        "lambda:worker"
    }


class LoopStubs:
    """The loop's tasks as the ASL interpreter runs them: a worker link advances its event by
    its `iterations_per_invocation`; the pace check switches once to the envelope's ceiling at
    the largest variant (`switch`), or stalls (`stall`), and is done when every link is."""

    def __init__(self, plan: Plan, *, stall: bool = False) -> None:
        self.plan, self.stall = plan, stall
        self.links: list[dict[str, Any]] = []  # every worker event
        self.checks: list[dict[str, Any]] = []  # every pace event

    def invoke(self, params: dict[str, Any]) -> Any:
        role, event = params["FunctionName"], params["Payload"]
        if role != "lambda:worker":
            return {"Payload": {}}  # prepare, finalize
        self.links.append(event)
        start = min(event["start_iteration"] + event["iterations_per_invocation"],
                    event["iterations"])  # fmt: skip
        next_event = {**event, "start_iteration": 0 if self.stall else start,
                      "invocation": event["invocation"] + 1}  # fmt: skip
        done = not self.stall and start >= event["iterations"]
        return {"Payload": {"done": done, "next_event": next_event}}

    def pace(self, event: dict[str, Any]) -> dict[str, Any]:
        self.checks.append(event)
        pace, links = event["pace"], event["links"]
        start = min(link["start_iteration"] for link in links)
        new = {**pace, "done": all(link["done"] for link in links), "start_iteration": start,
               "invocation": max(link["invocation"] for link in links),
               "stalls": pace["stalls"] + 1 if start <= pace["start_iteration"] else 0}  # fmt: skip
        envelope = self.plan.replan.envelope  # type: ignore[union-attr]
        if not pace["switches"]:
            n = envelope.max_workers
            new.update(n_workers=n, memory_mb=max(envelope.memory_variants_mb),
                       local_batch=self.plan.training.global_batch // n, ranks=list(range(n)),
                       iterations_per_invocation=100, dataset_prefix=f"demo/shards-n{n}",
                       switches=1)  # fmt: skip
        return new


# Three links of 100 iterations (of 281) at the plan's configuration.
CHAINED = dataclasses.replace(S3_PLAN, iterations_per_invocation=100, invocations_per_worker=3)


@pytest.fixture(scope="module")
def s3_definition() -> dict[str, Any]:
    from emulator.definition import synthesized_definition

    return synthesized_definition(CHAINED, "builtin:digits")


def _run(definition: dict[str, Any], stubs: LoopStubs) -> Any:
    from emulator.asl import Interpreter

    tasks = {"arn:aws:states:::lambda:invoke": stubs.invoke, "lambda:pace": stubs.pace}
    return Interpreter(definition, tasks)


def test_the_loop_runs_links_until_the_pace_says_done_switching_as_it_says(
    s3_definition: dict[str, Any],
) -> None:
    stubs = LoopStubs(CHAINED)
    interpreter = _run(s3_definition, stubs)
    interpreter.run({}, name="run-1", start_time="2026-01-01T00:00:00.000Z")
    # the first link: the plan's 4 workers at its memory; then 8 at 4,096 MB until done
    first, rest = stubs.links[:4], stubs.links[4:]
    assert sorted(e["rank"] for e in first) == [0, 1, 2, 3]
    assert {(e["n_workers"], e["memory_mb"], e["dataset_prefix"]) for e in first} == {
        (4, 2048, "demo/shards-n4")
    }
    assert {(e["n_workers"], e["memory_mb"], e["local_batch"]) for e in rest} == {(8, 4096, 16)}
    # after the switch: 8 workers from iteration 100, 100 at a time, to 281
    assert sorted({e["start_iteration"] for e in rest}) == [100, 200]
    assert len(rest) == 2 * 8 and sorted(e["rank"] for e in rest[:8]) == list(range(8))
    assert "RunWorkerMb4096" in interpreter.trace.states
    assert interpreter.trace.states[-2:] == ["Finalize", "TrainingFinished"]
    check = stubs.checks[0]
    assert check["now"].startswith("2026-01-01T00:00:") and check["run_id"] == "run-1"
    assert len(check["links"]) == 4 and check["bundle"]["plan"]["job"] == CHAINED.job
    assert len(stubs.checks) == 3 and [len(c["links"]) for c in stubs.checks] == [4, 8, 8]


def test_a_second_stall_fails_the_run(s3_definition: dict[str, Any]) -> None:
    from emulator.asl import StatesError

    stubs = LoopStubs(CHAINED, stall=True)
    interpreter = _run(s3_definition, stubs)
    with pytest.raises(StatesError):
        interpreter.run({})
    assert len(stubs.checks) == 2  # stalled once, the same event again, stalled twice
    assert interpreter.trace.states[-2:] == ["LinkMadeNoProgress", "TrainingFailed"]
