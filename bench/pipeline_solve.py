"""Solve time of the pipelined search as plan_job runs it: lambda-2025, the CLI's default limits
(no concurrency or memory limit, sync auto), the planning deadline plan_job derives, bounded
by the one-stage plan's cost (none where the model fits no function).

Run: `.venv/bin/python -m bench.pipeline_solve [repeats]` (writes
bench/results/pipeline-solve.md; median of `repeats` runs, 3 by default). Each row also prints
the plan found (S, cut, memories, r / M / sync / arch, cost and time) so that a change to the
search can be checked to choose the same plans.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
import time
from pathlib import Path

from bench.pipeline_shapes import gpt2_large_profile, resnet18_blocks_profile
from provisioner import Goal, Limits, load_catalog
from provisioner.pipeline_search import MAX_REPLICAS, MAX_STAGES, search_pipeline
from provisioner.planner import Infeasible, plan_job
from provisioner.profile import WorkloadProfile, load_profile

RESULTS = Path(__file__).resolve().parent / "results"
REGENERATE = ".venv/bin/python -m bench.pipeline_solve"
CASES = (
    ("resnet18", 2.0), ("resnet18", 4.0), ("resnet18", 8.0),
    ("gpt2", 2.0), ("gpt2", 4.0), ("gpt2", 8.0),
    ("tokens-gpt2", 4.0), ("tokens-gpt2", 8.0),
)  # fmt: skip


def profiles() -> dict[str, WorkloadProfile]:
    return {
        "resnet18": resnet18_blocks_profile(),
        "gpt2": gpt2_large_profile(),
        "tokens-gpt2": load_profile("profiles/synthetic-tokens-gpt2-large.json"),
    }


def one_stage_usd(profile: WorkloadProfile, goal: Goal, limits: Limits) -> float:
    """The one-stage plan's cost plan_job bounds the search by (inf where there is none)."""
    plain = dataclasses.replace(profile, blocks=(), runtime_memory_mb=None)
    try:
        plan = plan_job(plain, load_catalog("lambda-2025"), goal, limits, "bench",
                        alternatives=0, frontier_points=0).plan  # fmt: skip
    except Infeasible:
        return math.inf
    return plan.cost.total_usd


def describe(c) -> str:  # noqa: ANN001 — a PipelineCandidate or None
    if c is None:
        return "none"
    cut = "; ".join(f"{s.first}-{s.stop - 1} @ {s.memory_mb}" for s in c.stages)
    sync = f"PS {c.route.ps_type} × {c.route.ps_count}" if c.route.sync == "ps" else (
        f"S3 k = {c.route.reducers}"
    )  # fmt: skip
    return (
        f"${c.figures.total_usd:.6f}, {c.figures.total_s:.1f} s; {len(c.stages)}: {cut}; "
        f"{c.replicas} / {c.micro_batches} / {sync} / {c.arch}"
    )


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    catalog = load_catalog("lambda-2025")
    limits = Limits(sync="auto")
    found = profiles()
    load = os.getloadavg()[0]
    lines = [
        "## Pipelined search: solve time as plan_job runs it",
        "",
        f"Regenerate: `{REGENERATE} {repeats}`. lambda-2025, default limits (S ≤ {MAX_STAGES}, "
        f"r ≤ {MAX_REPLICAS}, no concurrency limit, sync auto), bounded by the one-stage plan's "
        f"cost; median of {repeats} runs on this shared 2-core machine (load average "
        f"{load:.1f} at start). Profiles: bench/pipeline_shapes.py (resnet18, gpt2) and "
        "profiles/synthetic-tokens-gpt2-large.json (tokens-gpt2).",
        "",
        "| workload | blocks | deadline | plan found | solve time (median) | min | max |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for name, hours in CASES:
        profile = found[name]
        goal = Goal(deadline_s=hours * 3600.0)
        deadline_s = goal.for_catalog(
            catalog.default_slack, catalog.prediction_interval.high
        ).planning_deadline_s
        ceiling = one_stage_usd(profile, goal, limits)
        times, best = [], None
        for _ in range(repeats):
            start = time.perf_counter()
            best = search_pipeline(profile, catalog, limits, deadline_s, None, ceiling=ceiling)
            times.append(time.perf_counter() - start)
        lines.append(
            f"| {name} | {len(profile.blocks)} | {hours:g} h | {describe(best)} | "
            f"{statistics.median(times):.3f} s | {min(times):.3f} s | {max(times):.3f} s |"
        )
        print(lines[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pipeline-solve.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
