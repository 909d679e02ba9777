"""Training stack: the worker, prepare and finalize functions, the state machine, its start; in a
PS plan also the run's endpoint function and PS wait (an S3-sync plan has neither)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Environment, Stack
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from functions.runs import runs_prefix
from provisioner.plan import Plan
from provisioner.runaway import HELPER_TIMEOUT_S, plan_bounds
from stacks.data import DataLayout, grant_prepare
from stacks.events import (
    checkpoint_prefix,
    exchange_prefix,
    layout_prefixes,
    prepare_event,
    result_keys,
    shards_prefix,
    worker_event,
)
from stacks.functions import ImageFunction, VpcPlacement
from stacks.grants import grant_prefix, grant_s3_sync, put_exact_objects, read_secret_value
from stacks.image import ImageSpec
from stacks.nag import acknowledge, acknowledge_invoking_machine, executions_nag_arn
from stacks.network import INTERFACE_ENDPOINTS
from stacks.orchestration import PsSteps, ReplanFunctions, StartOnDeploy, TrainingOrchestration
from stacks.ps_stack import ParameterServerStack
from stacks.replan_functions import memory_variants, pace_function, worker_concurrency
from stacks.replan_loop import plan_documents
from stacks.run_network import PsWait, RunNetwork
from stacks.stage_workers import StageWorkers

# Not in the Plan because the planner does not model them: the prepare and finalize steps run
# once per job. 3,008 MB fits accounts still capped there; 15 minutes is Lambda's maximum.
HELPER_MEMORY_MB = 3008


class TrainingStack(Stack):
    """Attributes: `worker` (stage 0's in a pipelined plan), `workers` (one per stage),
    `stage_workers` (None for a one-stage plan), `prepare`, `finalize`, `run_network` and
    `ps_wait` (None in an S3-sync plan), `orchestration`, `start`.

    `ps`: the job's PS stack for a PS plan; None for an S3-sync plan (`plan.sync == "s3"`),
    whose functions run outside any VPC and whose run starts, waits for and stops no PS.

    A plan that re-plans (`plan.replan`) also gets `variants` (MB → worker function, the plan's
    memory's being `worker`) and `pace` (None otherwise); `documents`: the (profile, catalog)
    JSON the plan was made from, for the pace function (default: read by the plan's names).
    """

    def __init__(self, scope: Construct, construct_id: str, *, plan: Plan, plan_digest: str,
                 layout: DataLayout, ps: ParameterServerStack | None, description: str,
                 env: Environment | None = None,
                 documents: tuple[dict[str, Any], dict[str, Any]] | None = None,
                 ) -> None:  # fmt: skip
        super().__init__(scope, construct_id, description=description, env=env)
        if (ps is None) != (plan.sync == "s3"):
            raise ValueError(f"plan sync {plan.sync!r} and a PS stack {ps} do not fit: "
                             "an S3-sync plan has no PS stack, a PS plan needs one")  # fmt: skip
        image = ImageSpec(plan.arch, plan.training.model)
        in_vpc = (VpcPlacement(vpc=ps.network.vpc, subnets=ps.network.subnets,
                               security_group=ps.network.worker_security_group)
                  if ps else None)  # fmt: skip
        endpoints = ps.parameter_servers.endpoints if ps else []
        secret_ref = ps.secret.secret_arn if ps else ""
        self.stage_workers: StageWorkers | None = None
        if plan.pipeline is None:
            self.worker = ImageFunction(
                self, "Worker", image=image, handler="functions.worker.handler",
                description=f"Training worker of job {plan.job}", memory_mb=plan.memory_mb,
                timeout_s=plan.invocation_timeout_s,
                ephemeral_storage_mb=plan.ephemeral_storage_mb,
                reserved_concurrency=worker_concurrency(plan) if plan.reserve_concurrency else None,
                placement=in_vpc,
            )  # fmt: skip
            self.workers = [self.worker]
        else:
            self.stage_workers = StageWorkers(
                self, "StageWorkers", plan=plan, image=image, layout=layout, placement=in_vpc,
                ps_endpoints=(ps.parameter_servers.stage_endpoints if ps
                              else [[] for _ in plan.pipeline.stages]),
                secret_arn=ps.secret.secret_arn if ps else None,
            )  # fmt: skip
            self.workers = [s.worker for s in self.stage_workers.stages]
            self.worker = self.workers[0]
        self.prepare = ImageFunction(
            self, "Prepare", image=image, handler="functions.datasets.prepare_handler",
            description=f"Dataset shards of job {plan.job}", memory_mb=HELPER_MEMORY_MB,
            timeout_s=HELPER_TIMEOUT_S, ephemeral_storage_mb=plan.ephemeral_storage_mb,
        )  # fmt: skip
        self.finalize = ImageFunction(
            self, "Finalize", image=image, handler="functions.finalize.handler",
            description=f"Final model and run report of job {plan.job}",
            memory_mb=HELPER_MEMORY_MB, timeout_s=HELPER_TIMEOUT_S,
            ephemeral_storage_mb=plan.ephemeral_storage_mb, placement=in_vpc,
        )  # fmt: skip
        self.pace: ImageFunction | None = None
        self.variants: dict[int, ImageFunction] = {}
        if plan.replan is not None:
            self.variants = memory_variants(plan, self, self.worker, image=image, placement=in_vpc)
            self.workers = [
                self.worker,
                *(f for f in self.variants.values() if f is not self.worker),
            ]
            self.pace = pace_function(plan, self, image=image, artifacts=layout.artifacts)
        steps = self._ps_steps(plan, image, ps, in_vpc) if ps and in_vpc else None
        self.run_network = steps.run_network if steps else None
        self.ps_wait = steps.ps_wait if steps else None
        self._grant(plan, layout, ps.secret if ps else None)

        # A pipelined plan's finalize gets the job's event: every stage's PS shards (stage by
        # stage) and the prefixes its stages' own sit under.
        event = worker_event(
            plan, rank=0, dataset_bucket=layout.dataset.name,
            artifacts_bucket=layout.artifacts.name, ps_endpoints=endpoints,
            secret_ref=secret_ref,
        )  # fmt: skip
        stages = ([(s.worker.function, s.event) for s in self.stage_workers.stages]
                  if self.stage_workers else [])  # fmt: skip
        self.orchestration = TrainingOrchestration(
            self, "Orchestration", n_workers=plan.n_workers,
            worker=None if stages else self.worker.function, stages=stages,
            worker_timeout_s=plan.invocation_timeout_s, worker_event=event,
            prepare=self.prepare.function, finalize=self.finalize.function,
            prepare_event=prepare_event(plan, source=layout.source,
                                        dataset_bucket=layout.dataset.name),
            helper_timeout_s=HELPER_TIMEOUT_S, ps=steps, bounds=plan_bounds(plan),
            replan=self._replan_functions(plan, documents),
        )  # fmt: skip
        executions = self._acknowledge_orchestration()
        machine = self.orchestration.state_machine
        self.start = StartOnDeploy(self, "StartTraining", state_machine=machine,
                                   plan_digest=plan_digest)  # fmt: skip
        acknowledge(
            self.start,
            rule=f"AwsSolutions-IAM5[Resource::{executions}:*]",
            reason="Stops only executions of this job's state machine (the run it started).",
        )
        acknowledge(
            self,
            rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            reason="CDK's custom-resource function (starts the run) writes only its own logs "
            "with AWS's minimal managed policy.",
        )
        self._outputs(plan, layout, machine.state_machine_arn)

    def _replan_functions(self, plan: Plan, documents: tuple[dict[str, Any], dict[str, Any]]
                          | None) -> ReplanFunctions | None:  # fmt: skip
        """The re-planning loop's functions and bundle; None for a plan that runs as it is."""
        if plan.replan is None or self.pace is None:
            return None
        return ReplanFunctions(
            plan=plan, workers={mb: f.function for mb, f in self.variants.items()},
            pace=self.pace.function, documents=documents or plan_documents(plan),
        )  # fmt: skip

    def _ps_steps(self, plan: Plan, image: ImageSpec, ps: ParameterServerStack,
                  in_vpc: VpcPlacement) -> PsSteps:  # fmt: skip
        """The run's endpoint function and PS wait (in this stack), and the PS instances."""
        # getattr: plans written before the field existed carry no list; use the default set.
        services = tuple(getattr(plan, "interface_endpoints", ())) or INTERFACE_ENDPOINTS
        run_network = RunNetwork(self, "RunNetwork", job=plan.job, image=image,
                                 network=ps.network, services=services,
                                 timeout_s=HELPER_TIMEOUT_S)  # fmt: skip
        ps_wait = PsWait(self, "PsWait", job=plan.job, image=image, placement=in_vpc,
                         ps_endpoints=ps.parameter_servers.endpoints,
                         timeout_s=HELPER_TIMEOUT_S)  # fmt: skip
        servers = ps.parameter_servers
        return PsSteps(instance_ids=[i.instance_id for i in servers.instances],
                       instance_arns=servers.instance_arns, run_network=run_network,
                       ps_wait=ps_wait)  # fmt: skip

    def _grant(self, plan: Plan, layout: DataLayout,
               secret: secretsmanager.ISecret | None) -> None:  # fmt: skip
        """Each role gets exactly what its handler does, read from the handlers themselves.

        Worker (functions/worker.py): the manifest and its shard, the secret; it writes only its
        link records under the job's runs prefix (the PS writes the checkpoints). Finalize
        (functions/finalize.py): the manifest and test split, the PS checkpoints and the link
        records, the secret (it asks the PS for a last checkpoint); writes exactly model.pt and
        report.json. Prepare (functions/datasets.py): reads the source,
        writes the shards and manifest, reads nothing back. An S3-sync plan has no secret; its
        workers write the checkpoints and read, write and delete under the exchange prefix.
        """
        shards = shards_prefix(plan)
        if self.stage_workers is None:  # a pipelined plan's stages grant their own
            self._grant_worker(plan, layout)
        grant_prefix(
            self.finalize.function,
            self.finalize,
            layout.dataset,
            shards,
            write=False,
            reason="Reads the manifest and the held-out split for the run report.",
        )
        grant_prefix(
            self.finalize.function,
            self.finalize,
            layout.artifacts,
            checkpoint_prefix(plan),
            write=False,
            reason="Reads the PS checkpoints; shard and iteration are in the key.",
        )
        grant_prefix(
            self.finalize.function,
            self.finalize,
            layout.artifacts,
            runs_prefix(plan.job),
            write=False,
            reason="Reads the run's link records for the report; listed by run.",
        )
        self.finalize.function.add_to_role_policy(
            put_exact_objects(layout.artifacts, result_keys(plan))
        )
        grant_prepare(
            self.prepare.function,
            self.prepare,
            layout,
            shards,
            reason="Writes this run's shards and manifest under one prefix.",
        )
        for prefix in layout_prefixes(plan):  # a plan that re-plans: every envelope count's
            if prefix != shards:
                grant_prefix(self.prepare.function, self.prepare, layout.dataset, prefix,
                             read=False, write=True,
                             reason="Writes the shards and manifest of a worker count a re-plan "
                             "may switch to, under one prefix.")  # fmt: skip
        if secret is not None:
            # A pipelined plan's stage workers read the secret by their own grants.
            readers = [self.finalize] if self.stage_workers else [self.worker, self.finalize]
            for fn in readers:
                fn.function.add_to_role_policy(read_secret_value(secret.secret_arn))

    def _grant_worker(self, plan: Plan, layout: DataLayout) -> None:
        """A one-stage plan's worker: its shard, its link records, an S3 plan's sync. A plan
        that re-plans: the shards of every envelope count (its variants share the role)."""
        for prefix in layout_prefixes(plan):
            grant_prefix(
                self.worker.function,
                self.worker,
                layout.dataset,
                prefix,
                write=False,
                reason="Reads its shard; keys are listed in the run's manifest.",
            )
        grant_prefix(
            self.worker.function,
            self.worker,
            layout.artifacts,
            runs_prefix(plan.job),
            write=True,
            read=False,
            reason="Writes its link records; run id, rank and link are in the key.",
        )
        if plan.sync == "s3":
            grant_s3_sync(
                self.worker.function,
                self.worker,
                layout.artifacts,
                checkpoints=checkpoint_prefix(plan),
                exchange=exchange_prefix(plan),
            )

    def _acknowledge_orchestration(self) -> str:
        """Acknowledge the state machine's findings; return its executions' nag ARN form."""
        machine = self.orchestration.state_machine
        invoked = (*self.workers, self.prepare, self.finalize, self.run_network, self.ps_wait,
                   self.pace)  # fmt: skip
        acknowledge_invoking_machine(machine, (f.function for f in invoked if f is not None))
        executions = executions_nag_arn(machine)
        for suffix in (":*", "/*:*"):
            acknowledge(
                machine,
                rule=f"AwsSolutions-IAM5[Resource::{executions}{suffix}]",
                reason="The Distributed Map describes/stops only this state machine's own "
                "executions and child executions, whose names are generated at run time.",
            )
        return executions

    def _outputs(self, plan: Plan, layout: DataLayout, machine_arn: str) -> None:
        region = self.region
        for name, value, description in (
            ("StateMachineArn", machine_arn, "The training run's state machine"),
            ("ExecutionArn", self.start.execution_arn, "The run started by this deploy"),
            ("FollowRun", f"https://{region}.console.aws.amazon.com/states/home?region={region}"
             f"#/v2/executions/details/{self.start.execution_arn}", "Console view of the run"),
            *self._worker_logs(),
            ("Results", f"s3://{layout.artifacts.name}/{plan.job}/",
             "Final model (model.pt) and run report (report.json)"),
            ("Checkpoints", f"s3://{layout.artifacts.name}/{checkpoint_prefix(plan)}/",
             "Checkpoints (written by the workers)" if plan.sync == "s3" else "PS checkpoints"),
        ):  # fmt: skip
            CfnOutput(self, name, value=value, description=description)

    def _worker_logs(self) -> list[tuple[str, str, str]]:
        """The worker's log group output; a pipelined plan's, one per stage."""
        if self.stage_workers is None:
            return [("WorkerLogGroup", self.worker.log_group.log_group_name,
                     "Worker function logs")]  # fmt: skip
        return [
            (
                f"Stage{s.stage.index}WorkerLogGroup",
                s.worker.log_group.log_group_name,
                f"Stage {s.stage.index} worker function logs",
            )
            for s in self.stage_workers.stages
        ]
