"""A committed profile read again on this machine: its rate at two shares and its start-up now.

A profile measured on another machine (or hours ago on a VM whose speed drifts) does not say
how fast this one trains. `python -m emulator.profile --workload W --anchor --output P` reads
the workload's rate at READING_SHARES and its start-up (a few children per share, about a
minute) and writes the profile with them, as measured: each training-rate point × the
reading's speed over the profile at its share (linear between the read shares, the nearest
one's outside them), so the curve keeps its shape at this machine's level.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from typing import Any

from emulator import cpu
from emulator.profiling import children

READING_MEASURE_S = 2.0  # per child: a spot reading of the machine's speed, not a curve
# Read at two shares: a run held below 1 vCPU by its quota did not speed up with the 1-vCPU
# reading (the CNN at 0.56-0.72 vCPU scored 0.87-0.91 with the whole curve moved by the 1-vCPU
# factor, 1.09-1.16, and 0.97-1.00 left where it was).
READING_SHARES = (0.5, 1.0)
# What a profiling child reports of its memory (emulator.profiling.child), and what it is
MEMORY_FIELDS = {
    "resident_mb": "MB the process held before its first step, less the dataset",
    "first_step_mb": "MB of fresh memory the first step faulted in, at the profiled local batch",
}
READING_REPEATS = 3  # children per share, their median: one child alone may meet a slow spell


def measure_reading(
    raw: dict[str, Any],
    repeats: int = READING_REPEATS,
    measure_s: float = READING_MEASURE_S,
    shares: tuple[float, ...] = READING_SHARES,
) -> dict[str, Any]:
    """The workload's speed now: samples/s at each of `shares` (the median of `repeats`
    children each; the shares alternate, so a drift meets them alike) and the median start-up
    of the children at the largest share. RuntimeError where no share can be held."""
    source = children.dataset_source(raw["dataset"], int(raw["dataset_samples"]))
    by_share: dict[float, list[dict[str, Any]]] = {s: [] for s in shares}
    with cpu.CpuLimiter(f"lambda-dnn-anchor-{os.getpid()}") as limiter:
        if not limiter.enforced:
            raise RuntimeError(f"cannot hold a 1 vCPU share for the anchor ({limiter.reason})")
        for _ in range(max(1, repeats)):
            for share in shares:
                by_share[share].append(children.measure_share(
                    limiter, share, model=raw["model"], source=source,
                    batch=int(raw["profiled_local_batch"]), measure_s=measure_s,
                ))  # fmt: skip
    rates = {s: statistics.median(r["samples_per_s"] for r in runs) for s, runs in by_share.items()}
    top = max(shares)  # start-up from the children at 1 vCPU (the build runs at the share)
    return {
        "samples_per_s": rates[top],
        "samples_per_s_by_share": rates,
        "startup_s": statistics.median(r["startup_s"] for r in by_share[top]),
        "runs": max(1, repeats),
        **memory_figures([r for runs in by_share.values() for r in runs]),
    }


def memory_figures(children_out: list[dict[str, Any]]) -> dict[str, float]:
    """The median resident set before a first step and fresh memory it faulted in, over the
    children that reported them (a profile's MEMORY_FIELDS; none where none did)."""
    return {
        field: round(statistics.median(c[field] for c in children_out if field in c), 1)
        for field in MEMORY_FIELDS
        if any(field in c for c in children_out)
    }


def share_factors(
    profile_rates: dict[float, float], read_rates: dict[float, float]
) -> dict[float, float]:
    """Each read share's speed over the profile's: reading / profile rate, for the shares the
    profile has a point at. ValueError where that leaves none."""
    out = {s: r / profile_rates[s] for s, r in read_rates.items() if s in profile_rates}
    if not out:
        raise ValueError("no anchored share is a point of the profile")
    return out


def factor_at_share(factors: dict[float, float], share: float) -> float:
    """The speed factor at `share`: linear between the read shares, the nearest one's outside
    them (a reading says nothing of the curve's ends beyond it)."""
    known = sorted(factors)
    if share <= known[0]:
        return factors[known[0]]
    if share >= known[-1]:
        return factors[known[-1]]
    hi = next(k for k in known if k >= share)
    lo = max(k for k in known if k < share)
    w = (share - lo) / (hi - lo)
    return factors[lo] * (1 - w) + factors[hi] * w


def reading_factors(doc: dict[str, Any], reading: dict[str, Any], arch: str) -> dict[float, float]:
    """The speed factor per read share of `reading` (measure_reading) over the profile `doc`'s
    curve on `arch`; a reading of the 1-vCPU rate alone gives one factor. ValueError where the
    profile has no 1-vCPU point or no point at a read share."""
    points = doc["training_rate"][arch]["points"]
    if not any(p["vcpu_share"] == 1.0 for p in points):
        raise ValueError(f"bad profile {doc['name']!r}: no 1 vCPU training-rate point to anchor")
    read = {float(s): float(r) for s, r in reading.get("samples_per_s_by_share", {}).items()} or {
        1.0: float(reading["samples_per_s"])
    }
    return share_factors({float(p["vcpu_share"]): p["samples_per_s"] for p in points}, read)


# The loop's figures per share (the exchange through a loopback shard, the loop's CPU beyond
# the step): CPU work on this machine as the step is, so a machine the reading found faster
# runs them faster too. Left at the profile's speed, the demo's exchange read 2.3x slow on a
# machine 2.5x faster than its profile (5.34 s predicted, 2.29 s measured).
LOOP_POINTS = (("loop_overhead_s", "s"), ("loop_extra_cpu_s", "cpu_s"))


def moved_rates(
    doc: dict[str, Any], arch: str, factors: dict[float, float], move: Callable[[float], float]
) -> dict[str, Any]:
    """A copy of the profile `doc` with each training-rate point on `arch` × move(the factor at
    its share), and each of its loop's seconds (LOOP_POINTS) ÷ the same."""
    out: dict[str, Any] = json.loads(json.dumps(doc))

    def moved(share: Any) -> float:
        return move(factor_at_share(factors, float(share)))

    out["training_rate"][arch]["points"] = [
        {**p, "samples_per_s": round(p["samples_per_s"] * moved(p["vcpu_share"]), 1)}
        for p in doc["training_rate"][arch]["points"]
    ]
    for field, key in LOOP_POINTS:
        if isinstance(doc.get(field), list):
            out[field] = [
                {**p, key: float(f"{p[key] / moved(p['vcpu_share']):.6g}")} for p in doc[field]
            ]
    return out


def factors_text(factors: dict[float, float]) -> str:
    """The factors as the sources and the log say them: "× 0.900 at 0.5 vCPU, ..."."""
    return ", ".join(f"× {v:.3f} at {k:g} vCPU" for k, v in sorted(factors.items()))


def moved_to_reading(
    doc: dict[str, Any],
    reading: dict[str, Any],
    arch: str,
    when: str,
    *,
    move: Callable[[float], float],
    label: str,
    how: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile `doc` with each training-rate point × move(the factor `reading` read at its
    share), start-up the reading's, its shape between and beyond the read shares (the parallel
    ratio, warm-up) kept; its `anchor` record (with `extra`) and sources say `label: ... how`."""
    factors = reading_factors(doc, reading, arch)
    out = moved_rates(doc, arch, factors, move)
    out["startup_s"] = round(reading["startup_s"], 2)
    for field in MEMORY_FIELDS:
        if field in reading:  # memory is no speed: read now, taken whole
            out[field] = reading[field]
            out.setdefault("sources", {})[field] = {
                "method": f"{label}: {MEMORY_FIELDS[field]}, the median of the same children",
                "date": when,
                "tag": "measured",
            }
    out["anchor"] = {
        "speed_factor": round(factor_at_share(factors, 1.0), 4),
        "speed_factor_by_share": {f"{k:g}": round(v, 4) for k, v in sorted(factors.items())},
        **(extra or {}),
        "samples_per_s_at_1_vcpu": round(reading["samples_per_s"], 1),
        "startup_s": round(reading["startup_s"], 3),
        "date": when,
    }
    method = (
        f"{label}: the profile's curve {factors_text(factors)} (linear between, the nearest "
        f"outside), {how}"
    )
    sources = out.setdefault("sources", {})
    sources["training_rate"] = {**sources.get("training_rate", {}), "method": method, "date": when}
    for field, _ in LOOP_POINTS:
        if field in out and field in sources:
            sources[field] = {**sources[field], "method": f"{sources[field].get('method', '')}; "
                              f"{label}: ÷ the training rate's factor at each share"}  # fmt: skip
    sources["startup_s"] = {
        **sources.get("startup_s", {}),
        "method": f"{label}: the median start-up of the same children",
        "date": when,
    }
    return out


def profile_at_reading(
    doc: dict[str, Any], reading: dict[str, Any], arch: str, when: str
) -> dict[str, Any]:
    """The profile `doc` at this machine's speed as `reading` (measure_reading) measured it:
    each point × the factor at its share, start-up the reading's. The reading is the estimate of
    this machine's speed: the profile, measured elsewhere or earlier, is not one."""
    return moved_to_reading(
        doc, reading, arch, when, move=lambda factor: factor, label="read",
        how=f"this machine's rate measured just before (median of {reading.get('runs', 1)} "
        "children per share, emulator.profiling.reading)",
    )  # fmt: skip
