"""The run report as a person reads it: predicted here, measured, how far off, and the AWS
prediction per term, then the headline facts (the S3 exchange, the plan that ran, iterations
and invocations, the loss, the held-out accuracy, the predicted AWS cost, re-planning's
decisions), and last whether the run met its deadline.

Works on the JSON report emulator/report.py builds (a dict of plain values), nothing else.
"""

from __future__ import annotations

import math
from typing import Any

from emulator.options import NO_LOCAL_CATALOG
from emulator.report_cpu import cpu_lines
from emulator.report_replan import replan_lines
from emulator.report_stages import stage_lines


def off_by_words(share: float | None) -> str:
    """A signed share in words a person reads: '3% over', '12% under', '0%' (never a minus)."""
    if share is None:
        return "n/a"
    percent = round(100 * abs(share))
    if percent == 0:
        return "0%"
    return f"{percent}% {'over' if share > 0 else 'under'}"


def accuracy_words(accuracy: float | None) -> str:
    """The total's accuracy, 1 − |p − m| / m, shown floored at 0%."""
    if accuracy is None or not math.isfinite(accuracy):
        return "n/a"
    return f"{100 * max(0.0, accuracy):.0f}%"


def exchange_lines(exchange: dict[str, Any] | None) -> list[str]:
    """The S3 exchange's figures under the term table (nothing for a PS run)."""
    if not exchange:
        return []
    time_s, requests = exchange["per_iteration_s"], exchange["requests_per_iteration"]
    measured = requests["measured"]
    lines = [
        f"S3 exchange, k = {exchange['reducers']}, per iteration: measured "
        f"{1000 * time_s['measured']:.1f} ms"
        + ("" if time_s["predicted_local"] is None
           else f", predicted here {1000 * time_s['predicted_local']:.1f} ms"),
        "S3 requests per iteration: measured "
        + ", ".join(f"{kind} {n:.2f}" for kind, n in measured.items())
        + " (get: every GET sent; get_miss: those that found nothing yet)",
    ]  # fmt: skip
    predicted, ratio = requests["predicted_local"], requests.get("measured_over_predicted")
    if predicted is not None:
        lines.append(
            "S3 requests per iteration: predicted here "
            + ", ".join(f"{kind} {n:.2f}" for kind, n in predicted.items())
            + ("" if not ratio else "; measured / predicted " + ", ".join(
                f"{kind} {r:.2f}" for kind, r in ratio.items() if r is not None))
        )  # fmt: skip
    return lines


def total_lines(report: dict[str, Any]) -> list[str]:
    """The total predicted here with its 90% interval, measured, and whether it fell inside:
    `total: predicted 12.3 s (90%: 10.1–15.2 s), measured 13.0 s, inside`."""
    total = next((row for row in report["terms"] if row["term"] == "total"), {})
    predicted, measured = total.get("predicted_local_s"), total.get("measured_s")
    if predicted is None or measured is None or math.isnan(measured):
        return []
    interval = report.get("interval_local")
    if not interval:  # no spread measured on the local catalog: the point alone
        return [
            f"total: predicted {predicted:.1f} s (90% interval not measured), "
            f"measured {measured:.1f} s"
        ]
    where = "inside" if interval["inside"] else "OUTSIDE"
    return [
        f"total: predicted {predicted:.1f} s (90%: {interval['low_s']:.1f}–"
        f"{interval['high_s']:.1f} s), measured {measured:.1f} s, {where}"
    ]


