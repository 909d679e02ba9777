"""The report's re-planning part: what each pace check decided, what the run cost, and how far
the original plan's prediction and the re-planned one were from the measured total.

The pace function writes one decision record per check (functions.runs.replan_record_key, under
the run's records in the artifacts bucket); this module reads them back, in link order. The
run's cost is priced from what it measured, at the plan's catalog: every link billed for its
wall at the memory it ran at (a re-plan's variant included) with one request each, the PS shards
for the training wall (with their minimum), Step Functions' transitions for the links run, the
endpoints for the training wall; the S3 requests and /tmp items the run does not measure are the
plan's prediction.
"""

from __future__ import annotations

import json
import math
from typing import Any

from emulator.records import RunRecord
from functions.aws import list_keys
from functions.runs import runs_prefix
from provisioner.catalog import load_catalog
from provisioner.costs import endpoints_usd, ps_usd, step_functions_usd
from provisioner.parse import format_usd


def decisions_prefix(job_id: str, run_id: str) -> str:
    """The folder of one run's decision records (functions.runs.replan_record_key's)."""
    return f"{runs_prefix(job_id)}/{run_id}/replan/"


def read_decisions(s3: Any, bucket: str, job_id: str, run_id: str) -> list[dict[str, Any]]:
    """Every decision record of the run, in link order (the keys sort by link)."""
    keys = sorted(list_keys(s3, bucket, decisions_prefix(job_id, run_id)))
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]


def measured_cost_usd(record: RunRecord) -> float | None:
    """The run priced from what it measured at the plan's catalog (the module's rule); None
    where the catalog cannot be loaded."""
    plan = record.plan
    try:
        catalog = load_catalog(plan.catalog)
    except (OSError, ValueError):
        return None
    links = [link for w in record.workers for link in w.links]
    per_gb_s = catalog.arch(plan.arch).usd_per_gb_s
    lambda_usd = sum(
        per_gb_s * float(link.get("memory_mb") or plan.memory_mb) / 1024.0 * float(link["wall_s"])
        for link in links
    )
    wall_s = record.train_wall_s
    ps = 0.0
    if plan.sync == "ps":
        hourly = catalog.ps_type(plan.ps_type).usd_per_hour
        ps = float(ps_usd(hourly, plan.ps_count, wall_s, catalog.ps_min_billed_s))
    sfn = float(
        step_functions_usd(
            catalog.sfn_usd_per_transition,
            catalog.sfn_fixed_transitions,
            catalog.sfn_transitions_per_invocation,
            1,
            len(links),
        )
    )
    endpoints = 0.0
    if plan.interface_endpoints:
        endpoints = float(endpoints_usd(catalog.endpoint_usd_per_hour,
                                        len(plan.interface_endpoints), wall_s))  # fmt: skip
    unmeasured = plan.cost.s3_requests_usd + plan.cost.s3_exchange_usd
    unmeasured += plan.cost.ephemeral_storage_usd
    requests = catalog.usd_per_request * len(links)
    return lambda_usd + requests + ps + sfn + endpoints + unmeasured


def accuracy_of(predicted_s: float | None, measured_s: float | None) -> float | None:
    """1 − |p − m| / m; None when either is missing or m is 0 or not finite."""
    if predicted_s is None or measured_s is None or not math.isfinite(predicted_s):
        return None
    if not math.isfinite(measured_s) or measured_s <= 0:
        return None
    return 1.0 - abs(predicted_s - measured_s) / measured_s


def replan_report(record: RunRecord, s3: Any) -> dict[str, Any]:
    """report.json's `replan`, its decisions read from the run's artifacts bucket."""
    bucket = record.buckets["artifacts"]
    return replan_section(record, read_decisions(s3, bucket, record.plan.job, record.run_id))


def replan_section(record: RunRecord, decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """report.json's `replan`: the run's measured cost against the plan's, and where the plan
    re-plans, its envelope, every decision and the switches' stories, and the accuracy of the
    original and the re-planned prediction of the total."""
    plan, measured_s = record.plan, record.train_wall_s
    cost = measured_cost_usd(record)
    section: dict[str, Any] = {
        "on": plan.replan is not None,
        "cost_usd": {"measured": cost, "planned": plan.cost.total_usd},
    }
    if not record.options.replan:
        section["off_by"] = "--no-replan: the plan ran as it is"
    if plan.replan is None:
        return section
    switches = [d for d in decisions if d.get("action") == "switch"]
    last = switches[-1] if switches else None
    replanned_s = None if last is None else float(last["elapsed_s"]) + float(last["new_s"])
    return {
        **section,
        "envelope": plan.replan.envelope.to_dict(),
        "worst_case_usd": plan.replan.worst_case_usd,
        "checks": len(decisions),
        "switches": [
            {"link": d.get("link"), "story": d.get("story"), "to": d.get("to")} for d in switches
        ],  # fmt: skip
        "decisions": decisions,
        "predicted_total_s": {"original": plan.prediction.total_s, "replanned": replanned_s},
        "accuracy": {
            "original": accuracy_of(plan.prediction.total_s, measured_s),
            "replanned": accuracy_of(replanned_s, measured_s),
        },
    }


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * max(0.0, value):.0f}%"


def replan_lines(section: dict[str, Any] | None) -> list[str]:
    """The re-planning part of the printed report (nothing for a report without one)."""
    if not section:
        return []
    lines = []
    cost = section["cost_usd"]
    if "off_by" in section:
        lines.append(f"re-planning: off ({section['off_by']})")
    if section.get("envelope"):
        env = section["envelope"]
        lines.append(
            f"re-planning: envelope up to {env['max_workers']} workers "
            f"({', '.join(map(str, env['worker_counts']))}), memory "
            f"{', '.join(map(str, env['memory_variants_mb']))} MB; worst case "
            f"{format_usd(section['worst_case_usd'])}; {section['checks']} pace checks, "
            f"{len(section['switches'])} switch(es)"
        )
        lines += [f"re-plan: {s['story']}" for s in section["switches"]]
        acc, predicted = section["accuracy"], section["predicted_total_s"]
        replanned = predicted["replanned"]
        lines.append(
            f"accuracy of the total: {_percent(acc['original'])} against the original plan's "
            f"prediction ({predicted['original']:.1f} s), "
            + ("no re-plan" if replanned is None else
               f"{_percent(acc['replanned'])} against the re-planned one ({replanned:.1f} s)")
        )  # fmt: skip
    if cost["measured"] is not None:
        change = cost["measured"] / cost["planned"] - 1 if cost["planned"] else math.nan
        lines.append(
            f"cost: {format_usd(cost['measured'])} as the run measured it, against the plan's "
            f"predicted {format_usd(cost['planned'])}"
            + ("" if math.isnan(change) else f" ({100 * change:+.0f}%)")
        )
    return lines
