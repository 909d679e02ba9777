"""Pipeline benchmark: the best pipelined plan against the best data-parallel plan, and the
pipelined search's solve time.

Run: `.venv/bin/python -m bench.pipeline` (writes bench/results/pipeline.md).

For each block profile (bench/pipeline_shapes.py: ResNet-18 in 10 blocks, a GPT-2-large-shaped
transformer in 38 blocks, both from analytic figures) and several deadlines on lambda-2025: the
cheapest data-parallel plan (today's planner, the profile without its blocks) and the cheapest
pipelined plan (pipeline_search, S ≥ 2) under the same planning deadline (the catalog's slack
and interval applied as plan_job applies them), with the search's wall time. The pipelined
search runs with the concurrency and the stage count capped (CONCURRENCY, MAX_STAGES), as this
table always has, so that its plans compare across changes; bench/pipeline_solve.py times the
search over plan_job's default space.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

from bench.pipeline_shapes import gpt2_large_profile, resnet18_blocks_profile
from provisioner import Goal, Limits, load_catalog
from provisioner.parse import format_duration_s, format_usd
from provisioner.pipeline_search import PipelineCandidate, search_pipeline
from provisioner.planner import Infeasible, plan_job
from provisioner.profile import WorkloadProfile

RESULTS = Path(__file__).resolve().parent / "results"
REGENERATE = ".venv/bin/python -m bench.pipeline"
CONCURRENCY = 8
MAX_STAGES = 3
DEADLINES_H = (2.0, 4.0, 8.0)


def data_parallel(profile: WorkloadProfile, goal: Goal, limits: Limits) -> tuple[str, float]:
    """Today's best plan for the profile without its blocks: (cost, time, n × memory; its
    cost, inf where there is none)."""
    plain = dataclasses.replace(profile, blocks=(), runtime_memory_mb=None)
    try:
        plan = plan_job(plain, load_catalog("lambda-2025"), goal, limits, "bench",
                        alternatives=0, frontier_points=0).plan  # fmt: skip
    except Infeasible as exc:
        return ("does not fit" if "MB" in str(exc) else "none meets it"), math.inf
    return (
        f"{format_usd(plan.cost.total_usd)}, {format_duration_s(plan.prediction.total_s)}, "
        f"{plan.n_workers} × {plan.memory_mb} MB"
    ), plan.cost.total_usd


def pipelined(c: PipelineCandidate | None) -> tuple[str, str, str]:
    """(cost and time, S and cut with memories, r / M / sync) of a pipelined candidate."""
    if c is None:
        return ("none meets it", "", "")
    cut = "; ".join(f"{s.first}-{s.stop - 1} @ {s.memory_mb}" for s in c.stages)
    sync = f"PS {c.route.ps_type} × {c.route.ps_count}" if c.route.sync == "ps" else (
        f"S3 k = {c.route.reducers}"
    )  # fmt: skip
    return (
        f"{format_usd(c.figures.total_usd)}, {format_duration_s(c.figures.total_s)}",
        f"{len(c.stages)}: {cut}",
        f"{c.replicas} / {c.micro_batches} / {sync} / {c.arch}",
    )


def main() -> None:
    catalog = load_catalog("lambda-2025")
    limits = Limits(max_concurrency=CONCURRENCY, sync="auto")
    lines = [
        "## Pipeline benchmark",
        "",
        f"Regenerate: `{REGENERATE}`. Predictions of the model on lambda-2025 from synthetic block",
        "profiles (bench/pipeline_shapes.py, analytic figures, not measured). Concurrency ≤ "
        f"{CONCURRENCY} functions, S ≤ {MAX_STAGES} stages; solve time is the pipelined "
        "search's wall time on this shared 2-core machine (load average "
        f"{os.getloadavg()[0]:.1f} at start).",
        "",
        "| workload | blocks | deadline | best data-parallel (cost, time, n × memory) | best "
        "pipelined (cost, time) | S: cut (blocks @ MB) | r / M / sync / arch | solve time | "
        "solve time bounded by the one-stage cost (as plan_job) |",
        "|---|---:|---:|---|---|---|---|---:|---:|",
    ]
    for profile in (resnet18_blocks_profile(), gpt2_large_profile()):
        for hours in DEADLINES_H:
            goal = Goal(deadline_s=hours * 3600.0)
            planning = goal.for_catalog(catalog.default_slack, catalog.prediction_interval.high)
            deadline_s = planning.planning_deadline_s
            start = time.perf_counter()
            best = search_pipeline(profile, catalog, limits, deadline_s, None,
                                   max_stages=MAX_STAGES)  # fmt: skip
            solve_s = time.perf_counter() - start
            one_stage, ceiling = data_parallel(profile, goal, limits)
            start = time.perf_counter()  # as plan_job runs it: bounded by the one-stage cost
            search_pipeline(profile, catalog, limits, deadline_s, None, max_stages=MAX_STAGES,
                            ceiling=ceiling)  # fmt: skip
            bounded_s = time.perf_counter() - start
            cost, cut, how = pipelined(best)
            lines.append(
                f"| {profile.name} | {len(profile.blocks)} | {hours:g} h | {one_stage} | {cost} "
                f"| {cut} | {how} | {solve_s:.3f} s | {bounded_s:.3f} s |"
            )
            print(lines[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pipeline.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