def format_table(report: dict[str, Any]) -> str:
    """Human summary: predicted vs measured per term, then the headline facts."""

    def cell(value: float) -> str:
        return (
            "n/a"
            if value is None or (isinstance(value, float) and math.isnan(value))
            else (f"{value:10.2f}")
        )

    accuracy_local = report.get("accuracy_local") or {}
    shares = report.get("error_share_of_total_local") or {}
    lines = [
        f"run report for job {report['job']}",
        "",
        f"{'term':<16}{'predicted here s':>18}{'measured s':>12}{'off by':>12}"
        f"{'predicted AWS s':>17}",
    ]
    for row in report["terms"]:
        term = row["term"]
        judged = (
            accuracy_words(accuracy_local.get(term))
            if term == "total"
            else off_by_words(shares.get(term))
        )
        lines.append(
            f"{term:<16}{cell(row.get('predicted_local_s')):>18}"
            f"{cell(row['measured_s']):>12}{judged:>12}"
            f"{cell(row.get('predicted_aws_s')):>17}"
        )
    lines.append(
        "off by: (predicted − measured) as a share of the measured total; "
        "total: accuracy, 1 − |predicted − measured| / measured"
    )
    labels = report.get("predictions") or {}
    lines += [
        f"predicted here: {labels.get('local', NO_LOCAL_CATALOG)}",
        f"predicted AWS: {labels.get('aws', 'n/a')}",
    ]
    lines += total_lines(report)
    lines += exchange_lines(report.get("exchange"))
    lines += cpu_lines(report.get("cpu"))
    lines += stage_lines(report.get("stages") or [])
    local = report.get("compute_predicted_at_local_share_s")
    full = report.get("compute_at_full_speed_s")
    if local is not None and full is not None:
        lines.append(
            f"(compute at the local CPU share: {local:.2f} s if every step is throttled,"
            f" {full:.2f} s if none is)"
        )
    em, plan = report["emulation"], report["plan"]
    inv, loss = report["invocations"], report["loss"]
    lines += [
        "",
        f"plan: {plan['n_workers']} x {plan['memory_mb']} MB {plan['arch']}, "
        + (
            f"S3 sync, k = {plan['reducers']}"
            if plan.get("sync") == "s3"
            else f"PS {plan['ps_count']} x {plan['ps_type']}"
        )
        + f", {plan['iterations']} iterations of local batch "
        f"{plan['local_batch']}",
        f"emulation: {em['invocation_limit_s']:.0f} s invocations, {em['worker_cores']:.3f} cores"
        f" per worker (cpu_scale {em['cpu_scale_cores_per_vcpu']:.3f}); {em['cpu_share']}",
        f"iterations: {report['iterations']['completed']}/{report['iterations']['planned']}"
        + (
            f" ({report['iterations']['redone']} redone)"
            if report["iterations"].get("redone")
            else ""
        )
        + "; "
        f"invocations per worker {inv['per_worker']} ({inv['reinvocations']} re-invocations, "
        f"{inv['failed_attempts']} failed attempts, {inv['cold_starts']} cold starts"
        + (f", {report['ps_restarts']} PS shard restart(s)" if report.get("ps_restarts") else "")
        + ")",
        f"loss: {loss['first']:.4f} -> {loss['last']:.4f} (mean of first/last 10 iterations)",
    ]
    acc = report.get("accuracy")
    if acc and acc.get("accuracy") is not None:
        lines.append(f"held-out accuracy: {acc['accuracy']:.4f} on {acc['samples']} samples")
    cost = report["cost_usd"]
    items = ", ".join(
        f"{label} ${cost[key]:.4f}"
        for label, key in (
            ("Lambda", "lambda_compute_usd"),
            ("PS", "ps_instances_usd"),
            ("VPC endpoints", "vpc_endpoints_usd"),
            ("Step Functions", "step_functions_usd"),
        )
        if cost.get(key)
    )
    lines.append(f"AWS cost of this plan (predicted): ${cost['total_usd']:.4f} ({items})")
    for name, where in report.get("artifacts", {}).items():
        lines.append(f"{name}: {where}")
    lines += replan_lines(report.get("replan"))
    lines += deadline_lines(report.get("deadline") or {})  # last: the line a run is judged by
    return "\n".join(lines)


def deadline_lines(verdict: dict[str, Any]) -> list[str]:
    """`deadline 20.0 s: measured total 13.7 s, met` (or MISSED); nothing without a deadline."""
    if verdict.get("met") is None:
        return []
    return [
        f"deadline {verdict['deadline_s']:.1f} s: measured total "
        f"{verdict['measured_total_s']:.1f} s, " + ("met" if verdict["met"] else "MISSED")
    ]
