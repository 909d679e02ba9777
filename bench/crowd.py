"""The crowd: how much slower a BSP step gets when more workers than cores train through a PS.

`python -m bench.crowd` (about 5 minutes on 2 cores) writes bench/results/crowd.*.

The profile records one crowd (emulator/profile.py: 2 × cores children at 1 vCPU through one
loopback shard, in lockstep) as `crowded_step_ratio`, and the model holds that ratio from there
on (crowded_step_factor). The prediction benchmark's MobileNetV2 rows with n ≥ 2 measured
compute 1.13-1.88× their prediction, so this asks the two questions the model leans on: does the
crowd keep growing past 2 × cores, and does a worker's quota below 1 vCPU (the grid's 1,280 MB:
0.72 vCPU) change it? Per round: one child alone at 1 vCPU, then each crowd (count × share)
through a fresh shard. Reported against the child alone: the step's CPU (what the profile keeps)
and the iteration's wall against the ideal, the step alone at 1 vCPU × max(1/share, count/cores)
(what the model's compute predicts before the crowd ratio), and the CPU a child's first steps cost
beyond as many steady ones, in steady steps (what the profile keeps as crowded_warmup_iterations
from one crowd and the model stretches over larger n). Rounds go round the crowds, `--repeats`
times; medians kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.outputs import pyplot, save_figure, write_outputs

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
WORKLOAD = "synthetic-cifar-mobilenetv2"
COUNTS = (2, 4, 8, 12)
SHARES = (1.0, 1280 / 1769)  # the profile's crowd, and the grid's MobileNetV2 workers
MEASURE_S = 6.0  # a crowd's wall, about


def ideal_iteration_s(alone_step_s: float, count: int, cores: float, share: float) -> float:
    """An iteration of `count` workers at `share` vCPU each time-sharing `cores`, each step as
    alone at 1 vCPU (`alone_step_s`) stretched by its quota or by the turns on the cores,
    whichever is longer: the model's min(R(m), R(1)·C/n) before the crowd ratio (the exchange
    left out: it is milliseconds here)."""
    return alone_step_s * max(1.0 / share, count / cores)


def row_of(
    count: int, share: float, rounds: list[dict[str, float]], cores: float
) -> dict[str, Any]:
    """One table row from the rounds' (alone step CPU and wall, crowd step CPU, iteration wall)."""
    cpu = [r["crowd_step_cpu_s"] / r["alone_step_cpu_s"] for r in rounds]
    # rounds measured before the warm-up was kept have none
    warmup = [r["crowd_warmup_cpu_s"] / r["alone_step_cpu_s"] for r in rounds
              if "crowd_warmup_cpu_s" in r]  # fmt: skip
    wall = [
        r["crowd_iteration_s"] / ideal_iteration_s(r["alone_step_s"], count, cores, share)
        for r in rounds
    ]
    return {
        "count": count,
        "share": share,
        "step_cpu_ratio": statistics.median(cpu),
        "iteration_vs_ideal": statistics.median(wall),
        "warmup_steps": statistics.median(warmup) if warmup else None,
        "rounds": rounds,
    }


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """bench/results/crowd.{json,md,png}; returns the markdown."""
    lines = [
        f"# {meta['workload']}: crowds through one loopback shard on {meta['cores']:g} cores",
        "",
        f"| children | vCPU each | step CPU ÷ alone (median of {meta['repeats']}) | "
        "iteration ÷ ideal (step × max(1/share, count/cores)) | first steps' excess CPU, "
        "in steady steps |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['count']} | {r['share']:.3f} | {r['step_cpu_ratio']:.3f} | "
            f"{r['iteration_vs_ideal']:.3f} | "
            f"{'–' if r.get('warmup_steps') is None else format(r['warmup_steps'], '.2f')} |"
        )
    lines += [
        "",
        "alone: one child at 1 vCPU, right before each round's crowds. The profile keeps the",
        "step-CPU ratio of the 2 × cores crowd at 1 vCPU (crowded_step_ratio) for every larger n.",
        f"Machine: {meta['machine']}. CPU share: {meta['cpu_share']}. Load average at the end: "
        f"{meta.get('loadavg', 'not kept')} (other jobs on the cores stretch the wall column; the "
        "CPU columns are each child's own).",
        f"Command: `{meta['command']}`.",
    ]
    doc = {"meta": meta, "rows": rows}
    text = "\n".join(lines) + "\n"
    return write_outputs(RESULTS, "crowd", doc, text, lambda p: _plot(rows, p))


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = pyplot().subplots(figsize=(5.5, 4))
    for share in sorted({r["share"] for r in rows}, reverse=True):
        mine = [r for r in rows if r["share"] == share]
        counts = [r["count"] for r in mine]
        ax.plot(counts, [r["step_cpu_ratio"] for r in mine], "o-",
                label=f"step CPU, {share:.2f} vCPU")  # fmt: skip
        ax.plot(counts, [r["iteration_vs_ideal"] for r in mine], "x--",
                label=f"iteration ÷ ideal, {share:.2f} vCPU")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers in lockstep through one shard")
    ax.set_ylabel("÷ one alone")
    ax.set_title("The crowded BSP step")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def _numbers(kind: type) -> Any:
    """An argparse type: comma-separated positive numbers of `kind`."""

    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(kind(x) for x in text.split(","))
        except ValueError:
            values = ()
        if not values or min(values) <= 0:
            raise argparse.ArgumentTypeError(f"bad list {text!r}: expected e.g. 2,4,8 or 1,0.72")
        return values

    return parse


