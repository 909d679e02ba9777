"""Measure a workload's profile on this machine: training rate per vCPU share, start-up, PS update.

`python -m emulator.profile --workload digits-mlp [--shares 0.25,0.5,1,2] [--write]`
`python -m emulator.profile --workload digits-mlp --anchor --output runs/demo/digits-mlp.json`

For each vCPU share a fresh process imports the worker (with whole cores, as Lambda's init phase
and the emulator's runner do) and then enters a CPU group limited to that many cores, made
by the limiter the emulator's workers run under (emulator.cpu: cgroup v1 CFS quota, else cgroup v2
cpu.max) so that profiles and runs are held the same way; one local core stands for one Lambda vCPU
(cpu_scale 1.0), and torch threads are set as the worker sets them (memory/1769, at least 1). It
builds the zoo model, loads the dataset with the runtime's own loader and times forward + backward
at the profile's local batch — the R(m) of λDNN, i.e. compute only; communication is modelled
separately. The same child reports its start-up (interpreter start to model built). The PS update
rate is timed on one core with the PS's own arithmetic. Without cgroups the shares cannot be held
and the tool refuses to write.

The same child, one per core at 1 vCPU, as the ranks of one BSP loop through a loopback shard,
gives the speed a worker keeps while the machine's cores all train in lockstep
(parallel_speed_ratio, used on shared-core platforms only).

The profile JSON is updated in place of its measured fields only (training_rate of this
machine's architecture, startup_s, warmup_iterations, parallel_speed_ratio,
ps_aggregation_mb_s_per_core), each with a `sources` entry naming the date, the method and the
machine; every other field is left as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from emulator import cpu, lifeline
from emulator.naming import SECRET_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SHARES = (0.25, 0.5, 1.0, 2.0)
MEASURE_S = 3.0  # per share, after warm-up: long enough that scheduler noise averages out
WARMUP_ITERATIONS = 10
# The loop through the PS after the step's own warm-up: a few iterations more, then at least
# this many timed (a MobileNetV2 step at 0.25 vCPU takes 2.4 s: the figure matters for short
# steps, which fill MEASURE_S with thousands)
LOOP_WARMUP_ITERATIONS = 3
LOOP_MIN_ITERATIONS = 5
# The loop's extra CPU is read against back-to-back steps in alternating blocks, each pair
# within a fraction of a second: this machine's speed drifts by 10-25% within minutes, and a
# difference of two means timed seconds apart read 0.85 ms for the digits MLP at 1 vCPU where
# the runs spent 0.2-0.3 ms
LOOP_BLOCKS = 4
# The crowded loop: twice as many workers as cores through one shard (on 2 cores the digits
# MLP's step cost as much CPU with 4 workers as with 8), for about MEASURE_S and at least
# this many iterations
CROWD_PER_CORE = 2
CROWD_MIN_ITERATIONS = 10
# Lockstep pairs behind parallel_speed_ratio, apart from the repeats: one pair reads anywhere in
# 0.79-1.0 here (CNN, six pairs in two minutes, 2026-11-26: 0.889, 0.786, 0.823, 0.982, 1.0,
# 0.878), so the median of three (the repeats) drew 0.985 where these six give 0.884. The
# committed profiles keep their three-pair figures: the seven-pair re-profiles of 20:31 UTC
# scored worse on the grids already measured (README, "What it showed").
PARALLEL_PAIRS = 7


def dataset_source(dataset: str, samples: int) -> str:
    """The runtime loader's source string for a profile's dataset name."""
    if dataset == "digits":
        return "builtin:digits"
    if dataset.startswith("s3://"):
        return dataset
    if dataset.startswith("synthetic-cifar") or dataset == "cifar10":
        # enough batches; the rate is per sample and depends on the input's shape (CIFAR-10's
        # 3×32×32, 10 classes), not on its pixel values, so CIFAR-10 is timed on same-shaped
        # SYNTHETIC CIFAR (no download here)
        return f"synthetic-cifar:{min(samples, 2048)}"
    # a user's dataset: a path relative to the project folder, as the profile names it
    return str(REPO_ROOT / dataset)


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
    # The worker's own step (functions.worker._compute: its batch sampling, forward,
    # backward and gradient flattening), not a leaner copy: the MLP's sub-millisecond steps
    # spend a third of their time outside forward + backward.
    run = types.SimpleNamespace(
        task=types.SimpleNamespace(seed=0, rank=0, local_batch=args.batch), flat=flat, x=x, y=y,
        loss_fn=models.loss_function(args.model),
    )  # fmt: skip
    # The first steps of a fresh process run slower (allocator, first kernel calls): timed
    # apart, as the excess over the steady step, in steady steps (profile warmup_iterations).
    first_s, first_cpu_s = [], []
    for it in range(WARMUP_ITERATIONS):
        t0, cpu0 = time.perf_counter(), time.process_time()
        worker._compute(run, it)
        first_s.append(time.perf_counter() - t0)
        first_cpu_s.append(time.process_time() - cpu0)
    if args.crowd_iterations:
        rank, ranks, run_id, run_started = args.crowd.split(",")
        endpoints = tuple(args.ps_endpoint.split(","))
        crowd = crowded_loop(run, endpoints, int(rank), (run_id, run_started),
                             args.crowd_iterations)  # fmt: skip
        # In a crowd the first steps' wall time is the sharing's; their CPU is what they cost.
        out = {**crowd, "crowded_warmup_cpu_s": warmup_cpu_s(first_cpu_s), "ranks": int(ranks)}
        print(json.dumps(out))
        return 0
    iterations, t0, cpu0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < args.measure_s or iterations < 20:
        worker._compute(run, WARMUP_ITERATIONS + iterations)
        iterations += 1
    elapsed_s = time.perf_counter() - t0
    step_cpu_s = (time.process_time() - cpu0) / iterations
    steady_s = elapsed_s / iterations
    warmup_iterations = max(0.0, (sum(first_s) - WARMUP_ITERATIONS * steady_s) / steady_s)
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
            worker._compute(run, iteration)
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
            steps, steps_cpu_s = timed(lambda: worker._compute(run, iteration))
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
    # "calibrate": the job id emulator.calibrate.start_ps_shard's shards serve
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
    its step (functions.worker._compute), of the whole loop, and the wall seconds of the step and
    of the iteration; after LOOP_WARMUP_ITERATIONS, over `iterations`, the same number in every
    rank. The profile keeps the step's: the exchange's own CPU is the catalog's
    (exchange_cpu_fraction) and the profile's loop_extra_cpu_s."""
    from functions import worker

    params, grads = run.flat.params.numpy(), run.flat.grads.numpy()
    with loop_exchange(run, endpoints, rank, crowd_run, timeout_s=120.0) as (exchange, start):
        for k in range(LOOP_WARMUP_ITERATIONS):
            worker._compute(run, start + k)
            exchange.step(start + k, grads, params)
        start += LOOP_WARMUP_ITERATIONS
        step_cpu, steps_s = 0.0, []
        loop0, wall0 = time.process_time(), time.perf_counter()
        for k in range(iterations):
            cpu0, t0 = time.process_time(), time.perf_counter()
            worker._compute(run, start + k)
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


