"""The noise a grid's accuracy is read against: how well each case's median predicts its own
other runs (repeatability), how far a median may still stray (median_error), and what a model
exact on every case's mean would score on the grid's own spread (noise_ceiling)."""

from __future__ import annotations

import math
import statistics
from typing import Any

# The median of R runs strays from a case's typical run by about √(π/2)·σ/√R (σ the runs'
# spread): a case spread as the digits MLP's on this VM (10-17% a run) strays 6-9% at five
# runs, so in most grids of 24 rows some row is 10% off whatever the model predicts.
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
# The grid's target (bench/README.md: the latest grid): the mean and the worst accuracy of the
# total
TARGET_MEAN, TARGET_WORST = 0.95, 0.90
# Simulated grids behind noise_ceiling (seeded: the same rows give the same figures)
CEILING_TRIALS = 2000


def repeated_totals(rows: list[dict[str, Any]]) -> list[list[float]]:
    """Each case's measured totals, for the cases measured at least twice. A planned case that
    chose another configuration in some round ran different jobs, not repeats: its totals are
    each scaled by the case's median prediction over the run's own (rows that keep per-run
    predictions), so only the spread of measured against predicted remains."""
    return [totals for r in rows if len(totals := comparable_totals(r)) >= 2]


def comparable_totals(row: dict[str, Any]) -> list[float]:
    """The row's measured totals, as repeats of one job (repeated_totals)."""
    totals = row.get("measured_totals_s", [])
    predicted = row.get("predicted_totals_s") or []
    configurations = row.get("run_configurations") or []
    same = all(c == configurations[0] for c in configurations)
    if same or not totals or len(predicted) != len(totals) or not all(p for p in predicted):
        return [t for t in totals if t]
    middle = statistics.median(predicted)
    return [t * middle / p for t, p in zip(totals, predicted, strict=True) if t]


def repeatability(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """How well each case's median total predicts that case's other runs (mean and worst
    accuracy, and the mean max/min spread): the ceiling a model's accuracy can be read against
    on this machine. A model exact to the median scores no better on a single run, and the
    median of three runs is itself that far from a case's typical run. None with one run each.
    """
    scores, spreads = [], []
    for totals in repeated_totals(rows):
        middle = statistics.median(totals)
        scores += [1.0 - abs(middle - t) / t for t in totals if t != middle]
        spreads.append(max(totals) / min(totals))
    if not scores:
        return None
    return {"mean": statistics.fmean(scores), "worst": min(scores),
            "spread": statistics.fmean(spreads)}  # fmt: skip


def median_error(totals: list[float]) -> float | None:
    """How far the median of `totals` may stray from the case's typical run, over that median:
    √(π/2) · stdev / √R (the normal approximation to the median's standard error); None with
    fewer than two runs."""
    if len(totals) < 2:
        return None
    return (
        MEDIAN_EFFICIENCY
        * statistics.stdev(totals)
        / math.sqrt(len(totals))
        / statistics.median(totals)
    )


def noise_ceiling(
    rows: list[dict[str, Any]], runs: int | None = None, trials: int = CEILING_TRIALS, seed: int = 0
) -> dict[str, Any] | None:
    """What a model exact on every case's mean would score against this grid's measurements:
    each case's runs drawn `trials` times as normal with the case's own spread (the standard
    deviation over the mean of its measured totals), `runs` of them a case (default: as many as
    the grid ran of that case), and held to their median as the grid holds a prediction.
    Returns the median grid's mean and worst accuracy, the runs a case (the median count and
    the range) and the shares of grids that reach TARGET_MEAN and TARGET_WORST; None with no
    case run twice.

    The worst of 24 rows is the noise's tail: at this machine's spread (about 5-6% a case) the
    median of three runs strays past 10% in some row of most grids, whatever the model, so a
    worst under TARGET_WORST says little alone; the mean's shortfall from the ceiling is the
    model's."""
    import numpy as np

    cases = repeated_totals(rows)
    if not cases:
        return None
    rng = np.random.default_rng(seed)
    counts = [runs or len(totals) for totals in cases]
    scores = np.empty((trials, len(cases)))
    for j, (totals, count) in enumerate(zip(cases, counts, strict=True)):
        spread = statistics.stdev(totals) / statistics.fmean(totals)
        draws = 1.0 + spread * rng.standard_normal((trials, count))
        middle = np.median(np.maximum(draws, 1e-9), axis=1)  # a run takes some time
        scores[:, j] = 1.0 - np.abs(1.0 - middle) / middle
    means, worsts = scores.mean(axis=1), scores.min(axis=1)
    return {"runs": statistics.median_low(counts), "runs_range": [min(counts), max(counts)],
            "mean": float(np.median(means)), "worst": float(np.median(worsts)),
            "p_mean": float(np.mean(means >= TARGET_MEAN)),
            "p_worst": float(np.mean(worsts >= TARGET_WORST))}  # fmt: skip
