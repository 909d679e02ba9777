"""Run a job on one machine: the S3 server, the CPU limits, the PS processes, the workers'
execution environments, and the synthesized state machine that drives them.

`run` synthesizes the plan's training state machine (emulator/definition.py) and executes it
(emulator/state_machine.py): the order, retries, progress and link bounds, and the failure path
are the definition's, the one `cdk deploy` ships. This module holds the local parts the tasks
use: the worker pool (warm environments, attempts, records), the PS shards (started with the
EC2 command line, restarted like Docker restarts them), the run record. `fan_out` is the bare
re-invocation loop, without a state machine, for the supervision tests. Every wait has a
deadline, and every child is killed on the way out, whatever the way out is.
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
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.invocation import (
    Environment,
    Invocation,
    Outcome,
    poll,
    start_environment,
    submit,
)
from emulator.naming import RUN_FILES, RUN_FOLDERS, SECRET_ENV, bucket_name, run_dir
from emulator.procs import Interrupted, Supervisor, wait_for_log_line
from emulator.progress import ProgressBar, logged_loss
from emulator.report import LOCAL_CATALOG, finish_report, s3_client_for
from emulator.run_lock import run_folder_lock
from emulator.s3server import S3Endpoint, s3_server
from emulator.unfinished import unfinished_report, write_report
from functions import ps_health
from functions.aws import S3Unreachable, naming_s3_failures, s3_config
from functions.runs import new_run
from provisioner.plan import Plan
from provisioner.runaway import LINK_RETRIES, max_links
from stacks import events

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER_HANDLER = "functions.worker:handler"
PREPARE_HANDLER = "functions.datasets:prepare_handler"
FINALIZE_HANDLER = "functions.finalize:handler"
STEP_LIMIT_S = 900.0  # prepare and finalize run as ordinary Lambda invocations
PS_READY_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.2
LIVENESS_EVERY_S = 5.0  # between liveness probes of one PS shard
LIVENESS_FAILURES = 3  # probes failed in a row before a live shard process counts as dead


class EmulatorError(RuntimeError):
    """The run could not complete; the message is one line naming what failed. `states`: the
    state machine's top-level states the run went through, when it got that far."""

    states: tuple[str, ...] = ()


@dataclass(frozen=True)
class Options:
    """How to emulate (the plan says what to run)."""

    invocation_limit_s: float = 60.0
    cpu_scale: float | None = None  # local cores per Lambda vCPU; None = fit the machine
    out_dir: Path | None = None  # default runs/<job>
    s3: str = "weed"
    max_attempts: int = 1 + LINK_RETRIES  # per invocation: the first try and the retries
    safety_margin_s: float | None = None  # default: a quarter of the limit, at most 30 s
    run_timeout_s: float | None = None  # whole-run deadline; default from the plan
    worker_handler: str = WORKER_HANDLER
    status_poll_s: float = 2.0
    quiet: bool = False
    kill_grace_s: float = 10.0  # past the limit before a silent invocation is killed
    print_report: bool = True
    warm: bool = True  # reuse a worker's environment for its next link, as Lambda often does
    # End each invocation after this many iterations too (0: only the limit): re-invocation at a
    # chosen iteration whatever the machine's speed (tests, `--iterations-per-invocation`).
    iterations_per_invocation: int = 0
    ps_secret: str | None = None  # the PS handshake and checkpoint HMAC key; default: fresh per run
    # The plan's profile (a name in profiles/ or a path) for the report's predictions; default:
    # the plan's workload name (a profile written elsewhere, e.g. a user's, needs its path).
    workload: str | None = None
    # The catalog the report predicts this machine on (a name in catalog/ or a path): a
    # benchmark round that read some of its figures again (bench.predict) passes its own.
    local_catalog: str = LOCAL_CATALOG


