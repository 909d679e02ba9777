"""CDK app: context → one Plan → the job's stacks. Nothing else is decided here.

`cdk synth -c deadline=90m` (or budget=, workload=, dataset=, ...; see docs/stacks.md) reads the
context once (stacks/context.py), calls the planner once, prints why this plan, writes
`cdk.out/plan.json` for the emulator, and builds the stacks from the Plan.
`cdk deploy -c mode=profile` instead builds a profiling run of the workload (no planner, no PS):
the data stack and `<job>-profile`, which measures the workload in Lambda and writes its profile.
Exit codes: 2 bad input (every problem listed, one line each), 3 no plan meets the goal, 1 the
plan could not be written (one line naming the path). `cdk synth` itself reports any non-zero
exit of this app as 1 ("Subprocess exited with error 2"); the app's own line says which it was.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, TextIO

from aws_cdk import App

from functions.model_spec import file_digest, parse_spec
from provisioner import (
    Goal,
    Infeasible,
    Limits,
    PlanResult,
    WorkloadProfile,
    check_dataset,
    format_duration_s,
    format_usd,
    load_catalog,
    load_profile,
    parse_duration_s,
    parse_slack,
    parse_usd,
)
from provisioner.catalog import CATALOG_DIR, LOCAL_CATALOG, Catalog, read_data_json
from provisioner.files import write_text_atomically
from provisioner.idle import idle_line
from provisioner.interval import interval_words
from provisioner.plan import Plan
from provisioner.profile import PROFILE_DIR, profile_from_dict
from provisioner.replan_attach import plan_with_replan
from provisioner.runaway import bounds_line
from provisioner.summary import replan_words
from stacks.context import ContextError, JobContext, read_context
from stacks.events import sync_summary
from stacks.image import DOCKERFILE, REPO_ROOT, ImageSpec
from stacks.machine_image import ami_line, deploy_env
from stacks.profile_run import (
    DEFAULT_PROFILE_ITERATIONS,
    DEFAULT_PROFILE_MEMORY_MB,
    WARMUP_ITERATIONS,
    ProfileRun,
    profile_key,
)

EXIT_WRITE_FAILED, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 1, 2, 3


def _check_generated_dataset(ctx: JobContext, profile: WorkloadProfile) -> None:
    """Generated data has a known shape; local and s3:// data is first seen by the prepare step."""
    generated = ctx.dataset.name if ctx.dataset.kind in ("builtin", "synthetic") else None
    if generated is not None:
        check_dataset(profile, generated, ctx.dataset.spec)


def load_aws_catalog(name: str) -> Catalog:
    """The catalog a deploy is planned on: any but `local`, which is this machine's, measured
    for the emulator (its PS type `loopback` is no EC2 type, its figures no AWS figures)."""
    catalog = None if name == LOCAL_CATALOG else load_catalog(name)
    if catalog is None or catalog.name == LOCAL_CATALOG:
        raise ValueError(
            f"catalog {LOCAL_CATALOG!r} is this machine's, for the emulator (python -m emulator), "
            "not an AWS catalog: synth with an AWS one (lambda-2025, lambda-2020)"
        )
    return catalog


def check_model_file(profile: WorkloadProfile) -> None:
    """ValueError unless the profile's model file exists and is the one the profile measured:
    the image holds the file as it is now, the plan is sized for the one profiled."""
    spec = parse_spec(profile.model)
    now = file_digest(spec)  # its own one-line error when the file is missing
    if profile.model_digest and now != profile.model_digest:
        raise ValueError(
            f"model file {spec.file} changed since profile {profile.name!r} measured it "
            f"({profile.model_digest[:15]}… then, {now[:15]}… now): re-profile it with python -m "
            f"emulator.profile --model {spec.text} --dataset {profile.dataset} --output <profile>"
        )


def plan_documents(ctx: JobContext, plan: Plan) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The profile and catalog JSON a re-planning plan was made from, as the context names them
    (a name or a path): its pace function's bundle. None for a plan that runs as it is."""
    if plan.replan is None:
        return None
    _, profile = read_data_json(ctx.workload, PROFILE_DIR, "profile")
    _, catalog = read_data_json(ctx.catalog, CATALOG_DIR, "catalog")
    return profile, catalog


