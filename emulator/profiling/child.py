"""The profiling child: inside its CPU group, it times the worker's own step and prints one JSON
line for the parent (emulator.profiling.children).

Entered through `python -m emulator.profile_child`, which imports the worker module before
anything else, as the emulator's runner does, so the start-up it reports is the worker's own
clock of its import (`functions.worker.IMPORT_S`). It builds the zoo model, loads the dataset
with the runtime's own loader and times forward + backward at the profile's local batch — the
R(m) of λDNN, compute only — then, given a loopback shard, the worker's loop through it, or as
one rank of a crowd, the crowded loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from emulator.naming import SECRET_ENV

WARMUP_ITERATIONS = 10
# The loop through the PS after the step's own warm-up: a few iterations more, then at least
# this many timed (a MobileNetV2 step at 0.25 vCPU takes 2.4 s: the figure matters for short
# steps, which fill the measuring time with thousands)
LOOP_WARMUP_ITERATIONS = 3
LOOP_MIN_ITERATIONS = 5
# The loop's extra CPU is read against back-to-back steps in alternating blocks, each pair
# within a fraction of a second: this machine's speed drifts by 10-25% within minutes, and a
# difference of two means timed seconds apart read 0.85 ms for the digits MLP at 1 vCPU where
# the runs spent 0.2-0.3 ms
LOOP_BLOCKS = 4


def child_main(args: argparse.Namespace) -> int:
    """Inside the CPU group: import, build, time the training step; one JSON line on stdout.
    Entered through emulator.profile_child, which imports the worker first."""
    import torch

    from functions import datasets, models, worker  # the worker: what a cold start imports

    # The worker module's own clock of its import, as a run's worker reports it (the child's
    # entry imported it before anything else, as the runner does).
    imported_s = worker.IMPORT_S
    # Lambda's init phase (the import) runs with burst CPU, as the emulator's runner does; the
    # share holds from the invocation on (emulator.runner.init_phase), so here from the build.
    if args.cpu_group_procs:
        Path(args.cpu_group_procs).write_text(str(os.getpid()))
    torch.set_num_threads(args.threads)
    # Not start-up: the worker reads its shard from S3 (the load term); generating the source
    # here (scikit-learn's digits, synthetic CIFAR) has no counterpart in a worker.
    x, y, _ = datasets.load_source(args.source, seed=0, reader=models.dataset_reader(args.model))
    built_at_s = time.perf_counter()
    model = models.build(args.model, list(x.shape[1:]), int(y.max()) + 1, seed=0)
    flat = models.flat_parameters(model)
    startup_s = imported_s + time.perf_counter() - built_at_s
    # The worker's own step (functions.worker.compute_step: its batch sampling, forward,
    # backward and gradient flattening), not a leaner copy: the MLP's sub-millisecond steps
    # spend a third of their time outside forward + backward.
    run = types.SimpleNamespace(
        task=types.SimpleNamespace(seed=0, rank=0, local_batch=args.batch), flat=flat, x=x, y=y,
        loss_fn=models.loss_function(args.model),
    )  # fmt: skip
    # The first steps of a fresh process run slower (allocator, first kernel calls): timed
    # apart, as the excess CPU over the steady step's, in steady steps (warmup_iterations).
    first_cpu_s = []
    # What the process holds before its first step, less the dataset (a worker holds a shard),
    # and the fresh memory that step faults in: a crowd's first steps on a machine where fresh
    # memory past a line costs more (emulator/calibration/memory_probe.py)
    resident_mb = worker.peak_rss_mb() - (x.nbytes + y.nbytes) / 2**20
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for it in range(WARMUP_ITERATIONS):
        cpu0 = time.process_time()
        worker.compute_step(run, it)
        first_cpu_s.append(time.process_time() - cpu0)
        if it == 0:
            first_step_mb = (
                (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
                * resource.getpagesize() / 2**20
            )  # fmt: skip
    memory = {"resident_mb": round(resident_mb, 1), "first_step_mb": round(first_step_mb, 1)}
    if args.crowd_iterations:
        rank, ranks, run_id, run_started = args.crowd.split(",")
        endpoints = tuple(args.ps_endpoint.split(","))
        crowd = crowded_loop(run, endpoints, int(rank), (run_id, run_started),
                             args.crowd_iterations)  # fmt: skip
        # In a crowd the first steps' wall time is the sharing's; their CPU is what they cost.
        out = {**crowd, "crowded_warmup_cpu_s": warmup_cpu_s(first_cpu_s), "ranks": int(ranks),
               **memory}  # fmt: skip
        print(json.dumps(out))
        return 0
    iterations, t0, cpu0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < args.measure_s or iterations < 20:
        worker.compute_step(run, WARMUP_ITERATIONS + iterations)
        iterations += 1
    elapsed_s = time.perf_counter() - t0
    step_cpu_s = (time.process_time() - cpu0) / iterations
    warmup_iterations = warmup_steps(first_cpu_s, step_cpu_s)
    extra = {}
    if args.ps_endpoint:
        extra_cpu_s, exchange_s = loop_per_iteration_s(run, args.ps_endpoint, args.measure_s)
        extra["loop_extra_cpu_s"] = max(0.0, extra_cpu_s)
        # the name is the profile schema's; the figure is the exchange's own wall (see
        # loop_per_iteration_s for why not the loop's wall less the step's)
        extra["loop_overhead_s"] = exchange_s
    print(
        json.dumps(
            {
                **extra,
                **memory,
                "samples_per_s": iterations * args.batch / elapsed_s,
                "step_cpu_s": step_cpu_s,
                "iterations": iterations,
                "startup_s": startup_s,
                "warmup_iterations": warmup_iterations,
                "threads": torch.get_num_threads(),
                # the whole dataset is in memory, as one worker holds it at n = 1
                "peak_rss_mb": worker.peak_rss_mb(),
            }
        )
    )
    return 0


def warmup_steps(first_cpu_s: list[float], step_cpu_s: float) -> float:
    """The first steps' excess over as many steady steps, in steady steps, read in CPU seconds
    (at least 0). Not their wall: on a busy host the wall holds whatever else ran then, and a
    spell of the host's load during the first ten steps read as warm-up."""
    if step_cpu_s <= 0:
        return 0.0
    return max(0.0, (sum(first_cpu_s) - len(first_cpu_s) * step_cpu_s) / step_cpu_s)


