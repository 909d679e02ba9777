"""What a plan that re-plans carries in plan.json: the envelope a deployed app allows a re-plan,
and what a run costs if every re-plan goes to its ceiling. Pure data, read and checked here, so
plan.py, the stacks and the runtime share one spelling of it (provisioner/envelope.py derives
it; docs/replan.md says why these bounds)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Envelope:
    """What a re-plan may choose without a new deploy."""

    max_workers: int
    worker_counts: tuple[int, ...]  # the counts a re-plan may take: divisors of the global batch
    memory_variants_mb: tuple[int, ...]  # the plan's memory and the synthesized variants

    def to_dict(self) -> dict[str, object]:
        return {
            "max_workers": self.max_workers,
            "worker_counts": list(self.worker_counts),
            "memory_variants_mb": list(self.memory_variants_mb),
        }


@dataclass(frozen=True)
class ReplanSpec:
    """A plan's re-planning: its envelope, the worst case with every re-plan at the envelope's
    ceiling (the plan's runaway bounds stand: a re-plan never extends them), and whether a run
    well ahead may scale down (off unless asked for)."""

    envelope: Envelope
    worst_case_usd: float
    scale_down: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "envelope": self.envelope.to_dict(),
            "worst_case_usd": self.worst_case_usd,
            "scale_down": self.scale_down,
        }


def _whole_list(value: Any, name: str) -> tuple[int, ...]:
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    )
    if not ok:
        raise ValueError(f"plan field 'replan.envelope.{name}': {value!r} is not a non-empty list "
                         "of positive integers")  # fmt: skip
    return tuple(value)


def replan_from_dict(data: Any) -> ReplanSpec:
    """The ReplanSpec in plan.json's `replan`; ValueError (one line, naming the member)."""
    if not isinstance(data, dict) or set(data) - {"envelope", "worst_case_usd", "scale_down"}:
        raise ValueError(f"plan field 'replan': {data!r} is not an object with envelope, "
                         "worst_case_usd and scale_down")  # fmt: skip
    env = data.get("envelope")
    if not isinstance(env, dict) or set(env) != {"max_workers", "worker_counts",
                                                 "memory_variants_mb"}:  # fmt: skip
        raise ValueError(f"plan field 'replan.envelope': {env!r} is not an object with "
                         "max_workers, worker_counts and memory_variants_mb")  # fmt: skip
    counts = _whole_list(env["worker_counts"], "worker_counts")
    variants = _whole_list(env["memory_variants_mb"], "memory_variants_mb")
    top = env["max_workers"]
    if not (isinstance(top, int) and not isinstance(top, bool) and top >= max(counts)):
        raise ValueError(f"plan field 'replan.envelope.max_workers': {top!r} is not an integer "
                         f"at least the largest worker count ({max(counts)})")  # fmt: skip
    worst = data.get("worst_case_usd")
    if not (isinstance(worst, int | float) and not isinstance(worst, bool)
            and math.isfinite(worst) and worst >= 0):  # fmt: skip
        raise ValueError(f"plan field 'replan.worst_case_usd': {worst!r} is not a finite "
                         "number >= 0")  # fmt: skip
    scale_down = data.get("scale_down", False)
    if not isinstance(scale_down, bool):
        raise ValueError(f"plan field 'replan.scale_down': {scale_down!r} is not true or false")
    return ReplanSpec(Envelope(top, counts, variants), float(worst), scale_down)
