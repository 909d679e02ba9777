"""Run a job on one machine: the S3 server, the CPU limits, the PS processes, the workers'
execution environments, and the synthesized state machine that drives them.

`run` synthesizes the plan's training state machine (emulator/definition.py) and executes it
(emulator/state_machine.py): the order, retries, progress and link bounds, and the failure path
are the definition's, the one `cdk deploy` ships. This module is the driver: it prepares the
run's folder, buckets and dataset, starts the S3 server and the CPU limits, hands the tasks to
the state machine (the workers: emulator/workers.py; the PS shards: emulator/ps_shards.py), and
writes the report of the run record (emulator/records.py). Every wait has a deadline, and every
child is killed on the way out, whatever the way out is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from emulator import cgroups, cpu
from emulator.child_env import child_env
from emulator.definition import SynthFailed, dataset_of, training_definition
from emulator.naming import RUN_FILES, RUN_FOLDERS, bucket_name, run_dir
from emulator.options import LOCAL_CATALOG, REPO_ROOT, Options, default_safety_margin_s
from emulator.placements import Placements
from emulator.procs import Interrupted, Supervisor
from emulator.progress import ProgressBar
from emulator.records import (
    EmulatorError,
    RunRecord,
    check_memory_ceiling,
    stage_keys,
    worker_label,
    worker_memory_mb,
)
from emulator.report import finish_report
from emulator.run_lock import run_folder_lock
from emulator.s3_client import create_buckets, s3_client_for
from emulator.s3server import S3Endpoint, s3_server
from emulator.state_machine import LocalRun
from emulator.unfinished import unfinished_report, write_report
from functions.aws import S3Unreachable, naming_s3_failures
from functions.runs import new_run
from provisioner.catalog import read_data_json
from provisioner.plan import Plan
from provisioner.profile import PROFILE_DIR
from provisioner.runaway import max_links
from stacks.context import LOCAL_SOURCE_PREFIX


def links_bound_for_limit(plan: Plan, limit_s: float, margin_s: float) -> int:
    """The state machine's links per worker for a run whose invocations are shorter than the
    plan's: the plan's bound for the same work in links of `limit_s − margin_s` usable seconds.

    The plan bounds its links for its own timeout (a one-link plan: five links). Under a 4 s
    limit a 900 s plan's work takes hundreds of links, and the bound failed the run as runaway
    ("A worker ran 5 links") however well it went: how many links it takes depends on the
    machine. Scaled by the ratio of usable times, the guard keeps its meaning (three times the
    links the plan's own prediction needs, plus two), and a link must still advance."""
    plan_usable_s = plan.invocation_timeout_s - default_safety_margin_s(plan.invocation_timeout_s)
    ratio = max(1.0, plan_usable_s / max(limit_s - margin_s, 1e-9))
    scaled = max_links(math.ceil(max(1, plan.invocations_per_worker) * ratio))
    return max(plan.max_links_per_worker, scaled)


def default_run_timeout_s(plan: Plan, options: Options) -> float:
    """A generous whole-run deadline: 20 × the prediction plus one limit per planned link."""
    links = max(1, plan.invocations_per_worker)
    return 600.0 + 20.0 * plan.prediction.total_s + 4 * links * options.invocation_limit_s


def with_losses(s3: Any, bucket: str, result: dict[str, Any]) -> dict[str, Any]:
    """A link's bounded return value plus the losses and step times its record in S3 holds
    (the report's loss curve, redone-iteration count and per-link steps read them)."""
    key = result.get("record_key")
    if not key:
        return result
    record = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    return {
        **result,
        "losses": record.get("losses", []),
        "step_compute_s": record.get("step_compute_s", []),
    }


def dataset_source(plan: Plan) -> str:
    """The `functions.datasets` source string for the plan's dataset: builtin, synthetic, or a
    user's dataset path (relative to the project folder, as the profile names it)."""
    name = plan.training.dataset
    if name == "digits":
        return "builtin:digits"
    if name.startswith("synthetic-cifar"):
        return f"synthetic-cifar:{plan.training.dataset_samples}"
    if name.startswith("s3://"):
        raise EmulatorError(
            f"dataset {name!r} is in S3, which the emulator does not reach: profile a local "
            "copy (python -m emulator.profile --dataset path/in/the/project) and plan from that"
        )
    if name == "cifar10":
        raise EmulatorError("dataset 'cifar10' cannot be emulated (no download here)")
    return str(REPO_ROOT / name)


def upload_local_dataset(endpoint: S3Endpoint, plan: Plan, bucket: str) -> int:
    """What the data stack's BucketDeployment does at deploy: a user's dataset folder (a file's
    folder) copied under `source/` of the dataset bucket, where the prepare step reads it.
    Returns the number of files (0 for generated data)."""
    try:
        source = dataset_of(plan, dataset_source(plan))
    except ValueError as err:
        raise EmulatorError(str(err)) from None
    if source.kind != "local":
        return 0
    folder = Path(source.path)  # a file's folder when the dataset is one file
    client = s3_client_for(endpoint)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        key = f"{LOCAL_SOURCE_PREFIX}/{path.relative_to(folder).as_posix()}"
        client.upload_file(str(path), bucket, key)
    return len(files)


@contextlib.contextmanager
def naming_a_dead_server(endpoint: S3Endpoint) -> Iterator[None]:
    """A run that fails while its own S3 server has exited says so in its one line (checked
    before the server's block stops it, so the exit is the server's own). S3 errors are named
    here, inside the block, so every S3 call in it (buckets, uploads, the workers' records) gets
    the note, not only those an inner block already named."""
    try:
        with naming_s3_failures():
            yield
    except (EmulatorError, S3Unreachable) as err:
        note = endpoint.exit_note()
        if note is None:
            raise
        failed = EmulatorError(f"{err}; {note}")
        failed.states = getattr(err, "states", ())
        raise failed from None


def worker_rules(plan: Plan, options: Options, margin_s: float) -> dict[str, Any]:
    """The emulator's two rules, added to every worker event. A pipelined plan's stage events
    carry the plan's iterations per invocation (its stages stop together): an option of 0 (only
    the time limit ends a link) leaves that in place."""
    rules: dict[str, Any] = {"safety_margin_s": margin_s}
    if options.iterations_per_invocation or plan.pipeline is None:
        rules["iterations_per_invocation"] = options.iterations_per_invocation
    return rules


def profile_document(workload: str | None) -> dict[str, Any] | None:
    """The `--workload` profile's document (the pace check re-plans from it), None without one."""
    if workload is None:
        return None
    _, doc = read_data_json(workload, PROFILE_DIR, "profile")
    return doc if isinstance(doc, dict) else None


def resolve_cpu_scale(plan: Plan, options: Options) -> float:
    """--cpu-scale if given; 1.0 for a plan made on the local catalog, whose vCPU is one local
    core, so it runs as planned; else the factor that fits the plan's cores to the machine."""
    if options.cpu_scale is not None:
        return options.cpu_scale
    if plan.catalog == LOCAL_CATALOG:
        return 1.0
    # a pipelined plan runs S x n functions at once, each at most the largest stage's memory
    workers = len(stage_keys(plan))
    return cpu.default_cpu_scale(workers, plan.memory_mb, cpu.machine_cores())


def run(plan: Plan, options: Options, endpoint: S3Endpoint | None = None) -> RunRecord:
    """Emulate the whole job; returns the raw record (raises EmulatorError on failure).

    With `endpoint`, that running S3 server is used (tests share one); otherwise one is started
    for the run and stopped with it. A failed run still leaves a report.json saying what failed.
    A run folder another run holds is refused (emulator.run_lock.RunFolderBusy).
    """
    if not options.replan:  # --no-replan: the plan as it is, today's definition
        plan = dataclasses.replace(plan, replan=None)
    check_memory_ceiling(plan, options.memory_ceiling_mb)  # ValueError before anything starts
    out_dir = run_dir(plan.job, options.out_dir, REPO_ROOT / "runs")  # before anything is deleted
    with run_folder_lock(out_dir):  # RunFolderBusy (nothing touched) while another run holds it
        return _run_locked(plan, options, out_dir, endpoint)


def _run_locked(
    plan: Plan, options: Options, out_dir: Path, endpoint: S3Endpoint | None
) -> RunRecord:
    """`run` once it holds the run folder: a failed or interrupted run leaves its report."""
    # What Step Functions would name the execution (functions.runs): every run its own.
    run_id, run_started = new_run(datetime.datetime.now(datetime.UTC), str(os.getpid()))
    unfinished = functools.partial(
        unfinished_report,
        job=plan.job,
        run_id=run_id,
        planned=plan.training.iterations,
        shards=plan.ps_count,
        logs=out_dir / "logs",
    )
    try:
        with naming_s3_failures():
            return _run(plan, options, out_dir, endpoint, (run_id, run_started))
    except (EmulatorError, S3Unreachable) as err:
        states = list(getattr(err, "states", ()))
        write_report(out_dir, unfinished(status="failed", error=str(err), state_machine=states))
        if isinstance(err, S3Unreachable):
            raise EmulatorError(str(err)) from None
        raise
    except KeyboardInterrupt as err:
        name = err.signal_name if isinstance(err, Interrupted) else "SIGINT"
        write_report(out_dir, unfinished(status="interrupted", signal=name))
        raise
    finally:
        shutil.rmtree(out_dir / "tmp", ignore_errors=True)  # the functions' /tmp


def _run(
    plan: Plan,
    options: Options,
    out_dir: Path,
    endpoint: S3Endpoint | None,
    run: tuple[str, str],
) -> RunRecord:
    """The body of `run`; `run` is the run's (id, ISO start)."""
    logs = out_dir / "logs"
    # A fresh run: stale logs or artifacts of an earlier run must not be mistaken for this one's
    # (run_dir checked that none of these leads outside out_dir).
    for stale in RUN_FOLDERS:
        shutil.rmtree(out_dir / stale, ignore_errors=True)
    for stale_file in RUN_FILES:
        (out_dir / stale_file).unlink(missing_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    (out_dir / "tmp").mkdir()
    scale = resolve_cpu_scale(plan, options)
    worker_cores = cpu.local_cores(plan.memory_mb, scale)
    margin_s = options.safety_margin_s
    if margin_s is None:
        margin_s = default_safety_margin_s(options.invocation_limit_s)
    dataset_bucket = bucket_name(plan.job, "dataset")
    artifacts_bucket = bucket_name(plan.job, "artifacts")
    secret = options.ps_secret or secrets.token_hex(32)  # a fresh PS secret per run
    # What AWS would run: the plan's stacks synthesized, the state machine's definition read.
    bound = links_bound_for_limit(plan, options.invocation_limit_s, margin_s)
    try:
        definition = training_definition(
            dataclasses.replace(plan, max_links_per_worker=bound), dataset_source(plan)
        )
    except SynthFailed as err:
        raise EmulatorError(str(err)) from None
    supervisor = Supervisor()
    cgroups.remove_stale_groups("lambda-dnn-emu")
    limiter = cpu.CpuLimiter(f"lambda-dnn-emu-{os.getpid()}")

    def say(message: str) -> None:
        if not options.quiet:
            print(message, file=sys.stderr)

    say(limiter.status())
    say(
        f"CPU scale: {scale:.3f} local cores per Lambda vCPU -> {worker_cores:.3f} cores per "
        f"worker of {plan.memory_mb} MB ({plan.n_workers} workers on {cpu.machine_cores():.0f})"
    )
    throttled: dict[str, float] = {}
    server = (
        contextlib.nullcontext(endpoint) if endpoint else s3_server(options.s3, log_dir=logs / "s3")
    )
    with (
        supervisor.guard(),
        limiter,
        server as endpoint,
        supervisor.stopping(),
        naming_a_dead_server(endpoint),
    ):
        say(f"S3 ({endpoint.kind}) at {endpoint.url}")
        env = child_env(endpoint, secret, tmp_dir=out_dir / "tmp")
        create_buckets(endpoint, [dataset_bucket, artifacts_bucket])
        upload_local_dataset(endpoint, plan, dataset_bucket)
        say(f"run {run[0]}")
        progress = (
            None if options.quiet else ProgressBar(plan.training.iterations, plan.goal.deadline_s)
        )
        run_timeout_s = options.run_timeout_s or default_run_timeout_s(plan, options)
        placements = Placements(limiter.place, scale)
        for s, r in stage_keys(plan):  # the plan's own groups, made before any worker starts
            placements.get(worker_label(r, s), worker_memory_mb(plan, s), worker_memory_mb(plan, s))
        local = LocalRun(
            supervisor=supervisor,
            # the bound the definition enforces, so a re-plan's pace check fits its links in it
            plan=dataclasses.replace(plan, max_links_per_worker=bound),
            options=options,
            env=env,
            logs=logs,
            buckets={"dataset": dataset_bucket, "artifacts": artifacts_bucket},
            worker_event_extra=worker_rules(plan, options, margin_s),
            placements=placements,
            read_record=functools.partial(with_losses, s3_client_for(endpoint), artifacts_bucket),
            secret=secret.encode(),
            progress=progress,
            deadline_monotonic_s=time.monotonic() + run_timeout_s,
            say=say,
            cpu_scale=scale,
            profile_document=profile_document(options.workload),
        )
        local.execute(definition, run)
        timings = local.timings
        assert timings.train_started_s is not None and timings.train_ended_s is not None
        train_wall_s = timings.train_ended_s - timings.train_started_s
        throttled = {name: limiter.throttled_s(name) for name in placements.names()}
        # the slots of a plan that re-plans that no segment used ran nothing to report
        workers = [w for w in local.workers if w.links or w.failures]
        shards = local.shards
        prepare_s, ps_start_s, finalize_s = (
            timings.prepare_s, timings.ps_start_s, timings.finalize_s)  # fmt: skip
        finalize_result, ps_update_s = local.finalize_result, timings.ps_update_s
        states = local.top_level_states(definition)
        record = RunRecord(
            plan=plan,
            options=options,
            cpu_scale=scale,
            cpu_status=limiter.status(),
            worker_cores=worker_cores,
            s3_kind=endpoint.kind,
            s3_url=endpoint.url,
            buckets={"dataset": dataset_bucket, "artifacts": artifacts_bucket},
            prepare_s=prepare_s,
            ps_start_s=ps_start_s,
            train_wall_s=train_wall_s,
            finalize_s=finalize_s,
            workers=workers,
            finalize_result=finalize_result,
            out_dir=out_dir,
            throttled_s=throttled,
            child_pids=supervisor.pgids(),
            ps_update_s=ps_update_s,
            ps_restarts=sum(ps.restarts for ps in shards),
            run_id=run[0],
            states=states,
        )
        finish_report(record, endpoint)
    return record
