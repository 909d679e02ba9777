"""The workers' execution environments and their links: the pool that launches, polls and
records each link (in the rank's warm environment when there is one), the state machine's rules
for a link that makes no progress, and `fan_out`, the bare re-invocation loop without a state
machine that the supervision tests drive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.invocation import Outcome, poll, start_environment, submit
from emulator.options import POLL_INTERVAL_S, Options
from emulator.placements import Placements
from emulator.procs import Supervisor
from emulator.progress import ProgressBar, logged_loss
from emulator.records import EmulatorError, WorkerState, worker_index, worker_memory_mb
from provisioner.plan import Plan


def last_loss(workers: list[WorkerState]) -> float | None:
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
        placements: list[cpu.Placement] | Placements,
        read_record: Callable[[dict[str, Any]], dict[str, Any]] = dict,
    ) -> None:
        self.supervisor, self.plan, self.options = supervisor, plan, options
        self.env, self.logs, self.placements = env, logs, placements
        self.read_record = read_record
        self.lock = threading.RLock()

    def link_memory_mb(self, worker: WorkerState) -> int:
        """The memory of the function the worker's link runs in: its event's (a re-plan's
        variant), else its stage's or the plan's."""
        return int(worker.event.get("memory_mb") or worker_memory_mb(self.plan, worker.stage))

    def _placement(self, worker: WorkerState, memory_mb: int) -> cpu.Placement:
        if isinstance(self.placements, Placements):
            plan_mb = worker_memory_mb(self.plan, worker.stage)
            return self.placements.get(worker.label, memory_mb, plan_mb)
        return self.placements[worker_index(self.plan, worker.stage, worker.rank)]

    def launch(self, worker: WorkerState) -> None:
        """Submit the worker's current event; start (or reuse) its environment. A link at
        another memory than the environment's runs in a fresh one: on Lambda it is another
        function (a re-plan's memory variant), whose first invocation starts cold."""
        with self.lock:
            link = int(worker.event.get("invocation", 0))
            name = f"worker-{worker.label}-link-{link}-try-{worker.attempt}"
            env = worker.environment
            memory_mb = self.link_memory_mb(worker)
            reuse = env is not None and env.alive and env.memory_mb == memory_mb
            if not (self.options.warm and reuse):
                if env is not None:
                    self.supervisor.stop(env.proc, grace_s=2.0)
                worker.environment = start_environment(
                    self.supervisor,
                    name=f"worker-{worker.label}-env-{link}-{worker.attempt}",
                    handler=self.options.worker_handler,
                    memory_mb=memory_mb,
                    work_dir=self.logs,
                    env=self.env,
                    placement=self._placement(worker, memory_mb),
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
                 "cold": outcome.cold, "memory_mb": self.link_memory_mb(worker)}
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
                    f"worker {worker.label} failed {worker.attempt} times; last: {outcome.error}"
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
        f"worker {worker.label}: link {event.get('invocation', 0)} made no progress (stopped at "
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
            note(f"worker {worker.label}: {outcome.error}; retry {worker.attempt}/"
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
            progress.update(live_iteration, last_loss(workers), now - started_s)
        time.sleep(POLL_INTERVAL_S)
    if progress is not None:
        progress.update(
            plan.training.iterations, last_loss(workers), time.monotonic() - started_s, force=True
        )
        progress.close()
    return workers


def relaunch_note(worker: WorkerState, event: dict[str, Any], result: dict[str, Any]) -> str:
    """What the progress line says as a worker's next link starts."""
    link = result["next_event"].get("invocation")
    if worker.stalled:
        return f"{no_progress_message(worker, event, result)}; re-invoking once (link {link})"
    return (f"worker {worker.label}: invocation ended at iteration {worker.iteration}, "
            f"re-invoking (link {link})")  # fmt: skip


def advanced(event: dict[str, Any], next_event: dict[str, Any]) -> bool:
    """Whether a link moved `start_iteration` on (stall_failure: what happens when not)."""
    return int(next_event.get("start_iteration", 0)) > int(event.get("start_iteration", 0))
