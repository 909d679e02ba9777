"""Compose one job's three stacks from a Plan (two for an S3-sync plan: no PS stack), or its
two profiling stacks from a ProfileRun, tag everything, and register cdk-nag.

This is what app.py and the tests call: stacks get the Plan (and where the dataset comes from)
and nothing else.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from provisioner.plan import Plan
from stacks.context import DatasetSource
from stacks.data import data_layout
from stacks.data_stack import DataStack
from stacks.events import boundary_prefix, exchange_prefix, sync_summary
from stacks.profile_run import ProfileRun
from stacks.profile_stack import ProfileStack
from stacks.provider_logs import own_provider_log_groups
from stacks.ps_stack import ParameterServerStack
from stacks.training_stack import TrainingStack


@dataclass(frozen=True)
class JobStacks:
    data: DataStack
    parameter_servers: ParameterServerStack | None  # None when the plan syncs through S3
    training: TrainingStack


# What a run *does*. The goal, the predictions and the notes are left out: a new deadline that
# the same configuration still meets must not stop a run and start it over.
RUN_FIELDS = (
    "job", "workload", "n_workers", "memory_mb", "arch", "ps_type", "ps_count", "ps_arch",
    "invocation_timeout_s", "ephemeral_storage_mb", "reserve_concurrency", "training",
)  # fmt: skip


def plan_digest(plan: Plan) -> str:
    """sha256 of the Plan's run configuration: deploying a changed one starts a new run.

    An S3-sync plan's run also depends on its sync mode and k; a PS plan's digest leaves them
    out, so it is what it was before plans had them (a redeploy of the same plan restarts
    nothing). A pipelined plan's run also depends on its stages; a one-stage plan has none."""
    data = plan.to_dict()
    run = {key: data[key] for key in RUN_FIELDS}
    if plan.sync != "ps":
        run.update(sync=plan.sync, reducers=plan.reducers)
    if plan.pipeline is not None:  # a new cut, stage memory or M is a new run
        run["pipeline"] = data["pipeline"]
    return hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()


def plan_tags(plan: Plan) -> dict[str, str]:
    """Tag values (S3/EC2 tag charset: no '$') saying what was asked for and predicted."""
    goal = plan.goal
    return {
        "job": plan.job,
        "deadline": f"{goal.deadline_s:.0f}s" if goal.deadline_s is not None else "none",
        "budget": f"{goal.budget_usd:.2f} USD" if goal.budget_usd is not None else "none",
        "predicted-time": f"{plan.prediction.total_s:.0f}s",
        "predicted-cost": f"{plan.cost.total_usd:.4f} USD",
    }


def add_job_stacks(app: App, *, plan: Plan, dataset: DatasetSource, nag: bool = True,
                   env: Environment | None = None, az: str | None = None,
                   documents: tuple[dict[str, Any], dict[str, Any]] | None = None,
                   ) -> JobStacks:  # fmt: skip
    """The job's Data, ParameterServers and Training stacks, named `<job>-data` etc.; an S3-sync
    plan (`plan.sync == "s3"`) has no ParameterServers stack: no VPC, no instance, no secret.

    `env`: the account and region (`deploy_env`), all three stacks the same (they reference
    each other); with one, the PS AMI is pinned in cdk.context.json (stacks/machine_image.py).
    `az`: the one availability zone of the VPC (-c az=); None = the region's first.
    `documents`: the (profile, catalog) JSON of a plan that re-plans (its pace function's
    bundle); None reads them by the plan's names (stacks.replan_loop.plan_documents).
    """
    summary = f"n={plan.n_workers} x {plan.memory_mb} MB {plan.arch}, {sync_summary(plan)}"
    if plan.pipeline is not None:
        summary += f", {plan.pipeline.stage_count} stages"
    layout = data_layout(plan.job, dataset)
    s3_sync = plan.sync == "s3"
    data = DataStack(app, f"{plan.job}-data", layout=layout, dataset=dataset,
                     description=f"λDNN job {plan.job}: buckets", env=env,
                     exchange_prefix=exchange_prefix(plan) if s3_sync else None,
                     boundary_prefix=boundary_prefix(plan) if plan.pipeline else None)  # fmt: skip
    ps = None if s3_sync else ParameterServerStack(
        app, f"{plan.job}-ps", plan=plan, artifacts=layout.artifacts, env=env, az=az,
        description=f"λDNN job {plan.job}: network and parameter servers ({summary})",
    )  # fmt: skip
    training = TrainingStack(
        app, f"{plan.job}-training", plan=plan, plan_digest=plan_digest(plan),
        layout=layout, ps=ps, env=env, documents=documents,
        description=f"λDNN job {plan.job}: workers and orchestration ({summary})",
    )  # fmt: skip
    # Other stacks name our buckets rather than import them: order the deploys explicitly.
    if ps is not None:
        ps.add_stack_dependency(data)
    training.add_stack_dependency(ps or data)
    for stack in (data, ps, training):
        if stack is not None:
            own_provider_log_groups(stack)
    for key, value in plan_tags(plan).items():
        Tags.of(app).add(key, value)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return JobStacks(data=data, parameter_servers=ps, training=training)


@dataclass(frozen=True)
class ProfileStacks:
    data: DataStack
    profile: ProfileStack


def add_profile_stacks(app: App, *, run: ProfileRun, dataset: DatasetSource,
                       nag: bool = True) -> ProfileStacks:  # fmt: skip
    """`<job>-data` (the same buckets a training run of the job uses) and `<job>-profile`."""
    layout = data_layout(run.job, dataset)
    data = DataStack(app, f"{run.job}-data", layout=layout, dataset=dataset,
                     description=f"λDNN job {run.job}: buckets")  # fmt: skip
    sizes = ", ".join(f"{mb}" for mb in run.memory_mb)
    profile = ProfileStack(
        app, f"{run.job}-profile", run=run, layout=layout,
        description=f"λDNN job {run.job}: profiles {run.name} on {run.arch} at {sizes} MB",
    )  # fmt: skip
    profile.add_stack_dependency(data)  # it names the buckets rather than import them
    for stack in (data, profile):
        own_provider_log_groups(stack)
    Tags.of(app).add("job", run.job)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return ProfileStacks(data=data, profile=profile)