@dataclass
class WorkerState:
    """One worker's chain of invocations (mutable while the run goes on)."""

    rank: int
    event: dict[str, Any]
    attempt: int = 1
    done: bool = False
    current: Invocation | None = None
    environment: Environment | None = None
    links: list[dict[str, Any]] = field(default_factory=list)  # one per successful invocation
    failures: list[str] = field(default_factory=list)
    iteration: int = 0
    stalled: bool = False  # its last link did not advance (the state machine's `$.stalled`)


@dataclass(frozen=True)
class RunRecord:
    """What happened, in the raw: the report module turns it into predicted vs measured."""

    plan: Plan
    options: Options
    cpu_scale: float
    cpu_status: str
    worker_cores: float
    s3_kind: str
    s3_url: str
    buckets: dict[str, str]
    prepare_s: float
    ps_start_s: float
    train_wall_s: float
    finalize_s: float
    workers: list[WorkerState]
    finalize_result: dict[str, Any]
    out_dir: Path
    throttled_s: dict[str, float]
    child_pids: list[int]  # every process the run started (all gone when run() returns)
    ps_update_s: float | None = None  # slowest PS shard's total update time (STATUS)
    ps_restarts: int = 0  # PS shard processes that died and were started again
    run_id: str = ""  # the run's checkpoints are under <checkpoint prefix>/<run_id>
    # The synthesized state machine's top-level states in the order the run went through them.
    states: tuple[str, ...] = ()

    @property
    def workload(self) -> str:
        """The profile the report predicts from: the option's, else the plan's name."""
        return self.options.workload or self.plan.workload


def default_safety_margin_s(limit_s: float) -> float:
    """Stop a quarter of the limit early (at most the AWS default of 30 s): room to checkpoint."""
    return min(events.SAFETY_MARGIN_S, 0.25 * limit_s)


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


def child_env(endpoint: S3Endpoint, secret: str, tmp_dir: Path | None = None) -> dict[str, str]:
    """Environment of every child: the S3 endpoint, dummy credentials, the PS secret, and
    `tmp_dir` as TMPDIR (the functions' /tmp, e.g. the shard cache, stays in the run's folder)."""
    env = dict(os.environ)
    if tmp_dir is not None:
        env["TMPDIR"] = str(tmp_dir)
    env.update(endpoint.client_env())
    env[SECRET_ENV] = secret
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run_step(
    supervisor: Supervisor,
    *,
    name: str,
    handler: str,
    event: dict[str, Any],
    env: dict[str, str],
    logs: Path,
    limit_s: float = STEP_LIMIT_S,
    memory_mb: int = 1769,
) -> tuple[dict[str, Any], float]:
    """Run one non-worker Lambda step (prepare, finalize) to completion; (result, seconds)."""
    environment = start_environment(
        supervisor, name=name, handler=handler, memory_mb=memory_mb, work_dir=logs, env=env
    )
    inv = submit(environment, name=name, event=event, limit_s=limit_s, work_dir=logs, one_shot=True)
    while (outcome := poll(supervisor, inv)) is None:
        time.sleep(POLL_INTERVAL_S)
    if not outcome.ok:
        raise EmulatorError(f"{name} step failed: {outcome.error}")
    return outcome.result, outcome.wall_s


@dataclass
class PsShard:
    """One PS shard process; restarted on the same port when it dies (Docker's --restart)."""

    shard: int
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log_path: Path
    endpoint: str = ""
    restarts: int = 0
    failed_probes: int = 0  # liveness probes failed in a row
    next_probe_s: float = 0.0  # monotonic time of the next liveness probe


def start_ps_shards(
    supervisor: Supervisor, plan: Plan, *, env: dict[str, str], artifacts_bucket: str, logs: Path
) -> list[PsShard]:
    """Start every PS shard (the EC2 entry point, bound to 127.0.0.1); wait for each READY."""
    shards = []
    for shard in range(plan.ps_count):
        argv = events.ps_command(
            plan,
            shard=shard,
            secret_ref=f"env:{SECRET_ENV}",
            artifacts_bucket=artifacts_bucket,
            host="127.0.0.1",
            port=0,  # the shard picks a free port and prints it on its READY line
        )
        argv[0] = sys.executable
        log_path = logs / f"ps-{shard}.log"
        proc = supervisor.spawn(argv, env=env, log_path=log_path)
        shards.append(PsShard(shard=shard, argv=argv, proc=proc, log_path=log_path))
    for ps in shards:
        ps.endpoint = _wait_ready(ps)
    return shards


