"""MobileNetV2 at n = 8 on 2 cores: is the excess over the prediction per iteration, per link,
per shard, or paid once?

`python -m bench.fixed_cost` (about 4 minutes) writes bench/results/fixed-cost.*.

The prediction grid's worst row (bench/results/predict.md: MobileNetV2, n = 8, 1,280 MB, two
shards, 4 iterations a link) measured compute 1.88× its prediction. This runs that row and three
variants of it through the same emulator path (bench.predict.measure), each `--repeats` times:
one link instead of two, one shard instead of two, and twice the iterations. What the excess
does across them says where it lies: the same with one link (not the re-invocations), with one
shard (not the PS), and the same again at twice the iterations (a cost paid once, not per
iteration). The profile is the prediction grid's (bench/results/predict-platform/).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import predict as bp
from bench.outputs import pyplot, save_figure, write_outputs
from emulator import cpu

RESULTS = bp.RESULTS
PROFILE = RESULTS / "predict-platform" / "synthetic-cifar-mobilenetv2.json"
W = "synthetic-cifar-mobilenetv2"
CASES = (
    bp.Case(W, 8, 1280, 2, 8, 4),  # the grid's row
    bp.Case(W, 8, 1280, 2, 8, 0),  # one link
    bp.Case(W, 8, 1280, 1, 8, 0),  # one shard
    bp.Case(W, 8, 1280, 2, 16, 0),  # twice the iterations
)


def row_of(case: bp.Case, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A case's medians: compute and total, predicted and measured, and the excess of each."""
    out: dict[str, Any] = {"case": case.label, "iterations": case.iterations}
    for term in ("compute", "total"):
        predicted = statistics.median(r["terms"][term]["predicted_local_s"] for r in runs)
        measured = statistics.median(r["terms"][term]["measured_s"] for r in runs)
        out[term] = {
            "predicted_s": predicted,
            "measured_s": measured,
            "excess_s": measured - predicted,
        }
    return out


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"# MobileNetV2, n = 8 on {meta['cores']} cores: where the excess lies",
        "",
        f"| case | k | compute pred./meas. s (median of {meta['repeats']}) | compute excess s "
        "| total pred./meas. s | total excess s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c, t = r["compute"], r["total"]
        lines.append(
            f"| {r['case']} | {r['iterations']} | {c['predicted_s']:.2f}/{c['measured_s']:.2f} | "
            f"{c['excess_s']:.2f} | {t['predicted_s']:.2f}/{t['measured_s']:.2f} | "
            f"{t['excess_s']:.2f} |"
        )
    lines += [
        "",
        f"Profile: {meta['profile']}. Machine: {meta['machine']}.",
        f"Command: `{meta['command']}`.",
    ]
    text = "\n".join(lines) + "\n"
    return write_outputs(RESULTS, "fixed-cost", {"meta": meta, "rows": rows}, text,
                         lambda p: _plot(rows, p))  # fmt: skip


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, ax = pyplot().subplots(figsize=(6.5, 3.5))
    labels = [r["case"].replace(f"{W} ", "") + f", k={r['iterations']}" for r in rows]
    ax.barh(labels, [r["compute"]["predicted_s"] for r in rows], label="compute predicted")
    ax.barh(labels, [r["compute"]["excess_s"] for r in rows],
            left=[r["compute"]["predicted_s"] for r in rows], label="excess measured")  # fmt: skip
    ax.set_xlabel("seconds")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    from emulator.s3server import weed_server

    parser = argparse.ArgumentParser(prog="python -m bench.fixed_cost", description=__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        print(f"error: bad --repeats {args.repeats}: expected a whole number ≥ 1", file=sys.stderr)
        return 2
    if not PROFILE.is_file():
        print(f"error: no {PROFILE}: run python -m bench.predict first", file=sys.stderr)
        return 2
    runs: list[list[dict[str, Any]]] = [[] for _ in CASES]
    with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:
        for k in range(args.repeats):  # round the cases: a drift meets them all
            for i, case in enumerate(CASES):
                runs[i].append(bp.measure(case, endpoint, Path(tmp) / f"c{i}-{k}", PROFILE))
                compute_s = runs[i][-1]["terms"]["compute"]["measured_s"]
                print(f"{case.label}, k={case.iterations}: compute {compute_s:.2f} s",
                      file=sys.stderr)  # fmt: skip
    meta = {
        "cores": len(os.sched_getaffinity(0)),
        "repeats": args.repeats,
        "profile": str(PROFILE.relative_to(bp.REPO_ROOT)),
        "machine": cpu.this_machine(),
        "command": "python -m bench.fixed_cost " + " ".join(argv or sys.argv[1:]),
    }
    print(write_results([row_of(c, r) for c, r in zip(CASES, runs, strict=True)], meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
