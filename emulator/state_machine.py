"""The synthesized training state machine, run on this machine: what `cdk deploy` ships is what
the emulator runs (emulator/definition.py makes the definition, emulator/asl.py interprets it).

Each Task the definition has is dispatched to its local counterpart:
- `lambda:run-network` (open/close the run's interface endpoints): there is no VPC here, so it
  opens nothing and says so in its result;
- `ec2:startInstances` / `stopInstances`: start the PS shard processes (the EC2 entry point on
  127.0.0.1) / stop them; the PS hosts in the definition are mapped to their local ports;
- `lambda:prepare`, `lambda:finalize`: one-shot local invocations of the real handlers;
- `lambda:ps-wait`: the real `functions.ps_health.wait_handler` against the local shards;
- `lambda:worker`: one link of one worker, in the rank's (warm) environment, held to its CPU
  share and the emulated invocation limit (emulator.workers.WorkerPool). The Map runs
  the n workers at once, each in its own thread, and the definition's Choice decides whether a
  worker is done, fails for making no progress or past its link cap, or is invoked again. In a
  plan that re-plans the Map runs one link of each of the segment's n workers (its event's
  `n_workers`, up to the envelope's most) at the event's `memory_mb` (its CPU share);
- `lambda:pace`: the pace check between two such Maps, `functions.pace.handler` in this
  process on the run's local S3 and the training clock (emulator/pace.py).
The definition's Retry intervals are scaled like the invocation limit (limit / 900 s), and so
is its bound on a worker's links (orchestrator.links_bound_for_limit). The run
timeout is the emulator's (the definition's is sized for 900 s links), and so are the names of
the buckets; the events are the definition's otherwise, plus the emulator's two rules
(`safety_margin_s`, `iterations_per_invocation`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.asl import Interpreter, StatesError
from emulator.definition import ps_host
from emulator.invocation import poll, start_environment, submit
from emulator.lambda_context import CountdownContext
from emulator.options import (
    FINALIZE_HANDLER,
    POLL_INTERVAL_S,
    PREPARE_HANDLER,
    STEP_LIMIT_S,
    Options,
)
from emulator.pace import local_bundle, on_training_clock, pace_note, run_pace, segment_cap
from emulator.placements import Placements
from emulator.procs import Supervisor
from emulator.progress import ProgressBar
from emulator.ps_shards import PsShard, restart_dead_shards, start_ps_shards
from emulator.ps_status import current_iteration, update_seconds
from emulator.records import (
    EmulatorError,
    WorkerState,
    event_stage,
    segment_workers,
    worker_index,
    worker_slots,
)
from emulator.workers import WorkerPool, last_loss, relaunch_note, stall_failure
from functions import ps_health
from functions.aws import S3Unreachable
from provisioner.plan import Plan
from stacks.events import PS_PORT

INVOKE = "arn:aws:states:::lambda:invoke"
PACE = "lambda:pace"  # PaceCheck calls its function directly (the payload is its result)
EC2 = "arn:aws:states:::aws-sdk:ec2:"
AWS_LINK_LIMIT_S = 900.0  # the definition's Retry intervals are for 900 s links
# Not retried by the definition (its Retry names States.TaskFailed), caught by its Catch.
LOCAL_FAILURE = "Emulator.Failed"


@dataclass
class Timings:
    prepare_s: float = 0.0
    ps_start_s: float = 0.0
    finalize_s: float = 0.0
    train_started_s: float | None = None  # monotonic, the first worker's launch
    train_ended_s: float | None = None  # monotonic, the last worker done
    ps_update_s: float | None = None


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
class LocalRun:
    """The task table of one execution and what it recorded."""

    supervisor: Supervisor
    plan: Plan
    options: Options
    env: dict[str, str]
    logs: Path
    buckets: dict[str, str]  # "dataset" / "artifacts" → the local bucket name
    worker_event_extra: dict[str, Any]  # the emulator's rules, added to every worker event
    placements: list[cpu.Placement] | Placements
    read_record: Callable[[dict[str, Any]], dict[str, Any]]
    secret: bytes  # the PS handshake key (STATUS requests)
    progress: ProgressBar | None
    deadline_monotonic_s: float
    say: Callable[[str], None]
    workers: list[WorkerState] = field(default_factory=list)
    shards: list[PsShard] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    finalize_result: dict[str, Any] = field(default_factory=dict)
    failure: str = ""  # the first local failure, in the emulator's words
    _tick_lock: threading.Lock = field(default_factory=threading.Lock)
    _last_status_s: float = -1e9
    _live_iteration: int = 0
    _done_seen_s: float = 0.0  # monotonic: the latest final result seen so far
    cpu_scale: float = 1.0  # local cores per Lambda vCPU (the pace check's platform)
    # the profile the plan was made from as a document (`--workload`), for the pace check
    profile_document: dict[str, Any] | None = None
    # A plan that re-plans: the workers the segment that runs now has (its events' n_workers)
    _segment_n: int | None = None

    def __post_init__(self) -> None:
        self.workers = [WorkerState(rank=r, event={}, stage=s) for s, r in worker_slots(self.plan)]
        self.pool = WorkerPool(self.supervisor, self.plan, self.options, env=self.env,
                               logs=self.logs, placements=self.placements,
                               read_record=self.read_record)  # fmt: skip
        self.interpreter: Interpreter | None = None

    # -- the execution -------------------------------------------------------------------------
    def execute(self, definition: dict[str, Any], run: tuple[str, str]) -> None:
        """Run the definition as execution `run` (name, start); EmulatorError when it fails."""
        scale = self.options.invocation_limit_s / AWS_LINK_LIMIT_S
        self.interpreter = Interpreter(definition, self.tasks(),
                                       sleep=lambda s: time.sleep(s * scale))  # fmt: skip
        try:
            self.interpreter.run({}, name=run[0], start_time=run[1])
        except StatesError as err:
            failed = EmulatorError(self.failure or self._worker_failure() or
                                   f"{err.error}: {err.cause}{self._first_caught()}")  # fmt: skip
            failed.states = self.top_level_states(definition)
            raise failed from None
        finally:
            if self.progress is not None and self.timings.train_ended_s is None:
                self.progress.close()

    def top_level_states(self, definition: dict[str, Any]) -> tuple[str, ...]:
        """The definition's own states the execution went through, in order (a Map's item
        states, interleaved across workers, left out)."""
        assert self.interpreter is not None
        own = set(definition["States"])
        return tuple(s for s in self.interpreter.trace.states if s in own)

    def _first_caught(self) -> str:
        """' (<state> caught <error>: <cause>)' of the first error a Catch handled, else
        ' (<error>: <cause>)' of what the failing state's input held (a guard's), or ''."""
        assert self.interpreter is not None
        if not self.interpreter.trace.caught:
            held = self.interpreter.trace.fail_input
            return "" if held is None else f" ({held[0]}: {held[1]})"
        state, error, cause = self.interpreter.trace.caught[0]
        return f" ({state} caught {error}: {cause})"

    def _worker_failure(self) -> str:
        """A worker out of the definition's retries (before --max-attempts ran out), if any."""
        failing = [w for w in self.workers if w.failures and not w.done]
        if not failing:
            return ""
        worker = max(failing, key=lambda w: len(w.failures))
        last = worker.failures[-1]
        return f"worker {worker.label} failed {len(worker.failures)} times; last: {last}"

    def tasks(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {
            INVOKE: self.invoke,
            PACE: self.pace_task,
            f"{EC2}startInstances": self.start_ps,
            f"{EC2}stopInstances": self.stop_ps,
        }

    def _fail(self, message: str) -> StatesError:
        """Remember the first local failure; an error the definition catches, not retries."""
        self.failure = self.failure or message
        return StatesError(LOCAL_FAILURE, message)

    # -- tasks ---------------------------------------------------------------------------------
    def invoke(self, params: dict[str, Any]) -> dict[str, Any]:
        role = str(params["FunctionName"]).removeprefix("lambda:")
        event = self._localize(dict(params["Payload"]))
        try:
            if role == "worker":
                payload = self.run_worker(event)
            elif role == "run-network":
                payload = {"endpoints": [], "services": [],
                           "local": "no VPC here: nothing to open or close"}  # fmt: skip
            elif role == "ps-wait":
                payload = ps_health.wait_handler(event, CountdownContext(limit_s=STEP_LIMIT_S))
            elif role == "prepare":
                self.say(f"prepare: sharding {self.plan.training.dataset} into "
                         f"s3://{event['dataset_bucket']}/{event['dataset_prefix']}")  # fmt: skip
                payload = self._step("prepare", PREPARE_HANDLER, event)
            elif role == "finalize":
                source = "PS shards" if self.plan.sync == "ps" else "reducers' checkpoints"
                self.say(f"finalize: assembling the model from the {source}")
                payload = self._step("finalize", FINALIZE_HANDLER, event)
            else:
                raise self._fail(f"the definition invokes an unknown function {role!r}")
        except (EmulatorError, S3Unreachable) as err:
            raise self._fail(str(err)) from None
        return {"StatusCode": 200, "Payload": payload}

    def _step(self, name: str, handler: str, event: dict[str, Any]) -> dict[str, Any]:
        result, seconds = run_step(self.supervisor, name=name, handler=handler, event=event,
                                   env=self.env, logs=self.logs)  # fmt: skip
        if name == "prepare":
            self.timings.prepare_s = seconds
        else:
            self.timings.finalize_s, self.finalize_result = seconds, result
        return result

    def start_ps(self, _params: dict[str, Any]) -> dict[str, Any]:
        """The PS processes stand for the instances: started once, kept alive by `_tick`."""
        if not self.shards:
            started = time.monotonic()
            self.shards = start_ps_shards(self.supervisor, self.plan, env=self.env,
                                          artifacts_bucket=self.buckets["artifacts"],
                                          logs=self.logs)  # fmt: skip
            self.timings.ps_start_s = time.monotonic() - started
            endpoints = ", ".join(ps.endpoint for ps in self.shards)
            self.say(f"PS: {self.plan.ps_count} shard(s) at {endpoints}")
        return {}

    def stop_ps(self, _params: dict[str, Any]) -> dict[str, Any]:
        if self.shards and self.timings.ps_update_s is None:
            self.timings.ps_update_s = update_seconds(
                self.endpoints, job_id=self.plan.job, secret=self.secret
            )
        for ps in self.shards:
            self.supervisor.stop(ps.proc, grace_s=5.0)
        return {}

    @property
    def endpoints(self) -> list[str]:
        return [ps.endpoint for ps in self.shards]

    def pace_task(self, params: dict[str, Any]) -> dict[str, Any]:
        """PaceCheck: the pace function's result is the new `$.pace` (no Payload around it)."""
        try:
            return self.run_pace(self._localize(dict(params)))
        except (EmulatorError, S3Unreachable) as err:
            raise self._fail(str(err)) from None
        except Exception as err:  # noqa: BLE001  # a handler's error fails the run in one line
            raise self._fail(f"pace check failed: {type(err).__name__}: {err}") from None

    def run_pace(self, event: dict[str, Any]) -> dict[str, Any]:
        """The pace check between two links of a run that re-plans, on the training clock."""
        started = self.timings.train_started_s
        elapsed_s = 0.0 if started is None else time.monotonic() - started
        event = local_bundle(
            on_training_clock(event, elapsed_s),
            cpu_scale=self.cpu_scale,
            limit_s=self.options.invocation_limit_s,
            margin_s=float(self.worker_event_extra.get("safety_margin_s", 0.0)),
            profile=self.profile_document,
            plan=self.plan.to_dict(),
        )
        if self.options.pace_hook is not None:  # tests: what the check sees, fixed
            event = self.options.pace_hook(event)
        pace = run_pace(event, self.env)
        if note := pace_note(event.get("pace") or {}, pace):
            self._note(note)
        return pace

    @property
    def segment(self) -> list[WorkerState]:
        """The workers of the segment that runs now (all of them in a plan that does not
        re-plan)."""
        return segment_workers(self.workers, self._segment_n)

    # -- one worker link -----------------------------------------------------------------------
    def run_worker(self, event: dict[str, Any]) -> dict[str, Any]:
        worker = self.workers[worker_index(self.plan, event_stage(event), int(event["rank"]))]
        worker.event = {**event, **self.worker_event_extra}
        if self.plan.replan is not None:
            self._segment_n = int(event.get("n_workers", self.plan.n_workers))
            worker.event["iterations_per_invocation"] = segment_cap(event, self.worker_event_extra)
        if self.timings.train_started_s is None:
            self.timings.train_started_s = time.monotonic()
        self.pool.launch(worker)
        while (outcome := self.pool.poll(worker)) is None:
            self._check_running(worker)
            self._tick()
            time.sleep(POLL_INTERVAL_S)
        # The run's training ends when the last worker's final result is seen, as a Map state
        # completes on AWS: not after the emulator reads the link's record from S3 for the
        # report and stops the worker's environment (record), which AWS has no counterpart of.
        seen_s = time.monotonic()
        result = self.pool.record(worker, outcome)
        if result is None:
            self._note(f"worker {worker.label}: {outcome.error}; retrying")
            raise RuntimeError(outcome.error)  # States.TaskFailed: the definition retries
        if worker.done:
            # threads record in any order: the end is the latest final result seen
            self._done_seen_s = max(self._done_seen_s, seen_s)
            if all(w.done for w in self.segment):
                self._training_ended(self._done_seen_s)
        elif failure := stall_failure(worker, worker.event, result):
            self.failure = self.failure or failure  # the definition fails it too; this names why
        else:
            self._note(relaunch_note(worker, worker.event, result))
        return result

    def _check_running(self, worker: WorkerState) -> None:
        """Stop this worker's link when the run is over for another reason."""
        assert self.interpreter is not None
        if self.interpreter.abort.is_set():
            self.pool.stop(worker)
            raise StatesError(LOCAL_FAILURE, "stopped: another worker's failure ended the Map")
        if time.monotonic() > self.deadline_monotonic_s:
            self.pool.stop(worker)
            started = self.timings.train_started_s or time.monotonic()
            raise self._fail(
                f"run timeout: training not done after {time.monotonic() - started:.0f} s "
                f"(workers at iterations {[w.iteration for w in self.segment]})"
            )

    def _tick(self) -> None:
        """Keep the PS alive and the progress bar current; one thread at a time does it."""
        if not self._tick_lock.acquire(blocking=False):
            return
        try:
            with self.pool.lock:
                notes = restart_dead_shards(self.supervisor, self.shards, env=self.env,
                                            logs=self.logs)  # fmt: skip
            for message in notes:
                self._note(message)
            now = time.monotonic()
            if self.progress is None or now - self._last_status_s < self.options.status_poll_s:
                return
            self._last_status_s = now
            # the PS knows the live iteration; an S3-sync run has none: its links report it
            live = current_iteration(self.endpoints[0], job_id=self.plan.job,
                                     shards=self.plan.ps_count,
                                     secret=self.secret) if self.shards else None  # fmt: skip
            reported = min(w.iteration for w in self.segment)
            self._live_iteration = max(self._live_iteration, reported, live or 0)
            started = self.timings.train_started_s or now
            self.progress.update(self._live_iteration, last_loss(self.segment), now - started)
        finally:
            self._tick_lock.release()

    def _training_ended(self, seen_s: float) -> None:
        self.timings.train_ended_s = seen_s
        if self.progress is not None:
            started = self.timings.train_started_s or self.timings.train_ended_s
            self.progress.update(self.plan.training.iterations, last_loss(self.segment),
                                 self.timings.train_ended_s - started, force=True)  # fmt: skip
            self.progress.close()

    def _note(self, message: str) -> None:
        if self.progress is not None:
            self.progress.note(message)

    # -- names -----------------------------------------------------------------------------------
    def _localize(self, event: dict[str, Any]) -> dict[str, Any]:
        """The definition's event with this machine's bucket names and PS addresses."""
        ours = f"s3://{event.get('dataset_bucket')}/"
        if str(event.get("source", "")).startswith(ours):  # a user's dataset, uploaded to ours
            event["source"] = f"s3://{self.buckets['dataset']}/" + event["source"][len(ours) :]
        for key, kind in (("dataset_bucket", "dataset"), ("artifacts_bucket", "artifacts")):
            if key in event:
                event[key] = self.buckets[kind]
        if "ps_endpoints" in event:
            local = {f"{ps_host(ps.name)}:{PS_PORT}": ps.endpoint for ps in self.shards}
            event["ps_endpoints"] = [local.get(e, e) for e in event["ps_endpoints"]]
        return event
