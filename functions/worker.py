"""The worker Lambda handler: compute gradients on the local batch, push, pull, repeat.

`handler(event, context)` parses the event once into a WorkerTask, loads this rank's shard,
builds the model, syncs through the event's exchange (functions.exchange: the PS shards, or S3
objects in sync mode "s3", functions.s3sync), adopting *its* iteration (the shared state is the
source of truth, so a re-invoked or killed-and-restarted worker never skips or repeats an
update) and runs BSP iterations until the job is done or the invocation's remaining time
drops below the safety margin plus one iteration. It returns how far it got and the event for
the next chain link. An event with a `stage` (a pipelined plan) runs the same loop over the
stage's parameters, its step functions.pipeline's GPipe step.
"""

from __future__ import annotations

import time

_MODULE_START = time.perf_counter()

from functions.allocator import keep_freed_memory  # noqa: E402

# Before anything allocates much: a step's memory is reused, not mapped afresh (functions.allocator)
ALLOCATOR = keep_freed_memory()

import json  # noqa: E402
import logging  # noqa: E402  # the import time of torch is part of the cold start we report
import os  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from functions import datasets, models, pipeline, wire  # noqa: E402
from functions.aws import naming_s3_failures, remaining_s, resolve_secret, s3_client  # noqa: E402
from functions.exchange import (  # noqa: E402
    Exchange,
    PSExchange,
    PSInconsistent,  # noqa: E402, F401  # re-exported: callers catch it here
)
from functions.ps_client import PSClient  # noqa: E402
from functions.runs import link_record_key  # noqa: E402
from functions.s3sync import S3Exchange  # noqa: E402
from functions.task import WorkerTask  # noqa: E402

IMPORT_S = time.perf_counter() - _MODULE_START
LOG = logging.getLogger("functions.worker")
VCPU_MEMORY_MB = 1769  # Lambda: 1,769 MB buys one vCPU of CPU time
S3_CALLS_TO_LOAD = 3  # manifest GET, shard HEAD + GET
_cold = True