def _wait_ready(ps: PsShard) -> str:
    try:
        return wait_for_log_line(ps.proc, ps.log_path, "READY", PS_READY_TIMEOUT_S)
    except (TimeoutError, RuntimeError) as err:
        message = f"PS shard {ps.shard} did not start: {err}; see {ps.log_path}"
        raise EmulatorError(message) from None


def _unresponsive(ps: PsShard, probe: Callable[[str], ps_health.Probe], every_s: float) -> bool:
    """True once `LIVENESS_FAILURES` probes in a row found the live process not serving (what
    the container health check does on EC2); probes `ps` at most every `every_s` seconds."""
    now_s = time.monotonic()
    if now_s < ps.next_probe_s:
        return False
    ps.next_probe_s = now_s + every_s
    ps.failed_probes = 0 if probe(ps.endpoint).serving else ps.failed_probes + 1
    return ps.failed_probes >= LIVENESS_FAILURES


def restart_dead_shards(
    supervisor: Supervisor,
    shards: list[PsShard],
    *,
    env: dict[str, str],
    logs: Path,
    probe: Callable[[str], ps_health.Probe] = ps_health.probe,
    probe_every_s: float = LIVENESS_EVERY_S,
) -> list[str]:
    """What Docker's `--restart unless-stopped` and the PS health check do on the instance: a
    shard process that exited, or that failed its liveness probe `LIVENESS_FAILURES` times in a
    row, is (killed and) started again on its port; it restores the newest common checkpoint
    and the workers roll the other shards back to it. Returns one note per restart."""
    notes = []
    for ps in shards:
        code = ps.proc.poll()
        if code is None and not _unresponsive(ps, probe, probe_every_s):
            continue
        if code is None:
            code = f"none (alive, {ps.failed_probes} liveness probes failed in a row)"
        supervisor.stop(ps.proc, grace_s=1.0)
        ps.failed_probes = 0
        ps.restarts += 1
        port = ps.endpoint.rsplit(":", 1)[1]
        argv = list(ps.argv)
        argv[argv.index("--port") + 1] = port
        ps.log_path = logs / f"ps-{ps.shard}-restart-{ps.restarts}.log"
        ps.proc = supervisor.spawn(argv, env=env, log_path=ps.log_path)
        ps.endpoint = _wait_ready(ps)
        notes.append(f"PS shard {ps.shard} exited with code {code}; restarted on {ps.endpoint}")
    return notes


def _last_loss(workers: list[WorkerState]) -> float | None:
    """The newest loss of a worker: its live progress line, else its last returned losses."""
    logged = [
        found
        for w in workers
        if w.environment is not None and (found := logged_loss(w.environment.log_path))
    ]
    if logged:
        return max(logged)[1]  # the furthest iteration any worker has logged
    for worker in workers:
        for link in reversed(worker.links):
            losses = link.get("losses") or []
            if losses:
                return float(losses[-1][1])
    return None


