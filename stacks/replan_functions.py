"""The functions a plan that re-plans adds to the training stack: a worker function per other
memory variant of the envelope, and the pace function (stacks/replan_loop.py runs them).

A variant is the worker at another memory: the same image, handler, timeout and role (so the
same grants), its own log group. Logical ids: the plan's memory keeps `WorkerFunction`, a
variant is `WorkerFunctionMb<mb>` (the emulator maps both prefixes to its worker role). The pace
function reads the boundary's link records by key and writes its decision record; nothing else.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from functions.runs import links_prefix, replan_record_key
from provisioner.plan import Plan
from stacks.functions import ImageFunction, VpcPlacement
from stacks.grants import BucketRef
from stacks.image import ImageSpec
from stacks.nag import acknowledge
from stacks.replan_loop import PACE_MEMORY_MB, PACE_TIMEOUT_S

PACE_HANDLER = "functions.pace.handler"
PACE_EPHEMERAL_STORAGE_MB = 512  # Lambda's minimum: it keeps nothing on disk


def worker_concurrency(plan: Plan) -> int:
    """The workers a worker function may run at once: the envelope's ceiling when the plan
    re-plans (a switch may take every worker to one variant), else the plan's count."""
    return plan.replan.envelope.max_workers if plan.replan is not None else plan.n_workers


def replan_records_prefix(job: str, run_id: str) -> str:
    """The folder of one run's decision records (ends in '/'), where
    functions.runs.replan_record_key puts each, beside the run's link records."""
    return replan_record_key(job, run_id, 0).rpartition("/")[0] + "/"


def memory_variants(plan: Plan, scope: Construct, worker: ImageFunction, *, image: ImageSpec,
                    placement: VpcPlacement | None) -> dict[int, ImageFunction]:  # fmt: skip
    """MB → the worker function at that memory: `worker` at the plan's, a new one at each other
    variant of the envelope (in `scope`, the training stack)."""
    assert plan.replan is not None, "only a plan that re-plans has memory variants"
    variants = {plan.memory_mb: worker}
    for mb in plan.replan.envelope.memory_variants_mb:
        if mb == plan.memory_mb:
            continue
        variants[mb] = ImageFunction(
            scope, f"WorkerFunctionMb{mb}", image=image, handler="functions.worker.handler",
            description=f"Training worker of job {plan.job} at {mb} MB (a re-plan's variant)",
            memory_mb=mb, timeout_s=plan.invocation_timeout_s,
            ephemeral_storage_mb=plan.ephemeral_storage_mb,
            reserved_concurrency=worker_concurrency(plan) if plan.reserve_concurrency else None,
            placement=placement, role=worker.function.role,
        )  # fmt: skip
    return variants


def pace_function(plan: Plan, scope: Construct, *, image: ImageSpec,
                  artifacts: BucketRef) -> ImageFunction:  # fmt: skip
    """The pace function, outside any VPC (it only reads and writes S3), with exactly its
    two grants: GetObject of the run's link records (by key: functions/pace.py lists nothing)
    and PutObject of its decision records."""
    pace = ImageFunction(
        scope, "Pace", image=image, handler=PACE_HANDLER,
        description=f"Pace check and re-plan of job {plan.job} at each link boundary",
        memory_mb=PACE_MEMORY_MB, timeout_s=PACE_TIMEOUT_S,
        ephemeral_storage_mb=PACE_EPHEMERAL_STORAGE_MB,
    )  # fmt: skip
    for action, prefix, reason in (
        ("s3:GetObject", links_prefix(plan.job, "*"),
         "Reads the link records of the boundary it checks; run id, rank and link are in the "
         "key, the run id known only at run time."),
        ("s3:PutObject", replan_records_prefix(plan.job, "*"),
         "Writes its decision record at each boundary; run id and link are in the key, the run "
         "id known only at run time."),
    ):  # fmt: skip
        pace.function.add_to_role_policy(
            iam.PolicyStatement(actions=[action], resources=[f"{artifacts.arn}/{prefix}*"])
        )
        acknowledge(
            pace.function,
            rule=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{artifacts.nag_name}/"
            f"{prefix}*]",
            reason=reason,
        )
    return pace