def warmup_cpu_s(steps_cpu_s: list[float]) -> float:
    """The CPU the first steps cost beyond as many steady ones: their sum less as many of the
    median of their second half (back to back like the first ones, so a crowd's loop, where
    every step costs more, is not what they are read against)."""
    steady_s = statistics.median(steps_cpu_s[len(steps_cpu_s) // 2 :])
    return sum(steps_cpu_s) - len(steps_cpu_s) * steady_s


def loop_per_iteration_s(
    run: types.SimpleNamespace, endpoint: str, measure_s: float
) -> tuple[float, float]:
    """(extra CPU, exchange wall) seconds per iteration of the worker's loop: its step, then the
    exchange through a real PS shard on loopback (one worker) with the worker's own PSExchange;
    after LOOP_WARMUP_ITERATIONS such iterations, in LOOP_BLOCKS pairs of blocks (back-to-back
    steps, then loop iterations) of `measure_s` in all and at least LOOP_MIN_ITERATIONS loop
    iterations.

    The extra CPU is the loop's CPU an iteration less the step's back to back in the same pair
    (the median of the pairs): the exchange's own CPU and what interleaving it costs the step.
    Under a CPU quota the loop is more than the back-to-back step plus the exchange's own CPU
    (measured on 2 cores, digits MLP: 0.93 ms at 0.33 vCPU against 0.67 + 0.13 ms), so the
    profile keeps it: it is the worker's step as the local platform runs it.

    The exchange's wall is timed around PSExchange.step itself, as a run's workers time their
    communication (functions.worker._step), and is the mean over every loop iteration: the
    loop's wall less the back-to-back step's, timed apart, is a difference of two means each
    with the machine's drift in it, and read 0.28-1.37 ms for the digits MLP at 1 vCPU in
    three profiles of one day where the runs measured 0.35-0.48 ms."""
    import datetime

    from functions import worker
    from functions.runs import new_run

    params, grads = run.flat.params.numpy(), run.flat.grads.numpy()
    alone_run = new_run(datetime.datetime.now(datetime.UTC), "profile")
    slice_s = measure_s / (2 * LOOP_BLOCKS)
    per_block = -(-LOOP_MIN_ITERATIONS // LOOP_BLOCKS)
    with loop_exchange(run, (endpoint,), 0, alone_run, timeout_s=60.0) as (exchange, start):
        iteration, exchanged_s = start, 0.0

        def timed(body: Callable[[], object]) -> tuple[int, float]:
            """Run body for slice_s and at least per_block times: (count, CPU seconds)."""
            done, t0, cpu0 = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - t0 < slice_s or done < per_block:
                body()
                done += 1
            return done, time.process_time() - cpu0

        def one() -> None:
            nonlocal iteration, exchanged_s
            worker.compute_step(run, iteration)
            t0 = time.perf_counter()
            exchange.step(iteration, grads, params)
            exchanged_s += time.perf_counter() - t0
            iteration += 1

        for _ in range(LOOP_WARMUP_ITERATIONS):
            one()
        # the warm-up's exchanges are not the figure
        exchanged_s, looped, extra_cpu_s = 0.0, 0, []
        for _ in range(LOOP_BLOCKS):
            # back to back: the batches the loop will take next, no exchange
            steps, steps_cpu_s = timed(lambda: worker.compute_step(run, iteration))
            loops, loops_cpu_s = timed(one)
            looped += loops
            extra_cpu_s.append(loops_cpu_s / loops - steps_cpu_s / steps)
        return statistics.median(extra_cpu_s), exchanged_s / looped


@contextlib.contextmanager
def loop_exchange(
    run: types.SimpleNamespace,
    endpoints: tuple[str, ...],
    rank: int,
    profile_run: tuple[str, str],
    timeout_s: float,
) -> Iterator[tuple[Any, int]]:
    """The worker's own PSExchange as `rank` of run `profile_run` through the loopback shards at
    `endpoints`, started (connected, the shards initialised, the parameters pulled into the
    model): (exchange, the iteration to go on at); closed on exit."""
    from functions.exchange import PSExchange
    from functions.ps_client import PSClient

    params = run.flat.params.numpy()
    secret = os.environ[SECRET_ENV].encode()
    # "calibrate": the job id emulator.calibration.ps_probe.start_ps_shard's shards serve
    client = PSClient(endpoints, "calibrate", rank, secret, int(params.size), timeout_s=timeout_s,
                      run_id=profile_run[0], run_started=profile_run[1])  # fmt: skip
    exchange = PSExchange(client, rank=rank)
    try:
        yield exchange, exchange.start(params)
    finally:
        exchange.close()


def crowded_loop(
    run: types.SimpleNamespace,
    endpoints: tuple[str, ...],
    rank: int,
    crowd_run: tuple[str, str],
    iterations: int,
) -> dict[str, float]:
    """Worker `rank` of a crowd in the BSP loop through real shards on loopback (each waits for
    every rank each iteration, so all of them run in lockstep): per iteration, the CPU seconds of
    its step (functions.worker.compute_step), of the whole loop, and the wall seconds of the step
    and of the iteration; after LOOP_WARMUP_ITERATIONS, over `iterations`, the same number in every
    rank. The profile keeps the step's: the exchange's own CPU is the catalog's
    (exchange_cpu_fraction) and the profile's loop_extra_cpu_s."""
    from functions import worker

    params, grads = run.flat.params.numpy(), run.flat.grads.numpy()
    with loop_exchange(run, endpoints, rank, crowd_run, timeout_s=120.0) as (exchange, start):
        for k in range(LOOP_WARMUP_ITERATIONS):
            worker.compute_step(run, start + k)
            exchange.step(start + k, grads, params)
        start += LOOP_WARMUP_ITERATIONS
        step_cpu, steps_s = 0.0, []
        loop0, wall0 = time.process_time(), time.perf_counter()
        for k in range(iterations):
            cpu0, t0 = time.process_time(), time.perf_counter()
            worker.compute_step(run, start + k)
            step_cpu += time.process_time() - cpu0
            steps_s.append(time.perf_counter() - t0)
            exchange.step(start + k, grads, params)
        return {
            "crowded_step_cpu_s": step_cpu / iterations,
            "crowded_step_s": sum(steps_s) / iterations,
            # every iteration's step, the same iterations in every rank (lockstep_wait_fraction)
            "crowded_steps_s": [round(t, 7) for t in steps_s],
            "crowded_loop_cpu_s": (time.process_time() - loop0) / iterations,
            "crowded_iteration_s": (time.perf_counter() - wall0) / iterations,
        }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The child's arguments, as children.spawn_child gives them."""
    parser = argparse.ArgumentParser(prog="python -m emulator.profile_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--measure-s", type=float, required=True)  # 0 for a crowd's children
    parser.add_argument("--cpu-group-procs")
    parser.add_argument("--ps-endpoint")
    parser.add_argument("--crowd")
    parser.add_argument("--crowd-iterations", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """The child's run; a dataset or model that cannot train is one line on stderr, exit 2."""
    from functions.formats import DatasetError
    from functions.model_spec import ModelError

    args = parse_args(argv)
    try:
        return child_main(args)
    except (DatasetError, ModelError) as err:  # its one line is the parent's (child_result)
        print(err, file=sys.stderr)
        return 2