@contextlib.contextmanager
def loopback_ps(workers: int = 1) -> Iterator[str]:
    """One real PS shard on 127.0.0.1 (no checkpoints) for `workers` children's loops; its
    endpoint. The children get the handshake secret through the environment, as a worker does
    (one secret for every shard this process starts: a child spawned later reaches either)."""
    import secrets
    import tempfile

    from emulator.calibrate import start_ps_shard
    from emulator.procs import Supervisor

    os.environ.setdefault(SECRET_ENV, secrets.token_hex(16))
    with tempfile.TemporaryDirectory() as logs, Supervisor().guard() as supervisor:
        proc, endpoint = start_ps_shard(supervisor, dict(os.environ), workers, Path(logs))
        try:
            yield endpoint
        finally:
            supervisor.stop(proc, grace_s=2.0)


def _spawn_child(
    limiter: cpu.CpuLimiter,
    name: str,
    share: float,
    *,
    model: str,
    source: str,
    batch: int,
    measure_s: float,
    ps_endpoint: str | None = None,
    crowd: tuple[int, int, tuple[str, str], int] | None = None,
) -> subprocess.Popen[str]:
    """Start the child in a group of `share` cores (torch threads as the worker sets them);
    with `ps_endpoint` it also times the worker's loop through that PS shard, or with `crowd`
    (rank, ranks, run, iterations) the step's and the loop's CPU in a crowd's loop through the
    shards `ps_endpoint` names (comma-separated)."""
    placement = limiter.place(name, share)
    threads = max(1, int(share))  # as functions.worker.torch_threads: memory // 1769
    argv = [
        sys.executable, "-m", "emulator.profile_child", f"--model={model}",
        f"--source={source}", f"--batch={batch}", f"--threads={threads}",
        f"--measure-s={measure_s}", f"--cpu-group-procs={placement.procs_file or ''}",
    ] + ([f"--ps-endpoint={ps_endpoint}"] if ps_endpoint else [])  # fmt: skip
    if crowd is not None:
        rank, ranks, (run_id, run_started), iterations = crowd
        argv += [f"--crowd={rank},{ranks},{run_id},{run_started}",
                 f"--crowd-iterations={iterations}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return lifeline.popen(  # dies with this process, as every child the emulator starts
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _child_result(proc: subprocess.Popen[str], share: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"profiling child at share {share} timed out") from None
    # The last line: a child's own refusal is one line, and a traceback ends in its error.
    said = (err.strip().splitlines() or ["no word on stderr"])[-1][-300:]
    if proc.returncode != 0:
        raise RuntimeError(f"profiling child at share {share} failed: {said}")
    lines = out.strip().splitlines()
    if not lines:
        raise RuntimeError(f"profiling child at share {share} exited without a result: {said}")
    return {"vcpu_share": share, **json.loads(lines[-1])}


def interleaved_shares(shares: list[float], repeats: int) -> list[float]:
    """The order the children run in: every share once, lowest first, `repeats` times over.

    Not each share's repeats back to back: this VM has slow spells of minutes in which the
    same work costs up to 3x the CPU (bench/predict's digits rows, 2026-11-27: a run's CPU 3.79
    to 12.21 s for the same 5,616 iterations), and three repeats in one spell made the median
    of that share the spell's. A digits profile measured so read the loop's extra CPU at
    0.58-0.73 ms and its exchange at 1.06 ms at 1 vCPU, where the runs around it spent 0.32 ms
    and 0.37 ms; round the shares, a spell meets one repeat of each and the median leaves it.
    """
    return [share for _ in range(repeats) for share in sorted(set(shares))]


def share_point(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One share's point from its repeats: the median run by speed, with the median of each
    other figure taken apart.

    The median, not the fastest: the profile predicts the emulator's runs, and they see the
    machine's typical background load, not its quietest moment (measured: the fastest of two
    made compute 17-27% optimistic at n = 1)."""
    point = dict(sorted(runs, key=lambda r: r["samples_per_s"])[len(runs) // 2])
    for figure in ("startup_s", "loop_extra_cpu_s", "warmup_iterations", "loop_overhead_s"):
        values = [r[figure] for r in runs if figure in r]
        if values:
            point[figure] = statistics.median(values)
    return point


def measure_share(
    limiter: cpu.CpuLimiter,
    share: float,
    *,
    model: str,
    source: str,
    batch: int,
    measure_s: float,
    ps_endpoint: str | None = None,
) -> dict[str, Any]:
    """Run the child in a group of `share` cores; its JSON result."""
    proc = _spawn_child(
        limiter, f"profile-{share:g}", share, model=model, source=source, batch=batch,
        measure_s=measure_s, ps_endpoint=ps_endpoint,
    )  # fmt: skip
    return _child_result(proc, share)


def measure_parallel(
    limiter: cpu.CpuLimiter,
    count: int,
    *,
    model: str,
    source: str,
    batch: int,
    measure_s: float,
    share: float = 1.0,
) -> float:
    """Mean samples/s of `count` children at `share` vCPU each, started together (the BSP
    workers of a shared-core platform train in lockstep)."""
    procs = [
        _spawn_child(
            limiter,
            f"parallel-{k}",
            share,
            model=model,
            source=source,
            batch=batch,
            measure_s=measure_s,
        )  # fmt: skip
        for k in range(count)
    ]
    return statistics.mean(_child_result(p, share)["samples_per_s"] for p in procs)


def crowd_iterations(samples_s: float, batch: int, cores: int, count: int, measure_s: float) -> int:
    """Iterations that keep `count` workers sharing `cores` busy for about `measure_s` at a
    1-vCPU speed of `samples_s`, at least CROWD_MIN_ITERATIONS."""
    per_s = samples_s / batch * cores / count
    return max(CROWD_MIN_ITERATIONS, round(measure_s * per_s))


def run_crowd(
    limiter: cpu.CpuLimiter,
    count: int,
    endpoints: str,
    *,
    model: str,
    source: str,
    batch: int,
    iterations: int,
    share: float = 1.0,
) -> list[dict[str, Any]]:
    """`count` children at `share` vCPU each (the profile's crowd: 1), started together as the
    ranks of one BSP run through the shards at `endpoints` (comma-separated, each shard
    expecting `count` workers): each child's crowded_loop figures."""
    from functions.runs import new_run

    crowd_run = new_run(dt.datetime.now(dt.UTC), "profile")
    procs = [
        _spawn_child(limiter, f"crowd-{k}", share, model=model, source=source, batch=batch,
                     measure_s=0.0, ps_endpoint=endpoints,
                     crowd=(k, count, crowd_run, iterations))
        for k in range(count)
    ]  # fmt: skip
    return [_child_result(p, share) for p in procs]


def crowd_through_fresh_shard(
    limiter: cpu.CpuLimiter, count: int, **child: Any
) -> list[dict[str, Any]]:
    """run_crowd (`child`: model, source, batch, iterations) through a fresh loopback shard that
    expects the `count` children."""
    with loopback_ps(workers=count) as endpoint:
        return run_crowd(limiter, count, endpoint, **child)


def crowded_figures(children: list[dict[str, Any]]) -> tuple[float, float]:
    """The medians over a crowd's children (crowd_through_fresh_shard) of their step's CPU per
    iteration and of the CPU their first WARMUP_ITERATIONS steps (taken together, back to back,
    before the loop) cost beyond as many steady ones (warmup_cpu_s)."""
    return (
        statistics.median(c["crowded_step_cpu_s"] for c in children),
        statistics.median(c["crowded_warmup_cpu_s"] for c in children),
    )


def lockstep_samples_s(children: list[dict[str, Any]], batch: int) -> float:
    """Mean samples/s of the steps of a crowd's children (crowd_through_fresh_shard): the ranks
    of one BSP run compute in lockstep, every rank starting its step when the exchange releases
    them all, as the workers of a run on shared cores do."""
    return statistics.mean(batch / c["crowded_step_s"] for c in children)


def lockstep_wait_fraction(together: list[dict[str, Any]]) -> float:
    """What the slowest rank of each iteration makes the straggler wait, in its own steps: the
    ranks of one BSP loop (crowd_through_fresh_shard) step the same iterations, and each waits
    for that iteration's slowest step before the next; the straggler (the rank whose steps took
    longest, as functions.terms.measured_terms picks a run's) waits max − its own each
    iteration. Read from the steps alone, so the exchange's own cost with more ranks (the
    model's other terms) is not in it: the difference of the straggler's time outside its step
    and one rank's alone read 0.32 of the digits MLP's 0.8 ms step, most of it the shard
    serving two ranks in turn."""
    import numpy as np

    steps = np.array([c["crowded_steps_s"] for c in together], dtype=np.float64)
    straggler = steps[int(np.argmax(steps.sum(axis=1)))]
    return float(np.mean(steps.max(axis=0) - straggler) / np.mean(straggler))


def crowded_step_ratio(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone, crowded) step CPU pairs of crowded / alone, at least 1 (a crowd
    that came out cheaper only saw less noise)."""
    return max(1.0, statistics.median(crowded / alone for alone, crowded in pairs))


def crowded_warmup_iterations(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone step CPU, crowd's warm-up CPU) pairs of the warm-up in steps
    alone, at least 0 (first steps that came out cheaper than steady ones only saw noise)."""
    return max(0.0, statistics.median(warmup / alone for alone, warmup in pairs))


def parallel_speed_ratio(alone_samples_s: float, together_samples_s: float) -> float:
    """A worker's speed with the machine's cores all training, over alone; at most 1 (a run
    that came out faster together only saw less noise)."""
    return min(1.0, together_samples_s / alone_samples_s)


def paired_speed_ratio(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone, together) samples/s pairs, each timed back to back, of each
    pair's parallel_speed_ratio: a drift of the machine's speed between pairs cancels."""
    return statistics.median(parallel_speed_ratio(alone, together) for alone, together in pairs)


def ps_update_mb_s(floats: int = 4_000_000, repeats: int = 10) -> float:
    """MB/s of gradient one core folds in and applies (the PS's accumulate + SGD arithmetic)."""
    import numpy as np

    grad = np.random.default_rng(0).standard_normal(floats, dtype=np.float32)
    acc, buf, params = np.zeros_like(grad), np.zeros_like(grad), np.zeros_like(grad)
    t0 = time.perf_counter()
    for _ in range(repeats):
        acc += grad
        buf *= np.float32(0.9)
        buf += acc
        params -= np.float32(0.01) * buf
    return repeats * grad.nbytes / 1e6 / (time.perf_counter() - t0)


def machine_description() -> str:
    model = cpu.model_name(cpu.read_cpuinfo()) or platform.processor() or platform.machine()
    return f"{model}, {cpu.machine_cores():.0f} cores available, {platform.machine()}"


def updated_profile(
    raw: dict[str, Any],
    points: list[dict[str, Any]],
    startup_s: float,
    agg_mb_s: float,
    arch: str,
    when: str,
    machine: str,
    *,
    cpu_limit: str,
    warmup_iterations: float | None = None,
    parallel: tuple[float, int] | None = None,
    crowd: tuple[float, int] | None = None,
    crowd_warmup: float | None = None,
    lockstep_wait: float | None = None,
    parallel_readings: list[float] | None = None,
) -> dict[str, Any]:
    """The profile document with the measured fields and their sources replaced.

    `cpu_limit` names how the shares were held (CpuLimiter.mechanism), for the source entry;
    `warmup_iterations` (None: not measured, left as it was) the fresh process's excess;
    `parallel` (ratio, processes) the speed with every core training, `crowd` (ratio,
    processes) a step's CPU in a loop of more workers than cores, `crowd_warmup` the first
    steps' excess CPU in that crowd, in steps alone, `lockstep_wait` the straggler's wait in
    the `parallel` loops, in its steps (None: left as it was; the wait needs `parallel`),
    `parallel_readings` each pair's ratio, kept in the source so the spread shows.
    """
    out = json.loads(json.dumps(raw))
    out.setdefault("training_rate", {})[arch] = {
        "points": [
            {"vcpu_share": p["vcpu_share"], "samples_per_s": round(p["samples_per_s"], 1)}
            for p in points
        ]
    }
    out["startup_s"] = round(startup_s, 2)
    out["ps_aggregation_mb_s_per_core"] = round(agg_mb_s, 1)
    sources = out.setdefault("sources", {})
    rss = [float(p["peak_rss_mb"]) for p in points if "peak_rss_mb" in p]
    if rss:
        from functions.profile_task import RSS_HEADROOM, memory_for_rss_mb

        out["min_memory_mb"] = memory_for_rss_mb(max(rss))
        sources["min_memory_mb"] = {
            "method": f"measured: python -m emulator.profile; the largest peak resident set of a "
            f"child that trained on the whole dataset ({max(rss):.0f} MB) × {RSS_HEADROOM}, in "
            "64 MB steps; " + machine,
            "date": when,
            "tag": "measured",
        }
    loop_figures = (
        ("loop_extra_cpu_s", "cpu_s", "CPU seconds an iteration of the worker's loop (step, "
         "push, pull through one PS shard on loopback) less the back-to-back step's, timed in "
         f"{LOOP_BLOCKS} alternating pairs of blocks (the median of the pairs), at each share; "
         "used only on shared-core platforms (the local catalog); "),
        ("loop_overhead_s", "s", "wall seconds the exchange (PSExchange.step: push, wait, pull "
         "through one PS shard on loopback) takes an iteration of the same loop, timed around it "
         "as a run's workers time their communication, mean over the iterations, at each share; "
         "on shared-core platforms the model's exchange alone takes at least its figure at 1 "
         "vCPU (provisioner.model.loop_exchange_s); "),
    )  # fmt: skip
    for name, unit, method in loop_figures:
        measured_at = [p for p in points if name in p]
        if measured_at:
            out[name] = [
                {"vcpu_share": p["vcpu_share"], unit: round(p[name], 6)} for p in measured_at
            ]
            sources[name] = {
                "method": "measured: python -m emulator.profile (median of the repeats); "
                + f"{method}{machine}",
                "date": when,
                "tag": "measured",
            }
    if warmup_iterations is not None:
        out["warmup_iterations"] = round(warmup_iterations, 2)
        sources["warmup_iterations"] = {
            "method": "measured: python -m emulator.profile; the first "
            f"{WARMUP_ITERATIONS} steps of a fresh process less {WARMUP_ITERATIONS} steady steps,"
            " in steady steps (median over the shares); " + machine,
            "date": when,
            "tag": "measured",
        }
    if parallel is not None:
        out["parallel_speed_ratio"], out["parallel_processes"] = round(parallel[0], 3), parallel[1]
        sources["parallel_speed_ratio"] = {
            "method": f"measured: python -m emulator.profile; mean samples/s of the steps of "
            f"{parallel[1]} children at 1 vCPU each, the ranks of one BSP loop through a loopback "
            "shard (in lockstep, as a run's workers), over one child alone in the same loop timed "
            "just before (the median of the pairs' ratios, each at most 1); used only on "
            "shared-core platforms (the local catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
        if parallel_readings:
            sources["parallel_speed_ratio"]["readings"] = [round(r, 3) for r in parallel_readings]
    if crowd is not None:
        out["crowded_step_ratio"], out["crowded_processes"] = round(crowd[0], 3), crowd[1]
        sources["crowded_step_ratio"] = {
            "method": f"measured: python -m emulator.profile; the step's CPU per iteration of "
            f"{crowd[1]} children at 1 vCPU each, the ranks of one BSP loop through a loopback "
            "PS shard (their median), over one child's back-to-back step alone timed just "
            "before (the median of the repeats' pairs, at least 1); used only on shared-core "
            "platforms (the local catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
    if crowd is not None and crowd_warmup is not None:
        out["crowded_warmup_iterations"] = round(crowd_warmup, 2)
        sources["crowded_warmup_iterations"] = {
            "method": f"measured: python -m emulator.profile; the CPU the first "
            f"{WARMUP_ITERATIONS} steps of {crowd[1]} children at 1 vCPU each, started together, "
            f"cost beyond {WARMUP_ITERATIONS} steady ones (the median of their second half), in "
            "steps of one child's step CPU alone (the median of the children, then of the "
            "repeats' pairs, at least 0); used only on shared-core platforms (the local "
            "catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
    if parallel is not None and lockstep_wait is not None:
        out["lockstep_wait_fraction"] = round(lockstep_wait, 4)
        sources["lockstep_wait_fraction"] = {
            "method": f"measured: python -m emulator.profile; in the lockstep loops of "
            f"parallel_speed_ratio ({parallel[1]} ranks at 1 vCPU each), the mean over the "
            "iterations of the slowest rank's step less the straggler's (the rank whose steps "
            "took longest, as a run's report picks it), over the straggler's mean step (the "
            "median of the pairs); used only on shared-core platforms (the local catalog), "
            "at n >= 2 (provisioner.model.lockstep_wait_s); " + machine,
            "date": when,
            "tag": "measured",
        }
    shares = ", ".join(f"{p['vcpu_share']:g}" for p in points)
    sources["training_rate"] = {
        "method": "measured: python -m emulator.profile (median of the repeats); forward+backward"
        f" at local batch "
        f"{raw['profiled_local_batch']} on {dataset_source(raw['dataset'], raw['dataset_samples'])}"
        f" in a {cpu_limit} of {shares} cores "
        "(1 local core = 1 Lambda vCPU), torch threads = max(1, floor(share)); " + machine,
        "date": when,
        "tag": "measured",
    }
    sources["startup_s"] = {
        "method": "measured: python -m emulator.profile (median of the repeats); the worker "
        "module's own import (functions.worker IMPORT_S: torch and the handler's modules, with "
        "whole cores, as Lambda's init phase bursts and the emulator's runner does) + model "
        "build at 1 vCPU, the clock a run's worker reports (the dataset is the load term); "
        "excludes the interpreter start and Lambda's image load; " + machine,
        "date": when,
        "tag": "measured",
    }
    sources["ps_aggregation_mb_s_per_core"] = {
        "method": "measured: python -m emulator.profile; numpy accumulate + SGD momentum update "
        "of 16 MB float32 on one core; " + machine,
        "date": when,
        "tag": "measured",
    }
    out["provisional"] = any(
        isinstance(s, dict) and s.get("tag") == "est" for s in sources.values()
    )
    return out


LAMBDA_MAX_MEMORY_MB = 10240  # the largest memory a function can have (a model must fit)
NEW_PROFILE_DEFAULTS = {"epochs": 1, "profiled_local_batch": 32, "max_global_batch": 256,
                        "learning_rate": 0.05, "momentum": 0.9}  # fmt: skip


def new_profile(
    model: str, dataset: str, *, name: str, when: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """A profile document for a user's model file and dataset, from what can be read without
    timing anything: sizes, shapes, the file's digest; the timed figures follow (updated_profile).

    ValueError (one line) for a model or dataset that cannot train: see functions.models and
    functions.datasets for the checks."""
    import numpy as np

    from functions import datasets, models
    from functions.model_spec import file_digest, parse_spec

    spec = parse_spec(model)
    reader = models.dataset_reader(model)
    x, y, _ = datasets.load_source(dataset_source(dataset, 0), seed=0, reader=reader)
    if len(x) == 0:
        raise ValueError(f"dataset {dataset!r} holds no samples")
    shape, classes = [int(d) for d in x.shape[1:]], int(y.max()) + 1
    built = models.build(model, shape, classes, seed=0)
    models.check_output(built, model, shape, classes)
    params = models.parameter_count(built)
    # as the prepare step writes shards: float32 inputs, int64 labels
    dataset_bytes = len(x) * int(np.prod(shape)) * 4 + len(y) * 8
    computed = {"date": when, "tag": "exact"}
    return {
        "schema_version": 1,
        "name": name,
        "model": model,
        "model_digest": file_digest(spec),
        "dataset": dataset,
        "input_shape": shape,
        "provisional": True,
        "model_bytes": params * 4,
        "dataset_samples": len(x),
        "dataset_bytes": dataset_bytes,
        **settings,
        "min_memory_mb": 128,  # replaced by the measured peak resident set
        "training_rate": {},
        "startup_s": 0.0,
        "ps_aggregation_mb_s_per_core": 1.0,
        "sources": {
            "model_bytes": {"method": f"computed: {spec.text} = {params:,} fp32 parameters",
                            **computed},
            "dataset_samples": {"method": f"counted: {dataset} read by functions.datasets, "
                                f"{len(x):,} samples of {'×'.join(map(str, shape))}, {classes} "
                                "classes", **computed},
            "dataset_bytes": {"method": "computed: float32 inputs + int64 labels (shard format)",
                              **computed},
            **{k: {"method": "chosen: python -m emulator.profile's default or its flag",
                   "date": when, "tag": "design"} for k in settings},
        },
    }  # fmt: skip


def check_fits_lambda(doc: dict[str, Any]) -> None:
    """ValueError when the measured memory need exceeds Lambda's largest function."""
    need = int(doc["min_memory_mb"])
    if need > LAMBDA_MAX_MEMORY_MB:
        raise ValueError(
            f"model {doc['model']} on {doc['dataset']} needs {need} MB (the peak resident set of "
            f"a training step with headroom); a Lambda function has at most "
            f"{LAMBDA_MAX_MEMORY_MB} MB: use a smaller model or batch, or a dataset of fewer "
            "samples per worker"
        )


ANCHOR_MEASURE_S = 2.0  # per child: a spot reading of the machine's speed, not a curve
# Read at two shares: a run held below 1 vCPU by its quota did not speed up with the 1-vCPU
# reading (bench/predict 2026-11-26: the CNN at 0.56-0.72 vCPU scored 0.87-0.91 with the
# whole curve moved by the 1-vCPU factor, 1.09-1.16, and 0.97-1.00 left where it was).
ANCHOR_SHARES = (0.5, 1.0)
# How far an anchor moves the profile, in log speed: 0.5 sets each point at the geometric mean of
# the profile's rate and the anchor's reading. Both estimate the machine's speed at the run: the
# profile from many children long ago, the anchor from six short ones just before, and in these
# VMs each is as often the further off. Re-scoring the runs of four grids of 2026-11-26 (the
# bench/results/predict.json of b7915f3, 070cc16, 65bc6b4 and c46c76b) with each weight, the
# whole move (1) scored 0.920, 0.950, 0.932 and 0.924 mean, half of it 0.935, 0.947, 0.934 and
# 0.939, none (rates as profiled, start-up as read) 0.925, 0.907, 0.934 and 0.947: the whole
# move chases the anchor's noise, none misses the hours the machine drifted (MobileNetV2 0.835
# in 070cc16's grid, 0.960 with the whole move). Held out, on the grid after it (2b0d19a, 17:59
# UTC): 0.936 whole, 0.945 half, 0.922 none. Each: `python -m bench.predict --rescore
# --anchor-weight W` on that commit's bench/results.
ANCHOR_WEIGHT = 0.5
# The weight holds for drift, not for another machine. In the seven grids of 2026-11-26/27 (one
# VM, profiles of that VM) every anchor read 0.79-1.31× its profile (meta.anchors of
# bench/results/predict.json at b7915f3 ... 8f09c0f); on 2026-11-27 a fresh VM read the same
# committed digits profile at 2.23× (0.5 vCPU) and 2.28× (1 vCPU), where half the way would
# predict 1.5× too slow. So the weight moves a point within ×1/band-band of its profile and the
# reading beyond the band moves it whole (anchor_move).
ANCHOR_DRIFT_BAND = 1.33


def anchor_move(factor: float, weight: float, band: float = ANCHOR_DRIFT_BAND) -> float:
    """How much a profile point moves for an anchor that read `factor` × it: in log speed,
    `weight` of the part within [−ln band, ln band] and the whole of the part beyond (a machine
    that much faster or slower than its profile is not drift, and no half of it is noise).
    Weight 0 is no anchor at all: the profile as measured (`bench.predict --anchor-weight 0`)."""
    if weight == 0.0:
        return 1.0
    log_factor = math.log(factor)
    edge = math.log(band)
    inside = min(max(log_factor, -edge), edge)
    return math.exp(weight * inside + (log_factor - inside))


def measure_anchor(
    raw: dict[str, Any],
    repeats: int = 3,
    measure_s: float = ANCHOR_MEASURE_S,
    shares: tuple[float, ...] = ANCHOR_SHARES,
) -> dict[str, Any]:
    """The workload's speed now, for `anchored_profile`: samples/s at each of `shares` (the
    median of `repeats` children each; the shares alternate, so a drift meets them alike) and
    the median start-up of the children at the largest share. Raises RuntimeError where no
    share can be held."""
    source = dataset_source(raw["dataset"], int(raw["dataset_samples"]))
    by_share: dict[float, list[dict[str, Any]]] = {s: [] for s in shares}
    with cpu.CpuLimiter(f"lambda-dnn-anchor-{os.getpid()}") as limiter:
        if not limiter.enforced:
            raise RuntimeError(f"cannot hold a 1 vCPU share for the anchor ({limiter.reason})")
        for _ in range(max(1, repeats)):
            for share in shares:
                by_share[share].append(measure_share(
                    limiter, share, model=raw["model"], source=source,
                    batch=int(raw["profiled_local_batch"]), measure_s=measure_s,
                ))  # fmt: skip
    rates = {s: statistics.median(r["samples_per_s"] for r in runs) for s, runs in by_share.items()}
    top = max(shares)  # start-up as before: the children at 1 vCPU (the build runs at the share)
    return {
        "samples_per_s": rates[top],
        "samples_per_s_by_share": rates,
        "startup_s": statistics.median(r["startup_s"] for r in by_share[top]),
        "runs": max(1, repeats),
    }


def share_factors(
    profile_rates: dict[float, float], anchor_rates: dict[float, float]
) -> dict[float, float]:
    """Each anchored share's speed over the profile's: reading / profile rate, for the shares
    the profile has a point at. ValueError where that leaves none."""
    out = {s: r / profile_rates[s] for s, r in anchor_rates.items() if s in profile_rates}
    if not out:
        raise ValueError("no anchored share is a point of the profile")
    return out


def factor_at_share(factors: dict[float, float], share: float) -> float:
    """The speed factor at `share`: linear between the anchored shares, the nearest one's
    outside them (a reading says nothing of the curve's ends beyond it)."""
    known = sorted(factors)
    if share <= known[0]:
        return factors[known[0]]
    if share >= known[-1]:
        return factors[known[-1]]
    hi = next(k for k in known if k >= share)
    lo = max(k for k in known if k < share)
    w = (share - lo) / (hi - lo)
    return factors[lo] * (1 - w) + factors[hi] * w


def anchored_profile(
    doc: dict[str, Any],
    anchor: dict[str, Any],
    arch: str,
    when: str,
    weight: float = ANCHOR_WEIGHT,
) -> dict[str, Any]:
    """The profile `doc` moved towards the machine's speed of the `anchor` (measure_anchor):
    each training-rate point × anchor_move of the factor at its share (factor_at_share over the
    anchored shares' reading / profile rate; an anchor of the 1-vCPU rate alone moves every
    point by its factor): `weight` of it in log speed within ANCHOR_DRIFT_BAND, the rest whole
    (ANCHOR_WEIGHT and ANCHOR_DRIFT_BAND say why), start-up the anchor's.

    This VM's speed drifts by up to 2× within an hour (MobileNetV2 at 1 vCPU: 36.4 samples/s
    at 04:30, 67.6 at 05:27, same code), so a curve measured once predicts runs an hour later
    at another speed. Its shape between the anchored shares and beyond them (the parallel
    ratio, warm-up) is kept; its level is set from readings taken just before.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"bad anchor weight {weight!r}: expected a number from 0 to 1")
    points = doc["training_rate"][arch]["points"]
    one = [p for p in points if p["vcpu_share"] == 1.0]
    if not one:
        raise ValueError(f"bad profile {doc['name']!r}: no 1 vCPU training-rate point to anchor")
    readings = {
        float(s): float(r) for s, r in anchor.get("samples_per_s_by_share", {}).items()
    } or {1.0: float(anchor["samples_per_s"])}
    factors = share_factors({float(p["vcpu_share"]): p["samples_per_s"] for p in points}, readings)
    factor = factor_at_share(factors, 1.0)

    def moved(point: dict[str, Any]) -> dict[str, Any]:
        at = anchor_move(factor_at_share(factors, float(point["vcpu_share"])), weight)
        return {**point, "samples_per_s": round(point["samples_per_s"] * at, 1)}

    out: dict[str, Any] = json.loads(json.dumps(doc))
    out["training_rate"][arch]["points"] = [moved(p) for p in points]
    out["startup_s"] = round(anchor["startup_s"], 2)
    out["anchor"] = {
        "speed_factor": round(factor, 4),
        "speed_factor_by_share": {f"{k:g}": round(v, 4) for k, v in sorted(factors.items())},
        "weight": weight,  # each point moved by anchor_move(its share's factor, weight, band)
        "band": ANCHOR_DRIFT_BAND,
        "samples_per_s_at_1_vcpu": round(anchor["samples_per_s"], 1),
        "startup_s": round(anchor["startup_s"], 3),
        "date": when,
    }
    each = ", ".join(f"× {v:.3f} at {k:g} vCPU" for k, v in sorted(factors.items()))
    method = (
        f"anchored: the profile's curve {each} (linear between, the nearest outside), to the "
        f"power {weight:g} within ×{ANCHOR_DRIFT_BAND:g} of the profile and whole beyond it, "
        f"its rate measured just before (median of {anchor.get('runs', 1)} "
        "children per share, emulator.profile.measure_anchor)"
    )
    sources = out.setdefault("sources", {})
    sources["training_rate"] = {**sources.get("training_rate", {}), "method": method, "date": when}
    sources["startup_s"] = {
        **sources.get("startup_s", {}),
        "method": "anchored: the median start-up of the same children",
        "date": when,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.profile")
    parser.add_argument(
        "--workload", help="re-measure this profile (profiles/<name>.json or a path)"
    )
    parser.add_argument(
        "--model", help="a new profile of this model: path/to/file.py:function (or a zoo name)"
    )
    parser.add_argument(
        "--dataset", help="with --model: the dataset, a path in the project or s3://"
    )
    parser.add_argument(
        "--name", help="with --model: the profile's name (default: the file's stem)"
    )
    # The numbers are read by _numbers, not argparse: a bad one is one line naming it and what
    # would be accepted, as every other bad value here, not a usage dump.
    parser.add_argument("--epochs", default=NEW_PROFILE_DEFAULTS["epochs"])
    parser.add_argument(
        "--batch",
        default=NEW_PROFILE_DEFAULTS["profiled_local_batch"],
        help="with --model: the local batch per worker and iteration",
    )
    parser.add_argument("--learning-rate", default=NEW_PROFILE_DEFAULTS["learning_rate"])
    parser.add_argument("--momentum", default=NEW_PROFILE_DEFAULTS["momentum"])
    parser.add_argument("--shares", default=",".join(f"{s:g}" for s in DEFAULT_SHARES))
    parser.add_argument("--measure-s", default=MEASURE_S)
    parser.add_argument(
        "--repeats",
        default=3,
        help="runs per share, taken round the shares; the median counts (a run predicts runs "
        "under the same load)",
    )
    parser.add_argument(
        "--pairs",
        default=PARALLEL_PAIRS,
        help="lockstep pairs (one child alone, then one per core) behind parallel_speed_ratio; "
        "the median counts",
    )
    parser.add_argument("--output", type=Path, help="where to write (default: print only)")
    parser.add_argument("--write", action="store_true", help="update the workload's own file")
    parser.add_argument(
        "--anchor",
        action="store_true",
        help="with --workload and --output: the profile moved to this machine's speed now "
        "(its rate at 0.5 and 1 vCPU and its start-up read again, about a minute)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--cpu-group-procs", help=argparse.SUPPRESS)
    parser.add_argument("--ps-endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--crowd", help=argparse.SUPPRESS)
    parser.add_argument("--crowd-iterations", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # the parent's own values, measure_s 0 for a crowd's children included
        from functions.formats import DatasetError
        from functions.model_spec import ModelError

        args.batch, args.measure_s = int(args.batch), float(args.measure_s)
        try:
            return child_main(args)
        except (DatasetError, ModelError) as err:  # its one line is the parent's (_child_result)
            print(err, file=sys.stderr)
            return 2
    when = dt.datetime.now(dt.UTC).date().isoformat()
    try:
        _numbers(args)
        if args.output is not None:
            check_output(args.output)
        path: Path | None = None
        if args.workload and args.model:
            raise ValueError(
                "give --workload (re-measure a profile) or --model with --dataset (a new one), "
                "not both"
            )
        if args.model:
            raw = _new_profile_from_args(args, when)
            if args.write:
                raise ValueError("--write updates an existing profile; give --output for a new one")
        elif not args.workload:
            raise ValueError(
                "missing --workload (a profile name such as digits-mlp) or --model and --dataset"
            )
        else:
            path = Path(args.workload)
            if not path.is_file():
                path = REPO_ROOT / "profiles" / f"{args.workload}.json"
            if not path.is_file():
                raise ValueError(f"bad --workload {args.workload!r}: no file {path}")
            raw = json.loads(path.read_text())
        if args.anchor and (args.model or args.write or not args.output):
            raise ValueError(
                "--anchor moves an existing profile (--workload) to this moment's speed and "
                "writes it to --output (not --write: a reading of the moment is not the profile)"
            )
        try:
            shares = [float(s) for s in args.shares.split(",")]
        except ValueError:
            shares = []
        if not shares or not all(0 < s <= cpu.machine_cores() for s in shares):  # NaN too
            raise ValueError(
                f"bad --shares {args.shares!r}: expected positive numbers up to "
                f"{cpu.machine_cores():.0f} (this machine's cores)"
            )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.anchor:
        return _anchor_main(raw, args.output, when)
    try:
        return _profile_main(args, raw, path, shares, when)
    except RuntimeError as err:  # a child that failed (its one line) or timed out
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 1
    except OSError as err:  # writing the profile: the old file, if any, is left as it was
        print(f"error: cannot write {err.filename or args.output}: {err.strerror or err}",
              file=sys.stderr)  # fmt: skip
        return 1


def _profile_main(args: argparse.Namespace, raw: dict[str, Any], path: Path | None,
                  shares: list[float], when: str) -> int:  # fmt: skip
    """Measure the profile `raw` at `shares` (all checked, as are `args`); print or write it."""
    source = dataset_source(raw["dataset"], int(raw["dataset_samples"]))
    with contextlib.ExitStack() as stack:
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-profile-{os.getpid()}"))
        print(limiter.status(), file=sys.stderr)
        if not limiter.enforced:
            print("error: cannot hold the vCPU shares here; no profile written", file=sys.stderr)
            return 1
        cpu_limit = str(limiter.mechanism)  # enforced, so the mechanism's name
        ps_endpoint = stack.enter_context(loopback_ps())
        runs_at: dict[float, list[dict[str, Any]]] = {share: [] for share in shares}
        for share in interleaved_shares(shares, args.repeats):
            runs_at[share].append(measure_share(
                limiter, share, model=raw["model"], source=source,
                batch=int(raw["profiled_local_batch"]), measure_s=args.measure_s,
                ps_endpoint=ps_endpoint,
            ))  # fmt: skip
        points = [share_point(runs_at[share]) for share in sorted(runs_at)]
        for point in points:
            print(
                f"share {point['vcpu_share']:>5g} vCPU: {point['samples_per_s']:9.1f} samples/s "
                f"(start-up {point['startup_s']:.2f} s, warm-up "
                f"{point['warmup_iterations']:.1f} steps, loop +"
                f"{1000 * point['loop_extra_cpu_s']:.3f} ms CPU and "
                f"{1000 * point['loop_overhead_s']:.3f} ms an iteration)",
                file=sys.stderr,
            )
        # One child per core at 1 vCPU, together, each time right after one child alone: the
        # ratio of each pair, then their median. This VM's speed drifts by 10-25% within minutes,
        # so a together run set against the 1-vCPU point timed a minute before measured the drift
        # as often as the sharing (MobileNetV2: 1.0, clamped, where lockstep runs showed 0.8).
        cores = int(cpu.machine_cores())
        pairs: list[tuple[float, float]] = []
        crowds: list[tuple[float, float]] = []
        warmups: list[tuple[float, float]] = []
        waits: list[float] = []
        count = CROWD_PER_CORE * cores
        batch = int(raw["profiled_local_batch"])
        repeats = args.repeats
        alone: dict[str, Any] = {}
        for round_ in range(max(repeats, args.pairs) if cores >= 2 else 0):
            if round_ < repeats:  # sizes the loops; the crowd's pair, timed anew
                alone = measure_share(limiter, 1.0, model=raw["model"], source=source,
                                      batch=batch, measure_s=args.measure_s)  # fmt: skip
            # In lockstep, as a run's workers step, against one child alone in the same loop.
            # Measured on 2 cores (CNN, 1 vCPU each, 4 pairs, 2026-11-26): two children started
            # together but stepping apart kept 0.86-1.06 of the speed alone (median 0.96), the
            # same two as the ranks of one run 0.79-0.91 (0.86); a run's n = 2 steps were
            # 1.15-1.2x the 1-vCPU step around it. Alone in the loop, not back to back: the MLP's
            # millisecond step after a wake-up from the exchange is slower for one rank too
            # (0.635 of back to back with two ranks), which loop_overhead_s already holds.
            if round_ < args.pairs:
                lockstep = crowd_iterations(alone["samples_per_s"], batch, cores, cores,
                                            args.measure_s)  # fmt: skip
                alone_ranks, together_ranks = (
                    crowd_through_fresh_shard(limiter, ranks, model=raw["model"], source=source,
                                              batch=batch, iterations=lockstep)
                    for ranks in (1, cores)
                )  # fmt: skip
                pairs.append((lockstep_samples_s(alone_ranks, batch),
                              lockstep_samples_s(together_ranks, batch)))  # fmt: skip
                waits.append(lockstep_wait_fraction(together_ranks))
            if round_ >= repeats:
                continue
            iterations = crowd_iterations(
                alone["samples_per_s"], batch, cores, count, args.measure_s
            )
            crowded, warmup_cpu = crowded_figures(crowd_through_fresh_shard(
                limiter, count, model=raw["model"], source=source, batch=batch,
                iterations=iterations,
            ))  # fmt: skip
            crowds.append((alone["step_cpu_s"], crowded))
            warmups.append((alone["step_cpu_s"], warmup_cpu))
        parallel = (paired_speed_ratio(pairs), cores) if pairs else None
        lockstep_wait = statistics.median(waits) if waits else None
        crowd = (crowded_step_ratio(crowds), count) if crowds else None
        crowd_warmup = crowded_warmup_iterations(warmups) if warmups else None
        readings = [parallel_speed_ratio(alone_s, together_s) for alone_s, together_s in pairs]
        if parallel:
            print(f"{cores} at once: {parallel[0]:.3f} of the speed alone (pairs: "
                  f"{', '.join(f'{r:.3f}' for r in readings)})", file=sys.stderr)  # fmt: skip
        if lockstep_wait is not None:
            print(f"the straggler's wait: {lockstep_wait:.3f} of its step", file=sys.stderr)
        if crowd:
            print(f"{count} workers in a loop on {cores} cores: a step takes {crowd[0]:.2f}× its "
                  "CPU alone", file=sys.stderr)  # fmt: skip
        if crowd_warmup is not None:
            print(f"their first {WARMUP_ITERATIONS} steps cost {crowd_warmup:.2f} steps more",
                  file=sys.stderr)  # fmt: skip
    startup_s = min(points, key=lambda p: abs(p["vcpu_share"] - 1.0))["startup_s"]
    agg = ps_update_mb_s()
    print(f"PS update on one core: {agg:.0f} MB/s", file=sys.stderr)
    doc = updated_profile(
        raw,
        points,
        startup_s,
        agg,
        platform.machine().replace("aarch64", "arm64"),
        when,
        machine_description(),
        cpu_limit=cpu_limit,
        warmup_iterations=statistics.median(p["warmup_iterations"] for p in points),
        parallel=parallel,
        crowd=crowd,
        crowd_warmup=crowd_warmup,
        lockstep_wait=lockstep_wait,
        parallel_readings=readings,
    )
    try:
        check_fits_lambda(doc)
    except ValueError as err:
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 2
    text = json.dumps(doc, indent=2) + "\n"
    target = path if args.write else args.output
    if target is None:
        print(text)
    else:
        _write_whole(target, text)
    return 0


def _write_whole(target: Path, text: str) -> None:
    from provisioner.files import write_text_atomically  # never a half-written profile

    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(target, text)
    print(f"wrote {target}", file=sys.stderr)


def check_output(output: Path) -> None:
    """ValueError unless a profile can be written at `output`: not a folder, and the nearest
    folder of it that exists writable. Checked before the minutes of profiling, not after."""
    if output.is_dir():
        raise ValueError(
            f"bad --output {str(output)!r}: a folder; expected the path of a .json file to "
            "write the profile to"
        )
    folder = output.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(
            f"bad --output {str(output)!r}: {str(folder)!r} is a file, not a folder; expected "
            "the path of a .json file to write the profile to"
        )
    if not os.access(folder, os.W_OK):
        raise ValueError(f"bad --output {str(output)!r}: the folder {str(folder)!r} is read-only")


MAX_MEASURE_S = 120.0  # a child has 300 s in all (_child_result): twice this and its start-up
# option: (read as, accepted when, what is accepted)
NUMBER_OPTIONS: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "epochs": (int, lambda v: v >= 1, "a whole number, 1 or more"),
    "batch": (int, lambda v: v >= 1, "a whole number, 1 or more"),
    "learning_rate": (float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "momentum": (float, lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "measure_s": (float, lambda v: 0 < v <= MAX_MEASURE_S,
                  f"seconds, more than 0 and at most {MAX_MEASURE_S:g}"),
    "repeats": (int, lambda v: v >= 1, "a whole number, 1 or more"),
    "pairs": (int, lambda v: v >= 1, "a whole number of at least 1"),
}  # fmt: skip


def _numbers(args: argparse.Namespace) -> None:
    """Each option of NUMBER_OPTIONS read in place; ValueError naming the first bad one."""
    for name, (kind, accepted, expected) in NUMBER_OPTIONS.items():
        text = getattr(args, name)
        try:
            value = kind(str(text))
        except ValueError:
            value = None
        if value is None or not accepted(value):
            shown = repr(text) if value is None else repr(value)
            raise ValueError(f"bad --{name.replace('_', '-')} {shown}: expected {expected}")
        setattr(args, name, value)


def write_anchored(raw: dict[str, Any], output: Path, when: str) -> dict[str, Any]:
    """Measure the anchor now and write the profile `raw` moved to it at `output` (whole or not
    at all); the moved profile. RuntimeError where no share can be held, ValueError where the
    profile has no 1-vCPU point on this machine's architecture."""
    arch = platform.machine().replace("aarch64", "arm64")
    reading = measure_anchor(raw)
    doc = anchored_profile(raw, reading, arch, when)
    factors = doc["anchor"]["speed_factor_by_share"]
    each = ", ".join(f"× {v:.3f} at {k} vCPU" for k, v in factors.items())
    print(f"anchor {raw['name']}: {reading['samples_per_s']:.1f} samples/s at 1 vCPU; "
          f"speed over the profile's {each}; start-up "
          f"{reading['startup_s']:.2f} s", file=sys.stderr, flush=True)  # fmt: skip
    output.parent.mkdir(parents=True, exist_ok=True)
    _write_whole(output, json.dumps(doc, indent=2) + "\n")
    return doc


def _anchor_main(raw: dict[str, Any], output: Path, when: str) -> int:
    """`--anchor`: the profile at this moment's speed (write_anchored), or one line why not."""
    try:
        write_anchored(raw, output, when)
    except (RuntimeError, ValueError, KeyError) as err:
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 1
    return 0


def _new_profile_from_args(args: argparse.Namespace, when: str) -> dict[str, Any]:
    from functions.model_spec import parse_spec

    if not args.dataset:
        raise ValueError("--model needs --dataset: a dataset path in the project, or s3://")
    from provisioner.profile import is_dataset_path

    if not is_dataset_path(args.dataset) and not args.dataset.startswith("builtin:"):
        raise ValueError(
            f"bad --dataset {args.dataset!r}: expected a path relative to the project folder "
            "(a folder of .npz, an ImageFolder layout or a .csv) or s3://bucket/prefix"
        )
    name = args.name or Path(parse_spec(args.model).file).stem.replace("_", "-")
    settings = {
        "epochs": args.epochs,
        "profiled_local_batch": args.batch,
        "max_global_batch": max(args.batch, NEW_PROFILE_DEFAULTS["max_global_batch"]),
        "learning_rate": args.learning_rate,
        "momentum": args.momentum,
    }
    # the profile names the generated dataset as the planner knows it (builtin:digits → digits)
    dataset = "digits" if args.dataset == "builtin:digits" else args.dataset
    return new_profile(args.model, dataset, name=name, when=when, settings=settings)


if __name__ == "__main__":
    sys.exit(main())