class WorkerPool:
    """The workers' execution environments and their invocations: a link is launched (in the
    rank's warm environment when there is one), polled, and its outcome recorded. Both ways of
    running the workers use it: `fan_out` (a bare loop, for the supervision tests) and the
    state machine's RunWorker task (emulator/state_machine.py). Calls may come from several
    threads: one lock serialises everything that touches the supervisor."""

    def __init__(
        self,
        supervisor: Supervisor,
        plan: Plan,
        options: Options,
        *,
        env: dict[str, str],
        logs: Path,
        placements: list[cpu.Placement],
        read_record: Callable[[dict[str, Any]], dict[str, Any]] = dict,
    ) -> None:
        self.supervisor, self.plan, self.options = supervisor, plan, options
        self.env, self.logs, self.placements = env, logs, placements
        self.read_record = read_record
        self.lock = threading.RLock()

    def launch(self, worker: WorkerState) -> None:
        """Submit the worker's current event; start (or reuse) its environment."""
        with self.lock:
            link = int(worker.event.get("invocation", 0))
            name = f"worker-{worker.rank}-link-{link}-try-{worker.attempt}"
            env = worker.environment
            if not (self.options.warm and env is not None and env.alive):
                if env is not None:
                    self.supervisor.stop(env.proc, grace_s=2.0)
                worker.environment = start_environment(
                    self.supervisor,
                    name=f"worker-{worker.rank}-env-{link}-{worker.attempt}",
                    handler=self.options.worker_handler,
                    memory_mb=self.plan.memory_mb,
                    work_dir=self.logs,
                    env=self.env,
                    placement=self.placements[worker.rank],
                )
            assert worker.environment is not None
            worker.current = submit(
                worker.environment,
                name=name,
                event=worker.event,
                limit_s=self.options.invocation_limit_s,
                work_dir=self.logs,
                kill_grace_s=self.options.kill_grace_s,
            )

    def poll(self, worker: WorkerState) -> Outcome | None:
        with self.lock:
            assert worker.current is not None
            return poll(self.supervisor, worker.current)

    def record(self, worker: WorkerState, outcome: Outcome) -> dict[str, Any] | None:
        """The link's result as the handler returned it once recorded, or None after a failed
        attempt that may be retried; EmulatorError once the worker is out of attempts.

        Only the handler's return value goes back to the caller (the state machine, which holds
        it to the 256 KiB payload limit); what the emulator reads for its report (every loss
        and step time, tens of bytes an iteration) stays in `worker.links`, beside the payload.
        """
        if not outcome.ok:
            self._failed(worker, outcome)
            return None
        # The record is read from S3 outside the lock: under BSP the n workers' links end
        # together, and read in turn under it, each read held back every other worker's poll
        # and re-invocation, a wait AWS's independent Map iterations do not have.
        result = outcome.result
        recorded = self.read_record(result)
        with self.lock:
            worker.current = None
            worker.links.append(
                {**recorded, "wall_s": outcome.wall_s, "attempt": worker.attempt,
                 "cold": outcome.cold}
            )  # fmt: skip
            worker.iteration = int(result.get("iteration", worker.iteration))
            worker.attempt = 1
            if result.get("done"):
                worker.done = True
                self.stop(worker)
            return result

    def _failed(self, worker: WorkerState, outcome: Outcome) -> None:
        """Count a failed attempt; EmulatorError once the worker is out of attempts."""
        with self.lock:
            worker.current = None
            worker.failures.append(outcome.error)
            if worker.attempt >= self.options.max_attempts:
                raise EmulatorError(
                    f"worker {worker.rank} failed {worker.attempt} times; last: {outcome.error}"
                )
            worker.attempt += 1

    def stop(self, worker: WorkerState) -> None:
        """End the worker's environment (and with it an invocation in flight)."""
        with self.lock:
            if worker.environment is not None:
                self.supervisor.stop(worker.environment.proc, grace_s=2.0)


def no_progress_message(worker: WorkerState, event: dict[str, Any],
                        result: dict[str, Any]) -> str:  # fmt: skip
    return (
        f"worker {worker.rank}: link {event.get('invocation', 0)} made no progress (stopped at "
        f"iteration {result.get('iteration')}: {result.get('stopped')})"
    )


def stall_failure(worker: WorkerState, event: dict[str, Any],
                  result: dict[str, Any]) -> str | None:  # fmt: skip
    """The state machine's rule (stacks/orchestration.py), with the worker's `stalled` mark
    kept up to date: a link that does not advance is re-invoked once (a cold link may spend its
    whole budget starting and loading; the warm one after it skips both), and a second in a
    row fails the run (the message returned) rather than re-invoking forever."""
    if advanced(event, result["next_event"]):
        worker.stalled = False
        return None
    if worker.stalled:
        return (f"{no_progress_message(worker, event, result)}, the second link in a row to "
                "make none; the run fails instead of re-invoking forever")  # fmt: skip
    worker.stalled = True
    return None


