"""A row of the table: a case's runs brought to their medians, and how a row is scored.

A term's accuracy, 1 − |p − m| / m, blows up for a term of a few hundredths of a second, so a
term is read as its miss over the row's measured total instead: (p − m) / M, how far it moved
the total (emulator.report.error_share_of_total). The total keeps its accuracy.
"""

from __future__ import annotations

import statistics
from typing import Any

from emulator.report import error_share_of_total

RUN_CONFIGURATION = ("n", "memory_mb", "ps_count", "iterations")  # what a plan chose, per run


def accuracy(predicted: float | None, measured: float | None) -> float | None:
    """1 − |predicted − measured| / measured, as the emulator's report computes it."""
    if predicted is None or not measured:
        return None
    return 1.0 - abs(predicted - measured) / measured


def accuracies(terms: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each term's accuracy, where it has both a local prediction and a measurement."""
    return {
        t: a
        for t, v in terms.items()
        if (a := accuracy(v["predicted_local_s"], v["measured_s"])) is not None
    }


def error_shares(terms: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each term's (predicted − measured) over the measured total, signed (+ over-predicted),
    where the term has a local prediction and a measurement and the row a measured total."""
    total_s = (terms.get("total") or {}).get("measured_s")
    shares = {
        t: error_share_of_total(v.get("predicted_local_s"), v.get("measured_s"), total_s)
        for t, v in terms.items()
    }
    return {t: s for t, s in shares.items() if s is not None}


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from repeated runs of a case: each term's measured median, and predicted median
    (each run is predicted from its own anchored profile), accuracies and shares of the one
    against the other, every run's total, and the deadline met only if every run met it.

    The machine is noisy (the same run varies by 10-20% here), so one run is a sample; the
    median of a few is the figure a prediction can be held to.
    """
    row = dict(runs[0])
    terms: dict[str, Any] = {}
    for term, first in runs[0]["terms"].items():
        terms[term] = dict(first)
        for field in ("predicted_local_s", "measured_s", "predicted_aws_s"):
            values = [r["terms"][term][field] for r in runs]
            values = [v for v in values if v is not None]
            terms[term][field] = statistics.median(values) if values else None
    row["terms"] = terms
    row["accuracy_local"] = accuracies(terms)
    row["error_share_of_total_local"] = error_shares(terms)
    unanchored = [float(r["unanchored_total_s"]) for r in runs if "unanchored_total_s" in r]
    if unanchored and len(unanchored) == len(runs):
        row["unanchored_total_s"] = statistics.median(unanchored)
    row["profiles"] = [r["profile"] for r in runs if r.get("profile")]
    row["catalogs"] = [r["catalog"] for r in runs if r.get("catalog")]
    # each run's configuration: a planned case plans again every round, on that round's profile
    row["run_configurations"] = [{f: r[f] for f in RUN_CONFIGURATION} for r in runs]
    row["measured_totals_s"] = [r["terms"]["total"]["measured_s"] for r in runs]
    # each run's own prediction (its round's anchored profile) and deadline: how far a run lands
    # past its prediction is what bench/lab/slack.py reads a machine's slack from
    row["predicted_totals_s"] = [r["terms"]["total"]["predicted_local_s"] for r in runs]
    row["deadlines_s"] = [r["deadline_s"] for r in runs]
    met = [r["met_deadline"] for r in runs]
    row["met_deadlines"] = met
    row["met_deadline"] = None if met[0] is None else all(met)
    row["run_s"] = sum(r["run_s"] for r in runs)
    intervals = [r.get("interval_local") for r in runs]
    if any(intervals):  # each run's own: coverage counts runs, not medians
        row["intervals_local"] = intervals
    requests = [r["requests_per_iteration"] for r in runs if r.get("requests_per_iteration")]
    if requests:
        row["requests_per_iteration"] = median_requests(requests)
    return row


def median_requests(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """An S3 row's requests per iteration: each kind's median over the runs measured, each
    run's own (how far the same configuration's runs fall apart), and the model's (the same
    every run: it counts a configuration's requests, not seconds)."""
    kinds = sorted({k for r in runs for k in (r.get("measured") or {})})
    measured = {
        k: statistics.median([r["measured"][k] for r in runs if k in (r.get("measured") or {})])
        for k in kinds
    }
    return {"measured": measured, "measured_runs": [r.get("measured") or {} for r in runs],
            "predicted_local": runs[0].get("predicted_local")}  # fmt: skip
