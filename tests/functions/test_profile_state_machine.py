"""The synthesized profiling state machine, run offline on the real handlers, then fetched.

As tests/functions/test_state_machine.py does for training: the profile stack's definition is
taken from the template, its intrinsics resolved to local names, and interpreted
(tests/functions/asl.py) with its Lambda tasks dispatched to the real prepare, profiling and
finalize handlers against moto S3. The profile it writes is brought into a profiles folder by
`tools.fetch_profile` and must load, and plan, with the planner's own loader.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.asl import Interpreter, StatesError, resolve_cfn
from functions import datasets, profile_task
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from stacks.profile_run import ProfileRun, profile_key
from tests.stacks.test_profile_stack import build_profile, make_run
from tools import fetch_profile

ACCOUNT = "123456789012"
INVOKE = "arn:aws:states:::lambda:invoke"


def _resolve(intrinsic: dict[str, Any]) -> str:
    """CloudFormation values as the deployed account would give them."""
    pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": "us-east-1"}
    if intrinsic.get("Ref") in pseudo:
        return pseudo[intrinsic["Ref"]]
    logical_id, attribute = intrinsic["Fn::GetAtt"]
    assert attribute == "Arn", intrinsic
    return f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{logical_id}"


def _definition(run: ProfileRun) -> dict[str, Any]:
    _, template = build_profile(run)
    (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
    definition: dict[str, Any] = json.loads(
        resolve_cfn(machine["Properties"]["DefinitionString"], _resolve))
    return definition


class LocalLambda:
    """Lambda invokes run the handlers here; `fail_mb` sizes die as an out-of-memory would."""

    def __init__(self, fail_mb: tuple[int, ...] = ()) -> None:
        self.fail_mb = fail_mb
        self.profiled: list[int] = []
        # Each Lambda function has a /tmp of its own; here the branches' threads share one shard
        # cache file (named by pid), so the profilers take turns, as their own sandboxes need not.
        self.one_sandbox = threading.Lock()

    def invoke(self, params: dict[str, Any]) -> dict[str, Any]:
        function = params["FunctionName"].rsplit(":", 1)[-1]
        event = dict(params["Payload"])
        if function.startswith("PrepareFunction"):
            result = datasets.prepare_handler(event)
        elif function.startswith("FinalizeFunction"):
            result = profile_task.finalize_handler(event)
        elif function.startswith(f"Profile{event.get('memory_mb')}Function"):
            self.profiled.append(event["memory_mb"])
            if event["memory_mb"] in self.fail_mb:
                raise StatesError("Runtime.OutOfMemory", "RequestId: 1 Error: Runtime exited")
            with self.one_sandbox:
                result = profile_task.handler(event)
        else:
            raise AssertionError(f"unexpected function {function} for {event}")
        return {"StatusCode": 200, "Payload": result}


@pytest.fixture()
def buckets(s3: Any, shard_cache: Path) -> Iterator[tuple[str, str]]:
    """The job's dataset and artifacts buckets, named as stacks.grants.job_bucket names them;
    emptied and removed afterwards (the S3 server lives for the session)."""
    dataset, artifacts = (f"prof-{kind}-{ACCOUNT}" for kind in ("dataset", "artifacts"))
    for name in (dataset, artifacts):
        s3.create_bucket(Bucket=name)
    yield dataset, artifacts
    for name in (dataset, artifacts):
        for item in s3.list_objects_v2(Bucket=name).get("Contents", []):
            s3.delete_object(Bucket=name, Key=item["Key"])
        s3.delete_bucket(Bucket=name)


def test_the_deployed_profiling_run_writes_a_profile_that_fetches_and_plans(
    s3: Any, buckets: tuple[str, str], tmp_path: Path
) -> None:
    run = make_run()
    aws = LocalLambda()
    machine = Interpreter(_definition(run), {INVOKE: aws.invoke})
    output = machine.run({})
    assert machine.trace.end == "ProfileWritten"
    assert sorted(aws.profiled) == [1024, 1769]
    uri = f"s3://{buckets[1]}/{profile_key(run)}"
    assert output["profile_uri"] == uri
    document = json.loads(s3.get_object(Bucket=buckets[1], Key=profile_key(run))["Body"].read())
    arch = profile_task.lambda_arch()
    points = document["training_rate"][arch]["points"]
    assert [p["memory_mb"] for p in points] == [1024, 1769]
    assert all(p["samples_per_s"] > 0 for p in points)
    assert document["name"] == "digits-mlp-aws"
    for figure in ("training_rate", "startup_s", "min_memory_mb"):
        assert document["sources"][figure]["tag"] == "measured"
        assert document["sources"][figure]["method"].startswith("measured in AWS Lambda")
    # Every figure the run does not measure is the committed profile's, source included.
    base = run.base_profile
    for key in ("model_bytes", "dataset_bytes", "epochs", "ps_aggregation_mb_s_per_core"):
        assert document[key] == base[key]
    assert document["sources"]["model_bytes"] == base["sources"]["model_bytes"]

    assert fetch_profile.main([uri, "--output-dir", str(tmp_path)]) == 0
    fetched = load_profile(tmp_path / "digits-mlp-aws.json")
    curve = fetched.rate(arch)
    assert curve is not None and curve.memory_points_mb == (1024.0, 1769.0)
    assert not fetched.provisional  # its one estimate (min_memory_mb) is now measured
    plan = plan_job(fetched, load_catalog("lambda-2025"), Goal(deadline_s=3600), Limits(), "x")
    assert plan.plan.workload == "digits-mlp-aws"


def test_a_size_that_fails_is_recorded_and_the_others_still_make_the_profile(
    s3: Any, buckets: tuple[str, str]
) -> None:
    run = make_run()
    aws = LocalLambda(fail_mb=(1024,))
    machine = Interpreter(_definition(run), {INVOKE: aws.invoke})
    machine.run({})
    assert machine.trace.end == "ProfileWritten" and "Failed1024" in machine.trace.states
    document = json.loads(s3.get_object(Bucket=buckets[1], Key=profile_key(run))["Body"].read())
    points = document["training_rate"][profile_task.lambda_arch()]["points"]
    assert [p["memory_mb"] for p in points] == [1769]
    # 1,024 MB ran out of memory, so the smallest size proven to train is the minimum.
    assert document["min_memory_mb"] >= 1769
    method = document["sources"]["min_memory_mb"]["method"]
    assert "failed at 1024 MB: Runtime.OutOfMemory" in method


def test_a_run_where_every_size_fails_writes_nothing_and_fails(
    s3: Any, buckets: tuple[str, str]
) -> None:
    run = make_run()
    machine = Interpreter(_definition(run), {INVOKE: LocalLambda(fail_mb=(1024, 1769)).invoke})
    with pytest.raises(StatesError, match="no memory size was profiled"):
        machine.run({})
    assert s3.list_objects_v2(Bucket=buckets[1]).get("KeyCount") == 0


@pytest.mark.parametrize(
    ("uri", "body", "line"),
    [
        ("prof/profiles/x.json", None,
         "error: bad URI 'prof/profiles/x.json': expected s3://bucket/key.json (the profile "
         "stack's Profile output)"),
        ("s3://{bucket}/prof/profiles/absent.json", None,
         "error: cannot read s3://{bucket}/prof/profiles/absent.json: NoSuchKey"),
        ("s3://{bucket}/p.json", b"{not json", "error: s3://{bucket}/p.json is not JSON: "),
        ("s3://{bucket}/p.json", b'{"schema_version": 1, "name": "x"}',
         "error: s3://{bucket}/p.json is not a valid profile: profile field 'training_rate': "
         "expected an object keyed by x86_64/arm64"),
    ],
)  # fmt: skip
def test_fetch_refuses_bad_input_in_one_line_and_writes_nothing(
    s3: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], uri: str,
    body: bytes | None, line: str,
) -> None:  # fmt: skip
    if body is not None:
        s3.put_object(Bucket=bucket, Key="p.json", Body=body)
    (tmp_path / "keep.json").write_text("{}")
    assert fetch_profile.main([uri.format(bucket=bucket), "--output-dir", str(tmp_path)]) == 2
    (printed,) = capsys.readouterr().err.splitlines()
    assert printed.startswith(line.format(bucket=bucket))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_fetch_refuses_an_output_dir_that_is_not_one(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing"
    assert fetch_profile.main(["s3://some-bucket/p.json", "--output-dir", str(target)]) == 2
    assert capsys.readouterr().err == f"error: bad --output-dir {str(target)!r}: not a directory\n"