def fan_out(
    supervisor: Supervisor,
    plan: Plan,
    options: Options,
    *,
    first_events: list[dict[str, Any]],
    env: dict[str, str],
    logs: Path,
    placements: list[cpu.Placement],
    status: Callable[[], int | None],
    progress: ProgressBar | None,
    deadline_monotonic_s: float,
    keep_ps_alive: Callable[[], list[str]] = list,
    read_record: Callable[[dict[str, Any]], dict[str, Any]] = dict,
) -> list[WorkerState]:
    """Invoke every worker and re-invoke each until it returns done; retry failed invocations.
    The loop the state machine's Map plays in AWS, without the state machine (tests)."""
    workers = [WorkerState(rank=r, event=e) for r, e in enumerate(first_events)]
    pool = WorkerPool(supervisor, plan, options, env=env, logs=logs, placements=placements,
                      read_record=read_record)  # fmt: skip

    def note(message: str) -> None:
        if progress is not None:
            progress.note(message)

    def settle(worker: WorkerState, outcome: Outcome) -> None:
        event = worker.event
        result = pool.record(worker, outcome)
        if result is None:
            note(f"worker {worker.rank}: {outcome.error}; retry {worker.attempt}/"
                 f"{options.max_attempts}")  # fmt: skip
            pool.launch(worker)
            return
        if worker.done:
            return
        if failure := stall_failure(worker, event, result):
            raise EmulatorError(failure)
        worker.event = dict(result["next_event"])
        note(relaunch_note(worker, event, result))
        pool.launch(worker)

    started_s = time.monotonic()
    for worker in workers:
        pool.launch(worker)
    last_status_s = -1e9
    live_iteration = 0
    while not all(w.done for w in workers):
        if time.monotonic() > deadline_monotonic_s:
            raise EmulatorError(
                f"run timeout: training not done after {time.monotonic() - started_s:.0f} s "
                f"(workers at iterations {[w.iteration for w in workers]})"
            )
        for message in keep_ps_alive():
            note(message)
        for worker in workers:
            if worker.current is not None and (outcome := pool.poll(worker)):
                settle(worker, outcome)
        now = time.monotonic()
        if progress is not None and now - last_status_s >= options.status_poll_s:
            last_status_s = now
            live = status()
            reported = min(w.iteration for w in workers)
            live_iteration = max(live_iteration, reported, live if live is not None else 0)
            progress.update(live_iteration, _last_loss(workers), now - started_s)
        time.sleep(POLL_INTERVAL_S)
    if progress is not None:
        progress.update(
            plan.training.iterations, _last_loss(workers), time.monotonic() - started_s, force=True
        )
        progress.close()
    return workers


def relaunch_note(worker: WorkerState, event: dict[str, Any], result: dict[str, Any]) -> str:
    """What the progress line says as a worker's next link starts."""
    link = result["next_event"].get("invocation")
    if worker.stalled:
        return f"{no_progress_message(worker, event, result)}; re-invoking once (link {link})"
    return (f"worker {worker.rank}: invocation ended at iteration {worker.iteration}, "
            f"re-invoking (link {link})")  # fmt: skip


def advanced(event: dict[str, Any], next_event: dict[str, Any]) -> bool:
    """Whether a link moved `start_iteration` on (stall_failure: what happens when not)."""
    return int(next_event.get("start_iteration", 0)) > int(event.get("start_iteration", 0))


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


