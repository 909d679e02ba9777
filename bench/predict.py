"""Predicted vs measured training time on the emulator across n workers and m MB.

`python -m bench.predict [--workload digits-mlp] [--n 1,2,3] [--memory 1024,1769]
[--iterations 1500] [--cpu-scale 1.0]`

For each (n, m) the planner's own `build_plan` makes the Plan for that cell (one PS shard of the
cheapest type), the emulator trains it (real weed S3 server, PS process, worker processes held
to m/1769 × cpu_scale cores), and the run report's measured terms are set against the
prediction. Compute is also re-predicted at the cores a worker really got (the profile's rate
curve at the local share) — the comparison that tests the model on this machine; the Plan's
communication term assumes Lambda↔EC2 bandwidth and is shown for reference only.
Writes bench/results/predict-<workload>.{json,md,png}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emulator.orchestrator import Options, run
from emulator.s3server import weed_server
from provisioner import Goal, Limits, load_catalog, load_profile
from provisioner.planner import build_plan
from provisioner.space import Choice

RESULTS = Path(__file__).resolve().parent / "results"


def plan_for(workload: str, n: int, memory_mb: int, iterations: int | None) -> Any:
    """The Plan of one cell, optionally trained for fewer iterations."""
    profile, catalog = load_profile(workload), load_catalog("lambda-2025")
    ps_type = min(catalog.ps_types, key=lambda p: p.usd_per_hour).name
    plan = build_plan(
        profile,
        catalog,
        Choice(n, memory_mb, "x86_64", ps_type, 1),
        Goal(deadline_s=None),
        Limits(),
        job=f"bench-n{n}-m{memory_mb}",
    )
    if iterations is None:
        return plan
    return dataclasses.replace(
        plan, training=dataclasses.replace(plan.training, iterations=iterations)
    )


def measure(plan: Any, cpu_scale: float, endpoint: Any, out: Path) -> dict[str, Any]:
    """Train one plan; the row of the table."""
    started = time.monotonic()
    run(
        plan,
        Options(
            invocation_limit_s=900,
            cpu_scale=cpu_scale,
            out_dir=out,
            quiet=True,
            print_report=False,
        ),
        endpoint=endpoint,
    )
    report = json.loads((out / "report.json").read_text())
    terms = {row["term"]: row for row in report["terms"]}
    k = plan.training.iterations
    return {
        "n": plan.n_workers,
        "memory_mb": plan.memory_mb,
        "worker_cores": report["emulation"]["worker_cores"],
        "iterations": k,
        "compute_predicted_local_s": report["compute_predicted_at_local_share_s"],
        "compute_full_speed_s": report["compute_at_full_speed_s"],
        "throttled_s": max(report["emulation"]["throttled_s"].values(), default=0.0),
        "compute_measured_s": terms["compute"]["measured_s"],
        "communication_predicted_aws_s": k * plan.prediction.communication_per_iteration_s,
        "communication_measured_s": terms["communication"]["measured_s"],
        "startup_predicted_s": plan.prediction.startup_s,
        "startup_measured_s": terms["startup"]["measured_s"],
        "train_measured_s": report["wall"]["train_s"],
        "accuracy": (report.get("accuracy") or {}).get("accuracy"),
        "run_s": time.monotonic() - started,
    }


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"predict-{meta['workload']}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    head = (
        "| n | m MB | cores/worker | iterations | compute pred. (local share) s | compute "
        "at full speed s | compute meas. s | ratio to pred. | CFS throttled s | comm. pred. "
        "(AWS) s | comm. meas. s | start-up pred./meas. s | train meas. s | accuracy |"
    )
    lines = [
        f"# predicted vs measured ({meta['workload']}, {meta['date']})",
        "",
        head,
        "|" + "---|" * 14,
    ]
    for r in rows:
        ratio = r["compute_measured_s"] / r["compute_predicted_local_s"]
        lines.append(
            f"| {r['n']} | {r['memory_mb']} | {r['worker_cores']:.3f} | {r['iterations']} | "
            f"{r['compute_predicted_local_s']:.2f} | {r['compute_full_speed_s']:.2f} | "
            f"{r['compute_measured_s']:.2f} | {ratio:.2f} | {r['throttled_s']:.2f} | "
            f"{r['communication_predicted_aws_s']:.2f} | {r['communication_measured_s']:.2f} | "
            f"{r['startup_predicted_s']:.1f}/{r['startup_measured_s']:.1f} | "
            f"{r['train_measured_s']:.1f} | {r['accuracy']:.3f} |"
        )
    lines += [
        "",
        f"machine load while measuring: {meta['loadavg']}; command: {meta['command']}",
        "",
        "Reading the table: compute is re-predicted from the profile's rate curve at the cores a",
        "worker really got (m/1769 x cpu_scale): lambda-DNN's t_comp, right when every step is",
        "throttled. A worker computes in short bursts between PS round trips, and a CFS quota",
        "(20 ms period, as observed in Lambda) lets a step that starts after a wait run at full",
        "speed until the period's quota is spent; 'at full speed' is the compute if no step were",
        "throttled, and 'CFS throttled' the slowest worker's time held by the quota (cpu.stat,",
        "start-up included). Communication is predicted for Lambda<->EC2 bandwidth and measured",
        "on loopback, where waiting for the slowest worker dominates: for reference only.",
        "Start-up is measured on a shared 2-core machine where n workers start at once.",
    ]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    pred = [r["compute_predicted_local_s"] for r in rows]
    meas = [r["compute_measured_s"] for r in rows]
    ax.scatter(pred, meas)
    for r, x, y in zip(rows, pred, meas, strict=True):
        ax.annotate(f"n={r['n']},m={r['memory_mb']}", (x, y), fontsize=7)
    top = max(pred + meas) * 1.1
    ax.plot([0, top], [0, top], "k--", lw=0.8, label="measured = predicted")
    ax.set_xlabel("predicted compute at the local CPU share (s)")
    ax.set_ylabel("measured compute (s, slowest worker)")
    ax.set_title(f"{meta['workload']}: compute term, emulator")
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.predict")
    parser.add_argument("--workload", default="digits-mlp")
    parser.add_argument("--n", default="1,2,3")
    parser.add_argument("--memory", default="1024,1769")
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--cpu-scale", type=float, default=0.6)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:
        for n in [int(x) for x in args.n.split(",")]:
            for memory_mb in [int(x) for x in args.memory.split(",")]:
                plan = plan_for(args.workload, n, memory_mb, args.iterations)
                row = measure(plan, args.cpu_scale, endpoint, Path(tmp) / plan.job)
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    meta = {
        "workload": args.workload,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "command": "python -m bench.predict " + " ".join(argv or sys.argv[1:]),
        "cpu_scale": args.cpu_scale,
    }
    write_results(rows, meta)
    print((RESULTS / f"predict-{args.workload}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
