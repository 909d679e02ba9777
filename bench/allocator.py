"""The worker's step with malloc's thresholds fixed (functions.allocator) and with glibc's defaults.

`python -m bench.allocator` (about 6 minutes on 2 cores) writes bench/results/allocator.*.

Each run is a real emulator run of one worker (the CNN on synthetic CIFAR, 1,769 MB: one vCPU,
60 iterations, one PS shard, the local S3 server); the two ways alternate, `--repeats` times
each, so a drift in the machine's speed meets both. Per run: the worker's compute per step
(its own timings), minor page faults per step in its training loop, and the run's total. The
ratio of the medians is the figure; these VMs drift by ±15% within minutes, so one pair of runs
says little.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.outputs import pyplot, save_figure, write_outputs
from functions.allocator import OFF_SWITCH

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
WAYS = ("fixed", "defaults")


@contextlib.contextmanager
def _way(name: str) -> Iterator[None]:
    """The workers inherit this process's environment (emulator.child_env.child_env)."""
    before = os.environ.get(OFF_SWITCH)
    if name == "defaults":
        os.environ[OFF_SWITCH] = "1"
    else:
        os.environ.pop(OFF_SWITCH, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(OFF_SWITCH, None)
        else:
            os.environ[OFF_SWITCH] = before


def one_run(way: str, endpoint: Any, out: Path, iterations: int) -> dict[str, Any]:
    from bench.predict import Case, plan_of
    from emulator.options import Options
    from emulator.orchestrator import run

    plan = plan_of(Case("synthetic-cifar-cnn", 1, 1769, 1, iterations))
    with _way(way):
        run(plan, Options(invocation_limit_s=300.0, out_dir=out, quiet=True,
                          print_report=False), endpoint=endpoint)  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    terms = {row["term"]: row for row in report["terms"]}
    links = [link for worker in report["invocations"]["links"] for link in worker]
    return {
        "way": way,
        "allocator": links[0]["allocator"],
        "compute_ms_per_step": 1000 * terms["compute"]["measured_s"] / iterations,
        "faults_per_step": sum(link["minor_faults"] for link in links) / iterations,
        "total_s": terms["total"]["measured_s"],
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for way in WAYS:
        mine = [r for r in runs if r["way"] == way]
        out[way] = {k: statistics.median(r[k] for r in mine)
                    for k in ("compute_ms_per_step", "faults_per_step", "total_s")}  # fmt: skip
    return out


def write_results(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    summary = summarise(runs)
    fixed, default = summary["fixed"], summary["defaults"]
    lines = [
        "# malloc's thresholds fixed vs glibc's defaults",
        "",
        "| way | runs | compute ms/step (median) | minor faults/step | total s |",
        "|---|---|---|---|---|",
    ]
    for way in WAYS:
        n = sum(1 for r in runs if r["way"] == way)
        s = summary[way]
        lines.append(f"| {way} | {n} | {s['compute_ms_per_step']:.1f} | "
                     f"{s['faults_per_step']:.0f} | {s['total_s']:.2f} |")  # fmt: skip
    lines += [
        "",
        f"Compute per step, defaults / fixed: "
        f"**{default['compute_ms_per_step'] / fixed['compute_ms_per_step']:.3f}**; total "
        f"{default['total_s'] / fixed['total_s']:.3f}.",
        "",
        "Every run: "
        + "; ".join(
            f"{r['way']} {r['compute_ms_per_step']:.1f} ms, {r['faults_per_step']:.0f} faults"
            for r in runs
        )
        + ".",
        f"Case: synthetic-cifar-cnn, n = 1, 1,769 MB, {meta['iterations']} iterations. "
        f"Machine: {meta['machine']}. Command: `python -m bench.allocator --repeats "
        f"{meta['repeats']}`.",
        "",
    ]
    doc = {"meta": meta, "runs": runs}
    return write_outputs(RESULTS, "allocator", doc, "\n".join(lines), lambda p: _plot(runs, p))


def _plot(runs: list[dict[str, Any]], path: Path) -> None:
    fig, ax = pyplot().subplots(figsize=(6, 3.5))
    for k, way in enumerate(WAYS):
        values = [r["compute_ms_per_step"] for r in runs if r["way"] == way]
        ax.scatter([k] * len(values), values, label=way)
    ax.set_xticks(range(len(WAYS)), WAYS)
    ax.set_ylabel("worker compute, ms per step")
    ax.set_title("CNN step in the emulator's worker, 1 vCPU")
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.allocator")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args(argv)
    from emulator import cpu
    from emulator.s3server import weed_server

    runs = []
    with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:
        for k in range(args.repeats):
            for way in WAYS if k % 2 == 0 else WAYS[::-1]:
                row = one_run(way, endpoint, Path(tmp) / f"{way}-{k}", args.iterations)
                runs.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    meta = {"machine": cpu.this_machine(), "repeats": args.repeats,
            "iterations": args.iterations}  # fmt: skip
    print(write_results(runs, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
