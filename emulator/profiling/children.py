"""The measuring of a share: children started in CPU groups of a share of the cores, and their
results.

Each child (emulator.profiling.child) runs in a group made by the limiter the emulator's workers
run under (emulator.cpu: cgroup v1 CFS quota, else cgroup v2 cpu.max), so that profiles and runs
are held the same way; one local core stands for one Lambda vCPU, and torch threads are set as
the worker sets them (memory/1769, at least 1).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from emulator import cpu, lifeline
from emulator.naming import SECRET_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 300
# A crowd's loop runs for about the measuring time and at least this many iterations
CROWD_MIN_ITERATIONS = 10


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
    if dataset.startswith("synthetic-tokens"):
        return f"synthetic-tokens:{min(samples, 2048)}"
    # a user's dataset: a path relative to the project folder, as the profile names it
    return str(REPO_ROOT / dataset)


@contextlib.contextmanager
def loopback_ps(workers: int = 1) -> Iterator[str]:
    """One real PS shard on 127.0.0.1 (no checkpoints) for `workers` children's loops; its
    endpoint. The children get the handshake secret through the environment, as a worker does
    (one secret for every shard this process starts: a child spawned later reaches either)."""
    import secrets
    import tempfile

    from emulator.calibration.ps_probe import start_ps_shard
    from emulator.procs import Supervisor

    os.environ.setdefault(SECRET_ENV, secrets.token_hex(16))
    with tempfile.TemporaryDirectory() as logs, Supervisor().guard() as supervisor:
        proc, endpoint = start_ps_shard(supervisor, dict(os.environ), workers, Path(logs))
        try:
            yield endpoint
        finally:
            supervisor.stop(proc, grace_s=2.0)


def spawn_child(
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


def child_result(proc: subprocess.Popen[str], share: float) -> dict[str, Any]:
    """The child's JSON result, with its share; RuntimeError (one line: the child's last word)
    where it failed, said nothing or ran past CHILD_TIMEOUT_S."""
    try:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
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
    proc = spawn_child(
        limiter, f"profile-{share:g}", share, model=model, source=source, batch=batch,
        measure_s=measure_s, ps_endpoint=ps_endpoint,
    )  # fmt: skip
    return child_result(proc, share)


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
        spawn_child(
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
    return statistics.mean(child_result(p, share)["samples_per_s"] for p in procs)


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
        spawn_child(limiter, f"crowd-{k}", share, model=model, source=source, batch=batch,
                     measure_s=0.0, ps_endpoint=endpoints,
                     crowd=(k, count, crowd_run, iterations))
        for k in range(count)
    ]  # fmt: skip
    return [child_result(p, share) for p in procs]


def crowd_through_fresh_shard(
    limiter: cpu.CpuLimiter, count: int, **child: Any
) -> list[dict[str, Any]]:
    """run_crowd (`child`: model, source, batch, iterations) through a fresh loopback shard that
    expects the `count` children."""
    with loopback_ps(workers=count) as endpoint:
        return run_crowd(limiter, count, endpoint, **child)
