"""A pipelined run's stages in the report: each stage's terms per iteration, measured beside the
plan's `Stage` predictions.

Per stage and iteration: compute (forward + backward of its blocks over the M micro-batches),
boundary (waiting for and moving the activations and their gradients through S3) and sync (its
replicas' gradient exchange: the PS push and pull, or the S3 reducers' work). Measured is the
mean over the stage's replicas of each one's seconds over its iterations run; predicted is the
plan's per micro-batch figures times M, and its sync per iteration.
"""

from __future__ import annotations

from typing import Any

from emulator.records import WorkerState
from functions.terms import link_timing
from provisioner.pipeline_plan import Stage
from provisioner.plan import Plan

TERMS = ("compute", "boundary", "sync")


def link_terms_s(link: dict[str, Any]) -> dict[str, float]:
    """One stage link's seconds of each stage term."""
    timings = link.get("timings") or {}
    boundary = float(timings.get("boundary_wait_s", 0.0)) + float(
        timings.get("boundary_transfer_s", 0.0)
    )
    sync = link_timing(link, "communication") + link_timing(link, "reduce")
    return {"compute": link_timing(link, "compute"), "boundary": boundary, "sync": sync}


def worker_per_iteration_s(worker: WorkerState) -> dict[str, float] | None:
    """A replica's seconds per iteration of each term over its links; None if it ran none."""
    iterations = sum(int(link.get("iterations_run", 0)) for link in worker.links)
    if iterations == 0:
        return None
    per_link = [link_terms_s(link) for link in worker.links]
    return {t: sum(p[t] for p in per_link) / iterations for t in TERMS}


def predicted_per_iteration_s(stage: Stage, micro_batches: int) -> dict[str, float]:
    """The plan's figures for one iteration of `stage` (GPipe: M micro-batches each way)."""
    return {
        "compute": micro_batches * stage.compute_per_micro_batch_s,
        "boundary": micro_batches * stage.boundary_per_micro_batch_s,
        "sync": stage.sync_per_iteration_s,
    }


def stage_rows(plan: Plan, workers: list[WorkerState]) -> list[dict[str, Any]]:
    """One row per stage (none for a one-stage plan): its blocks, memory, and each term per
    iteration, measured (the mean over its replicas) and predicted."""
    if plan.pipeline is None:
        return []
    rows = []
    for stage in plan.pipeline.stages:
        measured = [m for w in workers if w.stage == stage.index
                    if (m := worker_per_iteration_s(w)) is not None]  # fmt: skip
        rows.append({
            "stage": stage.index,
            "blocks": [stage.first_block, stage.stop_block],
            "memory_mb": stage.memory_mb,
            "replicas": len(measured),
            "measured_per_iteration_s": {
                t: sum(m[t] for m in measured) / len(measured) if measured else None
                for t in TERMS
            },
            "predicted_per_iteration_s": predicted_per_iteration_s(
                stage, plan.pipeline.micro_batches
            ),
        })  # fmt: skip
    return rows


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{1000 * value:.1f} ms"


def stage_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The report's lines for the stages: each term per iteration, measured (plan's)."""
    lines = []
    for row in rows:
        measured, predicted = row["measured_per_iteration_s"], row["predicted_per_iteration_s"]
        first, stop = row["blocks"]
        terms = ", ".join(f"{t} {_ms(measured[t])} ({_ms(predicted[t])})" for t in TERMS)
        lines.append(f"stage {row['stage']} (blocks {first}-{stop - 1}, {row['memory_mb']} MB, "
                     f"{row['replicas']} replicas) per iteration, measured (plan): "
                     f"{terms}")  # fmt: skip
    return lines