def create_buckets(endpoint: S3Endpoint, names: list[str]) -> None:
    """Create the job's buckets (idempotent: an existing bucket of ours is fine)."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint.url,
        aws_access_key_id=endpoint.client_env()["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=endpoint.client_env()["AWS_SECRET_ACCESS_KEY"],
        region_name=endpoint.client_env()["AWS_DEFAULT_REGION"],
        config=s3_config(),
    )
    for name in names:
        try:
            client.create_bucket(Bucket=name)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise
        warm_bucket(client, name)


WARM_KEY = ".emulator-warm"  # written and deleted at once: the bucket holds nothing of it after


def warm_bucket(client: Any, bucket: str) -> None:
    """Write and delete one object so the bucket's first real write is as fast as any other.

    SeaweedFS grows a volume for a bucket on its first write: 0.21 s against 4 ms for the next
    (measured, 100 kB PUTs into three fresh buckets). S3 has no such cost, and here it fell on
    the PS's iteration-0 checkpoint, inside every worker's start-up (0.21 of its 0.23 s sync).
    """
    client.put_object(Bucket=bucket, Key=WARM_KEY, Body=b"")
    client.delete_object(Bucket=bucket, Key=WARM_KEY)


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
    from emulator.definition import dataset_of  # noqa: PLC0415  # the stacks' own reading
    from stacks.context import LOCAL_SOURCE_PREFIX  # noqa: PLC0415

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
    before the server's block stops it, so the exit is the server's own)."""
    try:
        yield
    except (EmulatorError, S3Unreachable) as err:
        note = endpoint.exit_note()
        if note is None:
            raise
        failed = EmulatorError(f"{err}; {note}")
        failed.states = getattr(err, "states", ())
        raise failed from None


def resolve_cpu_scale(plan: Plan, options: Options) -> float:
    """--cpu-scale if given; 1.0 for a plan made on the local catalog, whose vCPU is one local
    core, so it runs as planned; else the factor that fits the plan's cores to the machine."""
    if options.cpu_scale is not None:
        return options.cpu_scale
    if plan.catalog == LOCAL_CATALOG:
        return 1.0
    return cpu.default_cpu_scale(plan.n_workers, plan.memory_mb, cpu.machine_cores())


def run(plan: Plan, options: Options, endpoint: S3Endpoint | None = None) -> RunRecord:
    """Emulate the whole job; returns the raw record (raises EmulatorError on failure).

    With `endpoint`, that running S3 server is used (tests share one); otherwise one is started
    for the run and stopped with it. A failed run still leaves a report.json saying what failed.
    A run folder another run holds is refused (emulator.run_lock.RunFolderBusy).
    """
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
    from emulator.definition import SynthFailed, training_definition  # noqa: PLC0415
    from emulator.state_machine import LocalRun  # noqa: PLC0415  # it imports this module

    # What AWS would run: the plan's stacks synthesized, the state machine's definition read.
    bound = links_bound_for_limit(plan, options.invocation_limit_s, margin_s)
    try:
        definition = training_definition(
            dataclasses.replace(plan, max_links_per_worker=bound), dataset_source(plan)
        )
    except SynthFailed as err:
        raise EmulatorError(str(err)) from None
    supervisor = Supervisor()
    cpu.remove_stale_groups("lambda-dnn-emu")
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
        local = LocalRun(
            supervisor=supervisor,
            plan=plan,
            options=options,
            env=env,
            logs=logs,
            buckets={"dataset": dataset_bucket, "artifacts": artifacts_bucket},
            worker_event_extra={
                "safety_margin_s": margin_s,
                "iterations_per_invocation": options.iterations_per_invocation,
            },
            placements=[limiter.place(f"worker-{r}", worker_cores) for r in range(plan.n_workers)],
            read_record=functools.partial(with_losses, s3_client_for(endpoint), artifacts_bucket),
            secret=secret.encode(),
            progress=progress,
            deadline_monotonic_s=time.monotonic() + run_timeout_s,
            say=say,
        )
        local.execute(definition, run)
        timings = local.timings
        assert timings.train_started_s is not None and timings.train_ended_s is not None
        train_wall_s = timings.train_ended_s - timings.train_started_s
        throttled = {
            f"worker-{r}": limiter.throttled_s(f"worker-{r}") for r in range(plan.n_workers)
        }
        workers, shards = local.workers, local.shards
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