def main(argv: list[str] | None = None) -> int:
    from emulator import cpu
    from emulator.profiling import children as prof
    from emulator.profiling.document import machine_description

    parser = argparse.ArgumentParser(prog="python -m bench.crowd", description=__doc__)
    parser.add_argument("--workload", default=WORKLOAD)
    parser.add_argument("--counts", type=_numbers(int), default=COUNTS)
    parser.add_argument("--shares", type=_numbers(float), default=SHARES)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--measure-s", type=float, default=MEASURE_S)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.measure_s <= 0 or max(args.shares) > 1.0:
        print(f"error: bad --repeats {args.repeats}, --measure-s {args.measure_s:g} or --shares "
              f"{args.shares}: expected repeats ≥ 1, measure-s > 0, shares ≤ 1 vCPU",
              file=sys.stderr)  # fmt: skip
        return 2
    profile_path = REPO / "profiles" / f"{args.workload}.json"
    if not profile_path.is_file():
        print(f"error: bad --workload {args.workload!r}: no profiles/{args.workload}.json",
              file=sys.stderr)  # fmt: skip
        return 2
    raw = json.loads(profile_path.read_text())
    kw = {
        "model": raw["model"],
        "source": prof.dataset_source(raw["dataset"], int(raw["dataset_samples"])),
        "batch": int(raw["profiled_local_batch"]),
    }
    cores = cpu.machine_cores()
    rounds: dict[tuple[int, float], list[dict[str, float]]] = {
        (c, s): [] for c in args.counts for s in args.shares
    }
    with contextlib.ExitStack() as stack:
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-crowd-{os.getpid()}"))
        if not limiter.enforced:
            print(f"error: {limiter.status()}; nothing measured", file=sys.stderr)
            return 1
        for _ in range(args.repeats):
            alone = prof.measure_share(limiter, 1.0, measure_s=4.0, **kw)
            step_s = kw["batch"] / alone["samples_per_s"]
            for count, share in rounds:
                iterations = prof.crowd_iterations(
                    alone["samples_per_s"], kw["batch"], int(cores), count, args.measure_s
                )
                with prof.loopback_ps(workers=count) as endpoint:
                    kids = prof.run_crowd(limiter, count, endpoint, iterations=iterations,
                                          share=share, **kw)  # fmt: skip
                rounds[(count, share)].append({
                    "alone_step_cpu_s": alone["step_cpu_s"],
                    "alone_step_s": step_s,
                    "crowd_step_cpu_s": statistics.median(k["crowded_step_cpu_s"] for k in kids),
                    "crowd_warmup_cpu_s": statistics.median(
                        k["crowded_warmup_cpu_s"] for k in kids
                    ),
                    "crowd_iteration_s": statistics.median(
                        k["crowded_iteration_s"] for k in kids
                    ),
                })  # fmt: skip
                print(f"{count} × {share:.2f} vCPU: {rounds[(count, share)][-1]}",
                      file=sys.stderr, flush=True)  # fmt: skip
        status = limiter.status()
    rows = [row_of(c, s, r, cores) for (c, s), r in rounds.items()]
    meta = {
        "workload": args.workload,
        "cores": cores,
        "repeats": args.repeats,
        "machine": machine_description(),
        "cpu_share": status,
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "command": "python -m bench.crowd " + " ".join(argv or sys.argv[1:]),
    }
    print(write_results(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
