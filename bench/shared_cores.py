"""Shared cores: how fast k training processes run at once on this machine, against one alone.

`python -m bench.shared_cores` (about 12 minutes on 2 cores) writes bench/results/shared-cores.*.

On the local platform the n workers time-share the machine's cores, and the model's floor for a
step is the one-vCPU rate spread over them, R(1)·C/n, with C the catalog's `total_vcpu` (0.75 ×
the cores: calibrate leaves the rest to the PS and the S3 server). Under BSP those two are idle
while the workers compute, so the question is which C the workers really get, and whether
time-slicing k processes costs more than the division. This measures it without a PS or a
barrier: k copies of the profiler's training child (emulator/profile.py), each in its own CFS
group at `share` vCPU (a worker's quota), started together; samples/s each against the ideal
min(share, cores/k) / share × the rate of one alone at that share, with cores the machine's
(C = cores) and the catalog's (C = 0.75 × cores). Counts are taken round-robin, `--repeats`
times, and the median kept: the machine drifts by ±10% within minutes.
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

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
WORKLOADS = ("synthetic-cifar-cnn", "synthetic-cifar-mobilenetv2")
SHARE = 1280 / 1769  # the grid's MobileNetV2 workers (bench/predict.py): 0.72 vCPU each
COUNTS = (1, 2, 4, 8)


def ideal_samples_s(alone_samples_s: float, share: float, count: int, cores: float) -> float:
    """One process's rate when `count` run at once on `cores`: alone at its share, slowed by
    the time-slicing only when the quotas together ask for more than the cores."""
    return alone_samples_s * min(share, cores / count) / share


def row_of(
    workload: str, count: int, runs: list[float], alone: float, share: float, cores: float
) -> dict[str, Any]:
    """One table row: the median of `runs` against the ideal at C = cores and C = 0.75 × cores."""
    measured = statistics.median(runs)
    return {
        "workload": workload,
        "count": count,
        "share": share,
        "runs_samples_s": [round(r, 2) for r in runs],
        "samples_s": measured,
        "vs_machine_cores": measured / ideal_samples_s(alone, share, count, cores),
        "vs_catalog_cores": measured / ideal_samples_s(alone, share, count, 0.75 * cores),
    }


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """bench/results/shared-cores.{json,md,png}; returns the markdown."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "shared-cores.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    cores = meta["cores"]
    lines = [
        f"# k training processes at once on {cores:g} cores, each at {meta['share']:.3f} vCPU",
        "",
        f"| workload | k | samples/s each (median of {meta['repeats']}) | runs | "
        f"÷ ideal, C = {cores:g} cores | ÷ ideal, C = {0.75 * cores:g} (catalog) |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['count']} | {r['samples_s']:.1f} | "
            f"{', '.join(f'{x:g}' for x in r['runs_samples_s'])} | {r['vs_machine_cores']:.3f} | "
            f"{r['vs_catalog_cores']:.3f} |"
        )
    lines += [
        "",
        "ideal = the rate of one alone at the share × min(share, C/k) / share. A ratio of 1 in a",
        "column means that C is the one the processes got; above 1, they got more.",
        f"Machine: {meta['machine']}. CPU share: {meta['cpu_share']}.",
        f"Command: `{meta['command']}`.",
    ]
    text = "\n".join(lines) + "\n"
    (RESULTS / "shared-cores.md").write_text(text)
    _plot(rows, RESULTS / "shared-cores.png", cores)
    return text


def _plot(rows: list[dict[str, Any]], path: Path, cores: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for workload in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == workload]
        ax.plot([r["count"] for r in mine], [r["vs_machine_cores"] for r in mine], "o-",
                label=f"{workload}, C = {cores:g}")  # fmt: skip
        ax.plot([r["count"] for r in mine], [r["vs_catalog_cores"] for r in mine], "x--",
                label=f"{workload}, C = {0.75 * cores:g}")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("processes training at once (k)")
    ax.set_ylabel("samples/s each ÷ ideal")
    ax.set_title("Time-sliced training on shared cores")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"bad counts {text!r}: expected e.g. 1,2,4,8")
    return values


def main(argv: list[str] | None = None) -> int:
    from emulator import cpu
    from emulator.profiling import children as prof
    from emulator.profiling.document import machine_description

    parser = argparse.ArgumentParser(prog="python -m bench.shared_cores", description=__doc__)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--share", type=float, default=SHARE)
    parser.add_argument("--counts", type=_positive_ints, default=COUNTS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--measure-s", type=float, default=6.0)
    args = parser.parse_args(argv)
    cores = cpu.machine_cores()
    if not 0 < args.share <= cores or args.repeats < 1 or args.measure_s <= 0:
        print(f"error: bad --share {args.share:g}, --repeats {args.repeats} or --measure-s "
              f"{args.measure_s:g}: expected 0 < share ≤ {cores:g}, repeats ≥ 1, measure-s > 0",
              file=sys.stderr)  # fmt: skip
        return 2
    rows = []
    with contextlib.ExitStack() as stack:
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-shared-{os.getpid()}"))
        if not limiter.enforced:
            print(f"error: {limiter.status()}; nothing measured", file=sys.stderr)
            return 1
        for workload in args.workloads.split(","):
            raw = json.loads((REPO / "profiles" / f"{workload}.json").read_text())
            kw = {
                "model": raw["model"],
                "source": prof.dataset_source(raw["dataset"], int(raw["dataset_samples"])),
                "batch": int(raw["profiled_local_batch"]),
                "measure_s": args.measure_s,
                "share": args.share,
            }
            runs: dict[int, list[float]] = {k: [] for k in (1, *args.counts)}
            for _ in range(args.repeats):
                for k in runs:
                    runs[k].append(prof.measure_parallel(limiter, k, **kw))
                    print(f"{workload}: {k} at once, {runs[k][-1]:.1f} samples/s each",
                          file=sys.stderr, flush=True)  # fmt: skip
            alone = statistics.median(runs[1])
            rows += [row_of(workload, k, runs[k], alone, args.share, cores) for k in runs]
        status = limiter.status()
    meta = {
        "cores": cores,
        "share": args.share,
        "repeats": args.repeats,
        "machine": machine_description(),
        "cpu_share": status,
        "command": "python -m bench.shared_cores " + " ".join(argv or sys.argv[1:]),
    }
    print(write_results(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
