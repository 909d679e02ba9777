"""Profile stack (`-c mode=profile`): the worker image at several memory sizes, no PS, no VPC.

One function per memory size runs `functions.profile_task.handler`; a state machine prepares a
shard, profiles every size and writes `<job>/profiles/<workload>-aws.json` to the artifacts
bucket (stacks/profile_orchestration.py); deploying starts it, as the training stack starts a
run. The functions only talk to S3, so they stay out of any VPC.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from provisioner.runaway import HELPER_TIMEOUT_S
from stacks.data import DataLayout, grant_prepare
from stacks.functions import ImageFunction
from stacks.grants import grant_prefix, put_exact_objects
from stacks.image import ImageSpec
from stacks.nag import acknowledge, acknowledge_invoking_machine, executions_nag_arn
from stacks.orchestration import StartOnDeploy
from stacks.profile_orchestration import ProfileOrchestration
from stacks.profile_run import (
    PROFILE_EPHEMERAL_STORAGE_MB,
    ProfileRun,
    finalize_event,
    prepare_event,
    profile_event,
    profile_key,
    profile_shards_prefix,
    run_digest,
)
from stacks.training_stack import HELPER_MEMORY_MB

PROFILE_TIMEOUT_S = 900  # Lambda's maximum: a large model at the smallest size is slow
FINALIZE_MEMORY_MB = 1024  # it only reads JSON and writes one object


class ProfileStack(Stack):
    """Attributes: `profilers` (memory_mb → ImageFunction), `prepare`, `finalize`,
    `orchestration`, `start`."""

    def __init__(self, scope: Construct, construct_id: str, *, run: ProfileRun,
                 layout: DataLayout, description: str) -> None:  # fmt: skip
        super().__init__(scope, construct_id, description=description)
        image = ImageSpec(run.arch, run.model)
        self.profilers = {
            mb: ImageFunction(
                self, f"Profile{mb}", image=image, handler="functions.profile_task.handler",
                description=f"Profiles {run.name} at {mb} MB (job {run.job})", memory_mb=mb,
                timeout_s=PROFILE_TIMEOUT_S, ephemeral_storage_mb=PROFILE_EPHEMERAL_STORAGE_MB,
            )
            for mb in run.memory_mb
        }  # fmt: skip
        self.prepare = ImageFunction(
            self, "Prepare", image=image, handler="functions.datasets.prepare_handler",
            description=f"Profile shards of job {run.job}", memory_mb=HELPER_MEMORY_MB,
            timeout_s=HELPER_TIMEOUT_S, ephemeral_storage_mb=PROFILE_EPHEMERAL_STORAGE_MB,
        )  # fmt: skip
        self.finalize = ImageFunction(
            self, "Finalize", image=image, handler="functions.profile_task.finalize_handler",
            description=f"Writes the measured profile of {run.name} (job {run.job})",
            memory_mb=FINALIZE_MEMORY_MB, timeout_s=HELPER_TIMEOUT_S,
            ephemeral_storage_mb=PROFILE_EPHEMERAL_STORAGE_MB,
        )  # fmt: skip
        self._grant(run, layout)
        dataset = layout.dataset.name
        self.orchestration = ProfileOrchestration(
            self, "Orchestration",
            profilers={mb: fn.function for mb, fn in self.profilers.items()},
            profile_events={mb: profile_event(run, memory_mb=mb, dataset_bucket=dataset)
                            for mb in run.memory_mb},
            profile_timeout_s=PROFILE_TIMEOUT_S,
            prepare=self.prepare.function,
            prepare_event=prepare_event(run, source=layout.source, dataset_bucket=dataset),
            finalize=self.finalize.function,
            finalize_event=finalize_event(run, artifacts_bucket=layout.artifacts.name),
            helper_timeout_s=HELPER_TIMEOUT_S,
        )  # fmt: skip
        machine = self.orchestration.state_machine
        self.start = StartOnDeploy(self, "StartProfiling", state_machine=machine,
                                   plan_digest=run_digest(run))  # fmt: skip
        self._acknowledge()
        for name, value, description in (
            ("StateMachineArn", machine.state_machine_arn, "The profiling run's state machine"),
            ("ExecutionArn", self.start.execution_arn, "The profiling run started by this deploy"),
            ("Profile", f"s3://{layout.artifacts.name}/{profile_key(run)}",
             "The measured profile; bring it into profiles/ with tools.fetch_profile"),
        ):  # fmt: skip
            CfnOutput(self, name, value=value, description=description)

    def _grant(self, run: ProfileRun, layout: DataLayout) -> None:
        """Profilers read the profile shards; prepare writes them (and reads a user's source);
        finalize writes exactly the profile and reads nothing."""
        shards = profile_shards_prefix(run)
        for fn in self.profilers.values():
            grant_prefix(
                fn.function,
                fn,
                layout.dataset,
                shards,
                write=False,
                reason="Reads the profile shards; keys are listed in their manifest.",
            )
        grant_prepare(
            self.prepare.function,
            self.prepare,
            layout,
            shards,
            reason="Writes the profile shards and manifest under one prefix.",
        )
        self.finalize.function.add_to_role_policy(
            put_exact_objects(layout.artifacts, [profile_key(run)])
        )

    def _acknowledge(self) -> None:
        """The state machine's and the start resource's findings, each with its reason."""
        machine = self.orchestration.state_machine
        invoked = (*self.profilers.values(), self.prepare, self.finalize)
        acknowledge_invoking_machine(machine, (f.function for f in invoked))
        acknowledge(
            self.start,
            rule=f"AwsSolutions-IAM5[Resource::{executions_nag_arn(machine)}:*]",
            reason="Stops only executions of this stack's state machine (the run it started).",
        )
        acknowledge(
            self,
            rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            reason="CDK's custom-resource function (starts the run) writes only its own logs "
            "with AWS's minimal managed policy.",
        )