def plan_for(ctx: JobContext) -> PlanResult:
    """The planner, called once; its ValueErrors name the bad input in one line."""
    limits = Limits(
        max_memory_mb=ctx.max_memory_mb,
        max_concurrency=ctx.max_concurrency,
        arch=ctx.arch,
        ps_types=ctx.ps_types,
        reserve_concurrency=ctx.reserve_concurrency,
        sync=ctx.sync,
    )
    goal = Goal(deadline_s=ctx.deadline_s, budget_usd=ctx.budget_usd, slack=ctx.slack)
    profile, catalog = load_profile(ctx.workload), load_aws_catalog(ctx.catalog)
    _check_generated_dataset(ctx, profile)
    check_model_file(profile)
    return plan_with_replan(
        profile, catalog, goal, limits, ctx.job, replan=ctx.replan, ceiling=ctx.replan_ceiling
    )


def profile_run_for(ctx: JobContext) -> ProfileRun:
    """The profiling run the context asks for; the workload's committed profile is its base
    (every figure it does not measure is kept, with its source)."""
    _, document = read_data_json(ctx.workload, PROFILE_DIR, "profile")
    profile = profile_from_dict(document)
    _check_generated_dataset(ctx, profile)
    check_model_file(profile)
    cap_mb = ctx.max_memory_mb or max(DEFAULT_PROFILE_MEMORY_MB)
    sizes = ctx.profile_memory_mb or tuple(m for m in DEFAULT_PROFILE_MEMORY_MB if m <= cap_mb)
    if not sizes:
        raise ValueError(
            f"max_memory_mb={ctx.max_memory_mb} is below every default profile size "
            f"{list(DEFAULT_PROFILE_MEMORY_MB)}; give the sizes with -c profile_memory=..."
        )
    return ProfileRun(
        job=ctx.job, name=profile.name, model=profile.model,
        local_batch=profile.profiled_local_batch, dataset_bytes=profile.dataset_bytes,
        memory_mb=sizes, arch="x86_64" if ctx.arch in ("any", "mixed") else ctx.arch,
        iterations=ctx.profile_iterations or DEFAULT_PROFILE_ITERATIONS,
        base_profile_json=json.dumps(document, sort_keys=True),
    )  # fmt: skip


def profile_lines(run: ProfileRun) -> list[str]:
    """What a user reads after a profile-mode synth: what will be measured and where it lands."""
    sizes = ", ".join(str(mb) for mb in run.memory_mb)
    return [
        f"profile {run.name} (job {run.job}): {run.arch} Lambda at {sizes} MB, "
        f"{run.iterations} timed iterations each after {WARMUP_ITERATIONS} warm-up, no PS",
        f"writes <artifacts bucket>/{profile_key(run)} (stack output Profile); then: "
        ".venv/bin/python -m tools.fetch_profile <that s3:// URI>",
    ]


def synth_profile(app: App, ctx: JobContext, *, err: TextIO) -> int:
    """Build the profiling stacks into `app`; return the process exit code."""
    from stacks.job import add_profile_stacks

    try:
        run = profile_run_for(ctx)
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_BAD_INPUT
    for line in profile_lines(run):
        print(line, file=err)
    add_profile_stacks(app, run=run, dataset=ctx.dataset)
    return 0


def image_line(plan: Plan) -> str:
    """Which platforms `cdk deploy` builds the image for (an arm64 build on an x86 host, or the
    reverse, needs QEMU/binfmt; -c arch=mixed is what allows a plan to need both)."""
    workers, ps = (ImageSpec(arch).platform.platform for arch in (plan.arch, plan.ps_arch))
    if plan.sync == "s3":
        return f"image: {workers} (workers; no PS)"
    if workers == ps:
        return f"image: {workers} (workers and PS)"
    return (
        f"image: {workers} (workers) and {ps} (PS): the "
        "deploy builds both (the other architecture needs QEMU/binfmt on the host)"
    )


