"""The local catalog's prediction interval read from finished runs: the spread measured.

`python -m bench.lab.catalog_from_runs --interval-from RUNS...` reads every finished run's
measured/predicted total (the runs bench/lab/slack.py reads: run reports, folders of them,
bench.predict results; only this machine's) and writes their 5th and 95th percentiles into the
catalog as `orchestration.prediction_interval` (provisioner/interval.py). The runs are the fit
set: the interval's coverage is measured on other runs (bench.predict's held-out rows).

The rule (`interval_for`): empirical percentiles (statistics.quantiles, inclusive), the low end
rounded down and the high end up to a hundredth, so rounding never narrows the interval; low is
at most 1 and high at least 1, so the interval always holds the prediction itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.lab.slack import MIN_RUNS
from provisioner.interval import LEVEL, MAX_HIGH

TAIL = (1.0 - LEVEL) / 2.0  # the share of runs past each end


@dataclass(frozen=True)
class Interval:
    """The ratios 90% of a machine's runs fell between, and what they were read from."""

    low: float
    high: float
    runs: int
    lowest: float  # measured/predicted ratios of the runs' totals
    highest: float

    def source(self, paths: Sequence[str]) -> str:
        """The catalog figure's method: what the interval is and where it was read."""
        return (
            f"bench/lab/interval.py from {self.runs} finished runs ({', '.join(paths)}): the "
            f"5th and 95th percentiles of measured/predicted total (runs ranged "
            f"{self.lowest:.2f}-{self.highest:.2f}×), low rounded down and high up to 0.01"
        )

    def figure_value(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": LEVEL}


def interval_for(ratios: Sequence[float]) -> Interval:
    """The interval 90% of `ratios` (measured/predicted totals of finished runs) fall in: see
    module. ValueError (one line) for too few runs or a spread the model does not describe."""
    if len(ratios) < MIN_RUNS:
        runs = f"{len(ratios)} run{'' if len(ratios) == 1 else 's'}"
        raise ValueError(f"{runs} too few to read an interval from; give {MIN_RUNS} or more")
    cuts = statistics.quantiles(ratios, n=round(1.0 / TAIL), method="inclusive")
    low = min(1.0, math.floor(cuts[0] * 100.0 + 1e-9) / 100.0)
    high = max(1.0, math.ceil(cuts[-1] * 100.0 - 1e-9) / 100.0)
    if low <= 0.0 or high >= MAX_HIGH:
        raise ValueError(
            f"runs land at {cuts[0]:.2f}-{cuts[-1]:.2f}× their prediction (5th-95th "
            f"percentile): outside (0, {MAX_HIGH:g}); the model does not describe these runs"
        )
    return Interval(low=low, high=high, runs=len(ratios), lowest=min(ratios), highest=max(ratios))


def with_interval(catalog: dict[str, Any], figure: dict[str, Any]) -> dict[str, Any]:
    """The catalog document with orchestration.prediction_interval set to `figure` and its
    default_slack gone: the measured spread replaces the policy; pure."""
    orchestration = {
        **{k: v for k, v in catalog.get("orchestration", {}).items() if k != "default_slack"},
        "prediction_interval": figure,
    }
    return {**catalog, "orchestration": orchestration}
