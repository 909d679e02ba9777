"""Shared cores and the BSP loop: what an iteration of n workers and S shards costs on this machine.

`python -m bench.shared_loop [--workload digits-mlp] [--counts 1,2,4,8] [--shards 1,2]` (about
5 minutes on 2 cores for the MLP) writes bench/results/shared-loop.*.

On the local platform the workers and the PS shards share the machine's C cores, so the model
holds an iteration to at least (n · a worker's CPU + the shards' CPU) / C
(provisioner.model.shared_cpu_iteration_s). This runs the worker's real loop — its step
(functions.worker.compute_step) and PSExchange through real `functions.ps` shards on loopback — as
n children at 1 vCPU each (emulator.profile's crowd children), reads each worker's step CPU,
loop CPU and wall time per iteration and each shard's CPU (/proc), and sets the measured
iteration against that CPU over C = the machine's cores. The step's CPU is also read against
one child's back-to-back step alone, timed just before: that is the profile's
crowded_step_ratio, the extra a step costs once the workers outnumber the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
COUNTS = (1, 2, 4, 8)
SHARDS = (1, 2)


def row_of(
    n: int,
    shards: int,
    children: list[dict[str, float]],
    shard_cpu_s: float,
    alone_step_cpu_s: float,
    cores: float,
) -> dict[str, Any]:
    """One table row from the children's per-iteration figures and the shards' CPU per
    iteration: the CPU bound (n · loop CPU + shards' CPU) / C against the measured iteration."""
    wall = max(c["crowded_iteration_s"] for c in children)  # lockstep: the slowest rank's
    loop_cpu = statistics.median(c["crowded_loop_cpu_s"] for c in children)
    step_cpu = statistics.median(c["crowded_step_cpu_s"] for c in children)
    bound = (n * loop_cpu + shard_cpu_s) / cores
    return {
        "n": n,
        "shards": shards,
        "iteration_s": wall,
        "loop_cpu_s": loop_cpu,
        "step_cpu_s": step_cpu,
        "alone_step_cpu_s": alone_step_cpu_s,
        "step_ratio": step_cpu / alone_step_cpu_s,
        "shard_cpu_s": shard_cpu_s,
        "cpu_bound_s": bound,
        "bound_over_measured": bound / wall,
    }


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """bench/results/shared-loop.{json,md,png}; returns the markdown."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "shared-loop.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    cores = meta["cores"]
    lines = [
        f"# The BSP loop of {meta['workload']} on {cores:g} shared cores",
        "",
        "| n | shards | iteration ms | worker loop CPU ms | step CPU ms (÷ alone) | "
        f"shards' CPU ms | CPU bound ms, C = {cores:g} | bound ÷ measured |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['shards']} | {1e3 * r['iteration_s']:.2f} | "
            f"{1e3 * r['loop_cpu_s']:.2f} | {1e3 * r['step_cpu_s']:.2f} ({r['step_ratio']:.2f}) | "
            f"{1e3 * r['shard_cpu_s']:.2f} | {1e3 * r['cpu_bound_s']:.2f} | "
            f"{r['bound_over_measured']:.2f} |"
        )
    lines += [
        "",
        "Per iteration, medians over the workers (the iteration: the slowest worker's, in",
        "lockstep). CPU bound = (n × worker loop CPU + shards' CPU) / C: the floor the model",
        "puts under an iteration on shared cores; near 1 where the loop is CPU-bound, below 1",
        "where one worker's chain of step and round trip is the longer path (the model's",
        "cfs_step_s). Step CPU ÷ alone: against one child's back-to-back step timed just",
        f"before ({meta['iterations']} iterations each, after 3 of warm-up; the shards' CPU",
        "includes the warm-up and the handshakes).",
        f"Machine: {meta['machine']}. CPU share: {meta['cpu_share']}.",
        f"Command: `{meta['command']}`.",
    ]
    text = "\n".join(lines) + "\n"
    (RESULTS / "shared-loop.md").write_text(text)
    _plot(rows, RESULTS / "shared-loop.png", cores, meta["workload"])
    return text


def _plot(rows: list[dict[str, Any]], path: Path, cores: float, workload: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for shards, mark in zip(sorted({r["shards"] for r in rows}), "os^", strict=False):
        mine = [r for r in rows if r["shards"] == shards]
        ns = [r["n"] for r in mine]
        ax.plot(ns, [1e3 * r["iteration_s"] for r in mine], f"{mark}-",
                label=f"measured, {shards} shard(s)")  # fmt: skip
        ax.plot(ns, [1e3 * r["cpu_bound_s"] for r in mine], f"{mark}--",
                label=f"CPU bound, C = {cores:g}, {shards} shard(s)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers (n)")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f"BSP loop on shared cores: {workload}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure_row(
    limiter: Any, raw: dict[str, Any], n: int, shards: int, iterations: int, cores: float
) -> dict[str, Any]:
    """Time one child alone, then n children in a loop through `shards` fresh shards."""
    from emulator.calibration.ps_probe import process_cpu_s, start_ps_shard
    from emulator.procs import Supervisor
    from emulator.profiling import children as prof
    from emulator.profiling.child import LOOP_WARMUP_ITERATIONS

    source = prof.dataset_source(raw["dataset"], int(raw["dataset_samples"]))
    batch = int(raw["profiled_local_batch"])
    alone = prof.measure_share(limiter, 1.0, model=raw["model"], source=source, batch=batch,
                               measure_s=2.0)  # fmt: skip
    with tempfile.TemporaryDirectory() as logs, Supervisor().guard() as supervisor:
        started = [
            start_ps_shard(supervisor, dict(os.environ), n, Path(logs), (k, shards))
            for k in range(shards)
        ]
        before = [process_cpu_s(p.pid) or 0.0 for p, _ in started]
        children = prof.run_crowd(limiter, n, ",".join(e for _, e in started),
                                  model=raw["model"], source=source, batch=batch,
                                  iterations=iterations)  # fmt: skip
        spent = sum(
            (process_cpu_s(p.pid) or 0.0) - b for (p, _), b in zip(started, before, strict=True)
        )
        for proc, _ in started:
            supervisor.stop(proc, grace_s=2.0)
    shard_cpu = spent / (iterations + LOOP_WARMUP_ITERATIONS)
    return row_of(n, shards, children, shard_cpu, alone["step_cpu_s"], cores)


def main(argv: list[str] | None = None) -> int:
    import secrets

    from bench.shared_cores import _positive_ints
    from emulator import cpu
    from emulator.naming import SECRET_ENV
    from emulator.profiling.document import machine_description

    parser = argparse.ArgumentParser(prog="python -m bench.shared_loop", description=__doc__)
    parser.add_argument("--workload", default="digits-mlp")
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--counts", type=_positive_ints, default=COUNTS)
    parser.add_argument("--shards", type=_positive_ints, default=SHARDS)
    args = parser.parse_args(argv)
    path = REPO / "profiles" / f"{args.workload}.json"
    if not path.is_file() or args.iterations < 1:
        print(
            f"error: bad --workload {args.workload!r} or --iterations {args.iterations}: "
            "expected a profile in profiles/ and a whole number ≥ 1",
            file=sys.stderr,
        )
        return 2
    raw = json.loads(path.read_text())
    cores = cpu.machine_cores()
    os.environ.setdefault(SECRET_ENV, secrets.token_hex(16))  # the shards' and children's
    rows = []
    with cpu.CpuLimiter(f"lambda-dnn-loop-{os.getpid()}") as limiter:
        if not limiter.enforced:
            print(f"error: {limiter.status()}; nothing measured", file=sys.stderr)
            return 1
        for shards in args.shards:
            for n in args.counts:
                rows.append(measure_row(limiter, raw, n, shards, args.iterations, cores))
                r = rows[-1]
                print(
                    f"n={n} shards={shards}: {1e3 * r['iteration_s']:.2f} ms an iteration, "
                    f"CPU bound {1e3 * r['cpu_bound_s']:.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        status = limiter.status()
    meta = {
        "workload": args.workload,
        "cores": cores,
        "iterations": args.iterations,
        "machine": machine_description(),
        "cpu_share": status,
        "command": "python -m bench.shared_loop " + " ".join(argv or sys.argv[1:]),
    }
    print(write_results(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