def torch_threads(memory_mb: int) -> int:
    """Threads for the CPU share memory buys (not the visible cores), at least 1."""
    return max(1, min(int(memory_mb // VCPU_MEMORY_MB), os.cpu_count() or 1))


@dataclass
class Timings:
    """Seconds spent per phase in this invocation (the terms of the performance model)."""

    import_s: float = 0.0  # `import torch` etc., only on a cold start
    load_s: float = 0.0  # manifest + shard from S3 (or the /tmp cache)
    build_s: float = 0.0  # model construction
    sync_s: float = 0.0  # connect, handshake, initial pull
    compute_s: float = 0.0  # forward + backward
    push_s: float = 0.0
    pull_transfer_s: float = 0.0
    wait_s: float = 0.0  # pull time before the first byte: waiting for the slowest worker
    first_wait_s: float = 0.0  # the first iteration's wait: for the peers' start-up (in wait_s)
    reduce_s: float = 0.0  # s3 mode, reducers: averaging, update, state upload and clean-up
    checkpoint_s: float = 0.0
    total_s: float = 0.0
    # The process's CPU seconds in the training loop (compute, the exchange's own CPU and the
    # loop's bookkeeping): under a CPU share this, not the wall time, is what the quota holds.
    train_cpu_s: float = 0.0
    # The process's CPU seconds before the handler (a cold link's init: the imports) and in the
    # handler before the loop (load, model build, PS sync): with train_cpu_s, what each phase
    # asked of the cores, where n processes share them (the local platform)
    init_cpu_s: float = 0.0
    setup_cpu_s: float = 0.0
    # The loop's CPU in the kernel (part of train_cpu_s): page faults, syscalls; a cold
    # process's first steps fault in the memory they touch
    train_system_cpu_s: float = 0.0
    # Minor page faults in the training loop: a step that maps fresh memory pays for each
    # (functions.allocator; the report shows them per link).
    train_minor_faults: float = 0.0

    def as_dict(self) -> dict[str, float]:
        out = {k: round(v, 6) for k, v in self.__dict__.items()}
        out["startup_s"] = round(self.import_s + self.build_s + self.sync_s, 6)
        out["communication_s"] = round(self.push_s + self.pull_transfer_s + self.wait_s, 6)
        return out


@dataclass
class _Run:
    task: WorkerTask
    flat: models.FlatModel
    loss_fn: models.LossFn
    exchange: Exchange
    x: np.ndarray
    y: np.ndarray
    timings: Timings = field(default_factory=Timings)
    losses: list[list[float]] = field(default_factory=list)
    iteration_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)  # each step's forward + backward
    logged_s: float = 0.0  # when the last progress line was printed
    stage: pipeline.StageStep | None = None  # a pipelined plan's stage: its GPipe step


PROGRESS_EVERY_S = 2.0  # a progress line this often: readable live in CloudWatch, cheap to store


def progress_line(rank: int, iteration: int, loss: float) -> str:
    """What a worker prints while it trains (CloudWatch in AWS, the environment log here)."""
    return f"progress rank={rank} iteration={iteration} loss={loss:.6f}"


def _resync(run: _Run) -> int:
    """Adopt the iteration the shared state is at (PS shards or S3 objects), with its
    parameters; the time goes to sync_s, its barrier wait included: waiting there is waiting
    for the other workers' cold starts, which is start-up, not communication (it was in both,
    so a run's start-up was counted twice when the report summed the terms)."""
    t0 = time.perf_counter()
    iteration = run.exchange.start(run.flat.params.numpy())
    run.timings.sync_s += time.perf_counter() - t0
    return iteration


def compute_step(run: _Run, iteration: int) -> float:
    """One step's compute: iteration's batch, forward, backward, the gradients flattened; the
    loss. The profiler times this same step (emulator.profiling.child)."""
    task = run.task
    idx = datasets.batch_indices(task.seed, task.rank, iteration, task.local_batch, len(run.x))
    xb, yb = torch.from_numpy(run.x[idx]), torch.from_numpy(run.y[idx])
    run.flat.zero_grad()
    loss = run.loss_fn(run.flat.model(xb), yb)
    loss.backward()
    run.flat.sync_grads()
    return float(loss.detach())


def _step(run: _Run, iteration: int) -> None:
    t0 = time.perf_counter()
    loss = compute_step(run, iteration) if run.stage is None else run.stage.step(iteration)
    t1 = time.perf_counter()
    timing = run.exchange.step(iteration, run.flat.grads.numpy(), run.flat.params.numpy())
    t3 = time.perf_counter()
    # A stage's waits for its peer stages and its boundary transfers are not compute.
    compute_s = t1 - t0 - (run.stage.last_step_boundary_s() if run.stage else 0.0)
    run.timings.compute_s += compute_s
    run.timings.push_s += timing.push_s
    run.timings.wait_s += timing.wait_s
    run.timings.pull_transfer_s += timing.transfer_s
    run.timings.reduce_s += timing.reduce_s
    run.losses.append([iteration, loss])
    # A link's first wait is for its peers' start-up (a newcomer's cold start after a re-plan,
    # a slower environment's import): once a link, not every iteration. It is kept apart
    # (first_wait_s, also in wait_s) and out of the time reserved for the next iteration, or
    # one slow start would end the link after a single iteration.
    once_s = 0.0
    if not run.iteration_s:
        once_s = run.timings.first_wait_s = timing.wait_s
    run.iteration_s.append(t3 - t0 - once_s)
    run.compute_s.append(compute_s)


def next_iteration_estimate_s(recent_s: list[float], window: int = 9) -> float:
    """Time to reserve for one more iteration: twice the median of the last `window`.

    Not the maximum: one iteration that waited for a peer's cold start or re-invocation would
    make every worker stop early for the next few iterations, and the peers would then wait for
    them in turn. The invocation's safety margin covers the tail beyond twice the median.
    """
    if not recent_s:
        return 0.0
    return 2.0 * statistics.median(recent_s[-window:])


def _out_of_time(run: _Run, context: Any) -> bool:
    left_s = remaining_s(context)
    reserve_s = run.task.safety_margin_s + next_iteration_estimate_s(run.iteration_s)
    _hold_waits_to_the_limit(run, left_s)
    return left_s is not None and left_s < reserve_s


def _hold_waits_to_the_limit(run: _Run, left_s: float | None) -> None:
    """A PS wait ends by the invocation's safety margin (a PSTimeout: the link returns). In a
    run that re-plans a Map runs one link of each worker, so a peer whose link ended at its time
    limit comes back only after this link ends: waiting for its gradient would last until the
    invocation is killed, and each retry the same. `left_s`: the invocation's time left (None
    without a Lambda context: no deadline to keep)."""
    client = getattr(run.exchange, "client", None)
    if left_s is None or not isinstance(client, PSClient):
        return
    client.timeout_s = min(run.task.ps_timeout_s, max(1.0, left_s - run.task.safety_margin_s))


def _iteration_cap_reached(run: _Run) -> bool:
    """The event's `iterations_per_invocation` steps are done in this invocation."""
    cap = run.task.iterations_per_invocation
    return cap > 0 and len(run.losses) >= cap


def _train(run: _Run, context: Any) -> tuple[int, str]:
    """The BSP loop; returns (iteration reached, why it stopped)."""
    iteration = _resync(run)  # a peer's rollback may drop this worker's fresh connections
    reconnects = 0
    while iteration < run.task.iterations:
        if _iteration_cap_reached(run):
            return iteration, "iteration_limit"
        if _out_of_time(run, context):
            return iteration, "time_limit"
        try:
            _step(run, iteration)
            iteration += 1
            # Only the last stage of a pipeline sees the loss.
            if (
                run.losses[-1][1] is not None
                and time.monotonic() - run.logged_s >= PROGRESS_EVERY_S
            ):
                run.logged_s = time.monotonic()
                print(progress_line(run.task.rank, iteration, run.losses[-1][1]), flush=True)
        except wire.PSTimeout as exc:
            LOG.warning(
                "rank %d: PS wait timed out at iteration %d: %s", run.task.rank, iteration, exc
            )
            return iteration, "ps_timeout"
        except wire.PSDisconnected as exc:
            reconnects += 1
            if reconnects > 5:
                raise
            LOG.warning(
                "rank %d: PS connection lost at iteration %d (%s); reconnecting",
                run.task.rank,
                iteration,
                exc,
            )
            iteration = _resync(run)
    return iteration, "done"


def s3_budget_s(task: WorkerTask, context: Any) -> float | None:
    """Worst case one S3 call may take, so that loading the data ends before the invocation's
    safety margin even on a dead or stalled S3: the invocation then fails naming S3, instead of
    being killed at its limit. None without a Lambda context (no deadline to keep)."""
    left_s = remaining_s(context)
    return None if left_s is None else max(0.0, left_s - task.safety_margin_s) / S3_CALLS_TO_LOAD


def run_task(task: WorkerTask, context: Any = None) -> dict[str, Any]:
    """One invocation of one worker; the body of `handler`."""
    global _cold
    t_start, cpu_start = time.perf_counter(), time.process_time()
    # a cold link's process CPU before the handler: the runtime's and the module's imports
    timings = Timings(import_s=IMPORT_S if _cold else 0.0, init_cpu_s=cpu_start if _cold else 0.0)
    _cold = False
    torch.set_num_threads(torch_threads(task.memory_mb))

    s3 = s3_client(budget_s=s3_budget_s(task, context))
    manifest = datasets.read_manifest(s3, task.dataset_bucket, task.dataset_prefix)
    x, y = _load_data(s3, task, manifest)
    t_loaded = time.perf_counter()
    timings.load_s = t_loaded - t_start
    model = models.build(task.model, manifest["input_shape"], manifest["classes"], task.seed)
    flat = (
        models.flat_parameters(model)
        if task.stage is None
        else pipeline.stage_flat(model, task.stage)
    )
    timings.build_s = time.perf_counter() - t_loaded

    exchange = make_exchange(task, s3, int(flat.params.numel()))
    loss_fn = models.loss_function(task.model)
    run = _Run(task, flat, loss_fn, exchange, x, y, timings)
    if task.stage is not None:
        run.stage = pipeline.StageStep.for_task(task, s3, flat, loss_fn, x, y)
    try:
        cpu0, (sys0, faults0) = time.process_time(), _kernel_cpu_and_faults()
        timings.setup_cpu_s = cpu0 - cpu_start
        iteration, reason = _train(run, context)
        timings.train_cpu_s = time.process_time() - cpu0
        sys1, faults1 = _kernel_cpu_and_faults()
        timings.train_system_cpu_s, timings.train_minor_faults = sys1 - sys0, faults1 - faults0
        t0 = time.perf_counter()
        exchange.finish(iteration, reason)
        timings.checkpoint_s = time.perf_counter() - t0
        if run.stage is not None:
            run.stage.forget(iteration - 1)  # the link's last iteration is synced: done with it
    finally:
        exchange.close()
        if run.stage is not None:
            run.stage.boundaries.close()
    timings.total_s = time.perf_counter() - t_start
    summary = {
        "done": iteration >= task.iterations,
        "iteration": iteration,
        "next_event": task.next_task(iteration).to_event(),
        "timings": timings.as_dict(),
        "rank": task.rank,
        "invocation": task.invocation,
        "stopped": reason,
        "iterations_run": len(run.losses),
        "loss": run.losses[-1][1] if run.losses else None,
        "torch_threads": torch.get_num_threads(),
        "allocator": ALLOCATOR,
        "parameters": int(flat.params.numel()),
        # the process's peak resident set so far (Lambda's REPORT "Max Memory Used"): what the
        # profile's min_memory_mb must cover, checked against a real link
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    counts = exchange.request_counts()
    if counts is not None:  # measured, for the emulator's report against the cost model
        summary["s3_requests"] = counts
    if run.stage is not None:
        summary["timings"].update(run.stage.timings())
        summary.update(run.stage.summary())
    return {**summary, "record_key": write_link_record(s3, task, {**summary, **_steps_of(run)})}


def _steps_of(run: _Run) -> dict[str, Any]:
    """The link's per-step record: every [iteration, loss] and every step's compute seconds
    (the report shows where a link's compute went: a slow first step, or a slow loop)."""
    steps = {"losses": run.losses, "step_compute_s": [round(s, 6) for s in run.compute_s]}
    return steps if run.stage is None else {**steps, **run.stage.steps()}


def _load_data(
    s3: Any, task: WorkerTask, manifest: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """This rank's shard; none for a pipeline's middle stage, which never reads samples."""
    if task.stage is not None and not pipeline.needs_data(task.stage):
        return np.empty(0, np.float32), np.empty(0, np.int64)
    return datasets.load_shard(
        s3, task.dataset_bucket, task.dataset_prefix, task.rank, manifest, task.ephemeral_storage_mb
    )


def _kernel_cpu_and_faults() -> tuple[float, int]:
    """The process's CPU seconds in the kernel and its minor page faults so far (one read)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_stime, usage.ru_minflt


def peak_rss_mb() -> float:
    """This process's peak resident set in MB (Linux reports ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_exchange(task: WorkerTask, s3: Any, total_params: int) -> Exchange:
    """The event's sync mode: the PS shards, or S3 objects under the exchange prefix."""
    if task.sync == "s3":
        return S3Exchange.for_task(task, s3, total_params)
    client = PSClient(
        task.ps_endpoints,
        task.job_id,
        task.rank,
        resolve_secret(task.secret_ref),
        total_params,
        timeout_s=task.ps_timeout_s,
        learning_rate=task.learning_rate,
        momentum=task.momentum,
        run_id=task.run_id,
        run_started=task.run_started,
        # a one-stage worker names the count its iterations average over (a re-plan may change
        # it; the PS's --workers is the ceiling); a stage's workers keep the PS's own count
        n_workers=task.n_workers if task.stage is None else None,
    )
    return PSExchange(client, task.rank)


def write_link_record(s3: Any, task: WorkerTask, record: dict[str, Any]) -> str:
    """The link's full result (every [iteration, loss]) to S3; returns its key. The return
    value stays a bounded summary whatever the link's length (Step Functions' 256 KiB)."""
    key = link_record_key(task.job_id, task.run_id, task.rank, task.invocation)
    if task.stage is not None:
        key = pipeline.stage_link_record_key(task, task.stage)
    body = json.dumps({k: v for k, v in record.items() if k != "next_event"}).encode()
    s3.put_object(Bucket=task.artifacts_bucket, Key=key, Body=body,
                  ContentType="application/json")  # fmt: skip
    return key


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (CMD functions.worker.handler)."""
    task = WorkerTask.from_event(event)
    with naming_s3_failures():
        return run_task(task, context)