def placement_line(plan: Plan, az: str | None) -> str:
    """Where the PS instances go, and how to move them where their type is offered (not every
    AZ offers every type; synth cannot ask EC2, so the user is told how to check)."""
    if plan.sync == "s3":
        ignored = f" (-c az={az} is not used)" if az else ""
        return f"placement: no VPC and no PS instances (S3 sync){ignored}"
    where = f"availability zone {az} (-c az)" if az else "the region's first availability zone"
    return (
        f"PS placement: {where}; if {plan.ps_type} is not offered there, pick one that offers it "
        "with -c az= (aws ec2 describe-instance-type-offerings --location-type "
        f"availability-zone --filters Name=instance-type,Values={plan.ps_type})"
    )


def ps_words(plan: Plan) -> str:
    """The summary's words for how the workers exchange gradients."""
    if plan.sync == "s3":
        return sync_summary(plan)
    return f"PS {plan.ps_count} x {plan.ps_type} ({plan.ps_arch})"


def stage_lines(plan: Plan) -> list[str]:
    """A pipelined plan's cut, one line per stage; none for a one-stage plan."""
    pipe = plan.pipeline
    if pipe is None:
        return []
    sync = "PS shards" if plan.sync == "ps" else "reducers"
    per_stage = plan.ps_count if plan.sync == "ps" else plan.reducers
    why = {"does-not-fit": "it does not fit one function", "cheaper": "it is cheaper"}
    head = (
        f"pipeline: {pipe.stage_count} stages x {plan.n_workers} replicas "
        f"({pipe.stage_count * plan.n_workers} functions at once), {pipe.micro_batches} "
        f"micro-batches per iteration ({pipe.schedule}), {per_stage} {sync} per stage; "
        f"cut because {why.get(pipe.reason, pipe.reason)}"
    )
    return [head] + [
        f"stage {s.index}: blocks {s.first_block}-{s.stop_block - 1} ({', '.join(s.block_names)}), "
        f"{s.memory_mb} MB (needs {s.memory_needed_mb}), {s.parameter_bytes / 1e6:.2f} MB of "
        f"parameters; per micro-batch {s.compute_per_micro_batch_s:.3f} s compute + "
        f"{s.boundary_per_micro_batch_s:.3f} s boundary, sync {s.sync_per_iteration_s:.3f} s "
        "per iteration"
        for s in pipe.stages
    ]


def between_runs(plan: Plan) -> str:
    """What bills between runs; an S3-sync deployment has no PS volumes and no secret."""
    if plan.sync == "s3":
        return (f"{format_usd(plan.idle_usd_per_hour)}/h until `cdk destroy` (no PS volumes, "
                "no secret, no endpoints: S3 storage only)")  # fmt: skip
    return idle_line(plan)


def _reserve_words(plan: Plan, user_slack: bool) -> str:
    """What the deadline's plans were held to below it: the slack (the user's, or the catalog
    default) and the 90% interval's upper end where a spread was measured; "" for neither."""
    goal = plan.goal
    if not goal.holds_back:
        return ""
    held = (
        [f"{goal.slack:.0%} slack{'' if user_slack else ', the catalog default'}"]
        if goal.slack
        else []
    )
    if goal.interval_high > 1.0:  # a measured spread: the plan meets the deadline at its top
        held.append(f"the 90% interval's upper end, {goal.interval_high:.2f}×")
    limit = format_duration_s(goal.planning_deadline_s or 0.0)
    return f", planned for {limit} ({' and '.join(held)})"


def replan_lines(plan: Plan) -> list[str]:
    """A re-planning plan's envelope and worst case; none for a plan that runs as it is."""
    if plan.replan is None:
        return []
    envelope, worst = replan_words(plan)
    return [f"re-planning: {envelope}; worst case {worst}"]


