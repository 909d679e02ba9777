"""A profile's `blocks` and `runtime_memory_mb` from the block children's readings, and the
whole-model figures derived from them for a model no function's step holds (pure).

The contract (the pipeline's profile keys): each block's parameter bytes, the output it hands on
and what autograd saves for its backward, per sample, and its forward + backward rate alone at
each vCPU share; the runtime's memory before any model. The sum of the blocks' parameter bytes
is the profile's model_bytes.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

STATIC_FIGURES = ("parameter_bytes", "output_bytes_per_sample", "activation_bytes_per_sample")
# GPipe keeps, per stage: weights, gradients, momentum and the flat vector the exchange sends
# (docs: the pipeline contract's memory of a stage)
PARAMETER_COPIES = 4
MB = 1024 * 1024


def blocks_of(readings: list[dict[str, Any]], arch: str) -> list[dict[str, Any]]:
    """The profile's `blocks` from every child's reading (one per share and repeat): the sizes
    of the first (they do not depend on the share), each share's rate the median of its repeats.
    ValueError where two children disagree on a size (the model is not built the same)."""
    first = readings[0]["blocks"]
    for reading in readings[1:]:
        sizes_of = [[b[k] for k in STATIC_FIGURES] for b in reading["blocks"]]
        if sizes_of != [[b[k] for k in STATIC_FIGURES] for b in first]:
            raise ValueError("the block children measured different sizes; one model, one build")
    shares = sorted({float(r["vcpu_share"]) for r in readings})
    out = []
    for i, block in enumerate(first):
        points = [
            {"vcpu_share": share, "samples_per_s": round(statistics.median(
                r["blocks"][i]["samples_per_s"] for r in readings if r["vcpu_share"] == share
            ), 3)}
            for share in shares
        ]  # fmt: skip
        sizes = {k: int(block[k]) for k in STATIC_FIGURES}
        out.append({"name": block["name"], **sizes, "training_rate": {arch: {"points": points}}})
    return out


def reused_text(readings: list[dict[str, Any]]) -> str:
    """Which blocks were measured and which took another's figures (block_measure: the same
    class and shapes), for the source of `blocks`."""
    blocks = readings[0]["blocks"]
    measured = [b["name"] for i, b in enumerate(blocks) if b["measured_on"] == i]
    if len(measured) == len(blocks):
        return "every block measured"
    return (
        f"{len(measured)} distinct blocks measured ({', '.join(measured)}); the other "
        f"{len(blocks) - len(measured)} have the class and shapes of one of them and reuse its "
        "figures"
    )


def combined_points(blocks: list[dict[str, Any]], arch: str) -> list[dict[str, float]]:
    """The whole model's forward + backward rate at each share: a sample passes every block in
    turn, so its time is the sum of the blocks' times (1 / Σ 1/rate)."""
    shares = [p["vcpu_share"] for p in blocks[0]["training_rate"][arch]["points"]]
    out = []
    for k, share in enumerate(shares):
        per_sample_s = sum(1.0 / b["training_rate"][arch]["points"][k]["samples_per_s"]
                           for b in blocks)  # fmt: skip
        out.append({"vcpu_share": share, "samples_per_s": round(1.0 / per_sample_s, 4)})
    return out


def step_memory_mb(runtime_mb: float, blocks: list[dict[str, Any]], local_batch: int) -> float:
    """The memory a whole (one-stage) step needs, in MB: the runtime, PARAMETER_COPIES of the
    parameters, and every block's saved activations for the local batch."""
    parameter_bytes = sum(b["parameter_bytes"] for b in blocks)
    activation_bytes = local_batch * sum(b["activation_bytes_per_sample"] for b in blocks)
    return float(runtime_mb + (PARAMETER_COPIES * parameter_bytes + activation_bytes) / MB)


def with_blocks(
    raw: dict[str, Any],
    blocks: list[dict[str, Any]],
    runtime_mb: float,
    *,
    method: str,
    when: str,
) -> dict[str, Any]:
    """The profile with `blocks` and `runtime_memory_mb` (and their sources) added, nothing else
    changed. ValueError where the blocks' parameters are not the profile's model_bytes."""
    total = sum(b["parameter_bytes"] for b in blocks)
    if "model_bytes" in raw and raw["model_bytes"] != total:
        raise ValueError(
            f"the blocks hold {total} parameter bytes, the profile's model_bytes is "
            f"{raw['model_bytes']}: the profile is of another model"
        )
    out: dict[str, Any] = json.loads(json.dumps(raw))
    out["runtime_memory_mb"] = math.ceil(runtime_mb)
    out["blocks"] = blocks
    sources = out.setdefault("sources", {})
    sources["blocks"] = {"method": method, "date": when, "tag": "measured"}
    sources["runtime_memory_mb"] = {
        "method": "measured: python -m emulator.profiling.blocks; the resident set of the block "
        "child after importing the worker module (torch and the handler's modules), before "
        "building the model (the median of the children), rounded up",
        "date": when,
        "tag": "measured",
    }
    return out


def with_whole_model(
    doc: dict[str, Any], arch: str, *, startup_s: float, agg_mb_s: float, when: str, machine: str
) -> dict[str, Any]:
    """A profile of a model no function's step holds: its whole-model figures derived from its
    blocks (model_bytes, training_rate, min_memory_mb) and the start-up and PS update rate the
    block round measured, each with its source."""
    from functions.profile_task import memory_for_rss_mb

    out: dict[str, Any] = json.loads(json.dumps(doc))
    blocks, batch = out["blocks"], int(out["profiled_local_batch"])
    out["model_bytes"] = sum(b["parameter_bytes"] for b in blocks)
    out.setdefault("training_rate", {})[arch] = {"points": combined_points(blocks, arch)}
    need_mb = step_memory_mb(out["runtime_memory_mb"], blocks, batch)
    out["min_memory_mb"] = memory_for_rss_mb(need_mb)
    out["startup_s"] = round(startup_s, 2)
    out["ps_aggregation_mb_s_per_core"] = round(agg_mb_s, 1)
    derived = {"date": when, "tag": "derived"}
    sources = out.setdefault("sources", {})
    sources["model_bytes"] = {"method": "derived: the sum of the blocks' parameter_bytes",
                              **derived}  # fmt: skip
    sources["training_rate"] = {
        "method": "derived: at each share, 1 / Σ over the blocks of 1 / their samples_per_s "
        "(a sample passes each block in turn; no stage boundaries, no exchange); the blocks "
        "measured alone at a smaller batch (see blocks); " + machine,
        **derived,
    }
    sources["min_memory_mb"] = {
        "method": f"derived: runtime_memory_mb + {PARAMETER_COPIES} × model_bytes (weights, "
        "gradients, momentum, the exchange's flat vector) + profiled_local_batch × Σ the "
        f"blocks' activation_bytes_per_sample = {need_mb:.0f} MB, × 1.2 in 64 MB steps "
        "(functions.profile_task.memory_for_rss_mb); a whole step, not a measured peak",
        **derived,
    }
    sources["startup_s"] = {
        "method": "measured: python -m emulator.profiling.blocks; the worker module's import + "
        "the whole model's build at the share nearest 1 vCPU (the median of its children); "
        + machine,
        "date": when,
        "tag": "measured",
    }
    sources["ps_aggregation_mb_s_per_core"] = {
        "method": "measured: python -m emulator.profiling.blocks; numpy accumulate + SGD "
        "momentum update of 16 MB float32 on one core; " + machine,
        "date": when,
        "tag": "measured",
    }
    return out
