"""The 90% interval of a prediction: how far a platform's measured totals spread around the model.

A catalog's `orchestration.prediction_interval` holds the ratios of measured to predicted total
time that 90% of its runs fell between: `{"low": r05, "high": r95}` (their 5th and 95th
percentiles), read from finished runs (bench/lab/interval.py). A prediction of T seconds then
carries [T × low, T × high], and the planner meets a deadline against its upper end, so the
reserve a plan holds back is the spread measured, not a share set by policy.

A catalog without the figure has measured no spread (the AWS catalogs: no run was timed in
Lambda): its interval is the point, and the planner holds nothing back for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from provisioner.parse import MAX_SLACK, format_duration_s

LEVEL = 0.9  # the share of runs an interval covers: its ends are the 5th and 95th percentiles
# A run slower than this many times its prediction is one the model does not describe: the
# same bound as a slack below MAX_SLACK (deadline × (1 − slack) = deadline / high).
MAX_HIGH = 1.0 / (1.0 - MAX_SLACK)
INTERVAL_FORMS = (
    f'accepted: {{"low": r05, "high": r95}}, the 5th and 95th percentiles of measured/predicted '
    f"total, 0 < low ≤ 1 ≤ high < {MAX_HIGH:g}"
)
NOT_MEASURED = "no spread measured on this platform: the interval is the prediction itself"


@dataclass(frozen=True)
class PredictionInterval:
    """Measured/predicted total ratios 90% of runs fell between; (1, 1): none measured."""

    low: float = 1.0
    high: float = 1.0
    source: str = NOT_MEASURED

    @property
    def measured(self) -> bool:
        return self.low < self.high

    def of(self, total_s: float) -> tuple[float, float]:
        """The interval of a prediction of `total_s` seconds."""
        return total_s * self.low, total_s * self.high


def _ratio(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def interval_from(value: Any, where: str, source: str) -> PredictionInterval:
    """The interval in a catalog figure's `value`; ValueError (one line naming the figure, the
    bad value and what is accepted) otherwise."""
    if not isinstance(value, dict) or set(value) - {"low", "high", "level"}:
        raise ValueError(f"{where}: {value!r} is not understood ({INTERVAL_FORMS})")
    if value.get("level", LEVEL) != LEVEL:
        raise ValueError(
            f"{where}: level {value['level']!r} is not {LEVEL} (the planner and the report "
            f"speak of 90% intervals; {INTERVAL_FORMS})"
        )
    low, high = _ratio(value.get("low")), _ratio(value.get("high"))
    if low is None or high is None or not (0.0 < low <= 1.0 <= high < MAX_HIGH):
        shown = {k: value.get(k) for k in ("low", "high")}
        raise ValueError(f"{where}: {shown!r} is out of range ({INTERVAL_FORMS})")
    return PredictionInterval(low=low, high=high, source=source)


def interval_note(low_s: float | None, high_s: float | None) -> str:
    """`90%: 10.1s–15.2s`; a point (no spread measured) or an old plan's none says so."""
    if low_s is None or high_s is None:
        return "90% interval not recorded"
    if not low_s < high_s:
        return "90% interval not measured on this platform"
    return f"90%: {format_duration_s(low_s)}–{format_duration_s(high_s)}"


def interval_words(total_s: float, low_s: float | None, high_s: float | None) -> str:
    """`predicted 12.3s (90%: 10.1s–15.2s)`."""
    return f"predicted {format_duration_s(total_s)} ({interval_note(low_s, high_s)})"