def summary_lines(ctx: JobContext, result: PlanResult) -> list[str]:
    """What a user reads after synth: the plan, its prediction and why."""
    plan, p = result.plan, result.plan.prediction
    goals = []
    if ctx.deadline_s is not None:
        default = " (default_deadline)" if ctx.deadline_is_default else ""
        reserve = _reserve_words(plan, user_slack=ctx.slack is not None)
        goals.append(f"deadline {format_duration_s(ctx.deadline_s)}{default}{reserve}")
    if ctx.budget_usd is not None:
        goals.append(f"budget {format_usd(ctx.budget_usd)}")
    return [
        f"plan {plan.job}: {plan.n_workers} x {plan.memory_mb} MB {plan.arch} workers, "
        f"{ps_words(plan)}, "
        f"timeout {plan.invocation_timeout_s} s, /tmp {plan.ephemeral_storage_mb} MB, "
        f"{plan.invocations_per_worker} invocation(s) per worker",
        *stage_lines(plan),
        f"goal: {' and '.join(goals)}; {interval_words(p.total_s, p.total_low_s, p.total_high_s)}"
        f", {format_usd(plan.cost.total_usd)}",
        "cost: "
        + ", ".join(
            f"{name.removesuffix('_usd').replace('_', ' ')} {format_usd(value)}"
            for name, value in dataclasses.asdict(plan.cost).items()
            if name != "total_usd" and value >= 0.00005  # items that show at 4 decimals
        ),
        image_line(plan),
        f"if it goes wrong: {bounds_line(plan)}",
        *replan_lines(plan),
        f"between runs: {between_runs(plan)}",
        *(f"why: {note}" for note in plan.notes),
    ]


def synth_job(app: App, *, err: TextIO) -> int:
    """Build the job's stacks into `app`; return the process exit code (0 when synthesized)."""
    from stacks.job import add_job_stacks  # after validation: aws_cdk constructs are slow-ish

    try:
        ctx = read_context(
            app.node.get_all_context(),
            parse_duration_s=parse_duration_s,
            parse_usd=parse_usd,
            cwd=os.getcwd(),
            loaders={"workload": load_profile, "catalog": load_aws_catalog},
            parse_slack=parse_slack,
        )
    except ContextError as exc:
        for line in exc.errors:
            print(f"error: {line}", file=err)
        return EXIT_BAD_INPUT
    if not os.path.isfile(os.path.join(REPO_ROOT, DOCKERFILE)):
        print(f"error: {DOCKERFILE} is missing: the job's image is built from it", file=err)
        return EXIT_BAD_INPUT
    if ctx.mode == "profile":
        return synth_profile(app, ctx, err=err)
    try:
        result = plan_for(ctx)
    except Infeasible as exc:
        print(f"infeasible: {exc}", file=err)
        return EXIT_INFEASIBLE
    except ValueError as exc:  # e.g. a PS type the catalog does not hold: one line, no trace
        print(f"error: {exc}", file=err)
        return EXIT_BAD_INPUT
    for line in summary_lines(ctx, result):
        print(line, file=err)
    plan_path = os.path.join(app.outdir, "plan.json")
    try:  # whole or not at all: an interrupted synth never leaves half a plan
        os.makedirs(app.outdir, exist_ok=True)
        write_text_atomically(plan_path, result.to_json())
    except OSError as exc:  # a full disk, cdk.out a file: one line, the old plan.json intact
        print(f"error: cannot write {plan_path}: {exc.strerror or exc}", file=err)
        return EXIT_WRITE_FAILED
    shown = os.path.relpath(plan_path)
    print(f"plan written to {plan_path if shown.startswith('..') else shown}", file=err)
    env = deploy_env(os.environ)
    if result.plan.sync != "s3":  # no PS, no AMI
        print(ami_line(env), file=err)
    print(placement_line(result.plan, ctx.az), file=err)
    add_job_stacks(app, plan=result.plan, dataset=ctx.dataset, env=env, az=ctx.az,
                   documents=plan_documents(ctx, result.plan))  # fmt: skip
    return 0


def main() -> None:
    app = App()
    code = synth_job(app, err=sys.stderr)
    if code:
        sys.exit(code)
    app.synth()


if __name__ == "__main__":
    main()
