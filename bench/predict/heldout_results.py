"""A held-out run's results, kept per host: the summary the targets are read on, and the table.

Per row: the configuration drawn, every term predicted/measured with its miss as a share of the
row's measured total, the total's accuracy, and where the report has them the 90% interval
(each run inside or not) and an S3 row's requests per iteration, measured against priced. The
summary: the total's mean and worst accuracy; each term's mean and worst |miss| as a share of
the total; the interval's coverage (the share of runs whose measured total fell inside); each
S3 row's requests measured over priced. Rendered from the JSON alone, as the grid's table is.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from pathlib import Path
from typing import Any

from bench.predict import results
from bench.predict.cases import TERMS
from bench.predict.host import host_text
from bench.predict.rows import error_shares
from provisioner import load_catalog

PROTOCOL = "held-out"
NAME = "predict-heldout"
# What the held-out figures are held to (bench/README.md, "Held-out prediction")
TARGET_MEAN, TARGET_WORST = 0.95, 0.90
TARGET_TERM_SHARE = 0.05  # each term's mean |miss| over the measured total
TARGET_COVERAGE = 0.90
TARGET_REQUESTS = 0.10  # measured requests per iteration within this of the priced
PRICES_CATALOG = "lambda-2025"  # S3's request prices a row's bill is read at
PARTS = TERMS[:-1]


def is_heldout(meta: dict[str, Any]) -> bool:
    return meta.get("protocol") == PROTOCOL


def abs_share_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each term's |predicted − measured| over the row's measured total: mean and worst."""
    per_row = [error_shares(r["terms"]) for r in rows]
    out = {}
    for term in PARTS:
        values = [abs(s[term]) for s in per_row if term in s and math.isfinite(s[term])]
        if values:
            out[term] = {"mean": statistics.fmean(values), "worst": max(values),
                         "rows": len(values)}  # fmt: skip
    return out


def coverage(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The share of runs whose measured total fell inside their interval, over the runs whose
    report gave one; None where none did."""
    intervals = [i for r in rows for i in r.get("intervals_local") or [] if i]
    if not intervals:
        return None
    inside = sum(bool(i.get("inside")) for i in intervals)
    levels = sorted({i.get("level") for i in intervals if i.get("level") is not None})
    return {"runs": len(intervals), "inside": inside, "coverage": inside / len(intervals),
            "levels": levels}  # fmt: skip


@functools.cache
def s3_request_prices_usd() -> tuple[float, float]:
    """(PUT, GET) prices of PRICES_CATALOG, read once for every row."""
    aws = load_catalog(PRICES_CATALOG)
    return aws.s3_usd_per_put, aws.s3_usd_per_get


def billed_usd(requests: dict[str, float], put_usd: float, get_usd: float) -> float:
    """What S3 bills for `requests` (per kind): PUT and LIST at the PUT price, GET at the GET
    price (the empty ones too); DELETE is free."""
    puts = requests.get("put", 0.0) + requests.get("list", 0.0)
    return puts * put_usd + requests.get("get", 0.0) * get_usd


def requests_ratios(row: dict[str, Any]) -> dict[str, float] | None:
    """An S3 row's requests per iteration measured over priced, per kind (put, get, list), and
    their bill at AWS's prices (the catalog the row is planned for: lambda-2025)."""
    requests = row.get("requests_per_iteration") or {}
    measured, priced = requests.get("measured") or {}, requests.get("predicted_local") or {}
    ratios = {k: measured[k] / p for k, p in priced.items() if p and k in measured}
    gets = [run["get"] for run in requests.get("measured_runs") or [] if run.get("get")]
    if ratios and len(gets) > 1:  # the same configuration's runs apart: the count's own noise
        ratios["get_runs_apart"] = max(gets) / min(gets)
    if ratios:
        put_usd, get_usd = s3_request_prices_usd()
        ratios["billed"] = billed_usd(measured, put_usd, get_usd) / billed_usd(
            priced, put_usd, get_usd
        )
    return ratios or None


def heldout_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The grid's summary (results.summary_of) with the held-out figures added."""
    summary = results.summary_of(rows)
    summary["abs_error_share_of_total"] = abs_share_summary(rows)
    if (cover := coverage(rows)) is not None:
        summary["interval_coverage"] = cover
    ratios = [{"case": r["case"], **ratio} for r in rows if (ratio := requests_ratios(r))]
    if ratios:
        summary["requests_ratio"] = ratios
    return summary


def write_heldout(
    rows: list[dict[str, Any]], meta: dict[str, Any], folder: Path, name: str = NAME
) -> str:
    """JSON, table and chart as `folder`/<name>.* (predict-heldout or its re-scoring); the table."""
    return results.write_files(rows, meta, heldout_summary(rows), folder / f"{name}.json", table)


def interval_line(source: Path | None) -> str:
    """Where the runs' 90% interval came from: the platform catalog's prediction_interval
    (kept beside the results as predict-heldout-platform/local.json), read apart from the
    scored rows, or that there was none."""
    catalog = None if source is None else source.parent / "predict-heldout-platform/local.json"
    try:
        doc = json.loads(catalog.read_text()) if catalog else {}
        figure = doc["orchestration"]["prediction_interval"]
        low, high = figure["value"]["low"], figure["value"]["high"]
    except (OSError, ValueError, KeyError, TypeError):
        return "Interval: the platform catalog has none (no spread measured), so no run gave one."
    return f"Interval: the platform catalog's {low:g}-{high:g}× ({figure.get('source', '')})."


def render_any(source: Path) -> str:
    """--render: a held-out results file's table in this format, any other in the grid's."""
    try:
        data = json.loads(source.read_text())
        rows, meta = data["rows"], data["meta"]
    except (OSError, ValueError, KeyError, TypeError):
        return results.render(source)  # says in one line what is wrong with it
    if not is_heldout(meta):
        return results.render(source)
    # the summary read again from the rows: a figure added since the run was written shows too
    text = table(rows, meta, heldout_summary(rows), source)
    source.with_suffix(".md").write_text(text)
    return text


def _pct(x: float | None) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def _s(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.2f}"


def term_cell(row: dict[str, Any], term: str) -> str:
    """'predicted/measured (miss over the total)' of one term."""
    values = row["terms"].get(term) or {}
    share = error_shares(row["terms"]).get(term)
    cell = f"{_s(values.get('predicted_local_s'))}/{_s(values.get('measured_s'))}"
    return cell if term == "total" else f"{cell} ({_pct(share)})"


def interval_cell(row: dict[str, Any]) -> str:
    """Each run's interval and whether its measured total fell inside: '9.1–11.3 s ✓'."""
    intervals = row.get("intervals_local") or []
    cells = [
        f"{i['low_s']:.1f}–{i['high_s']:.1f} s {'in' if i.get('inside') else '**out**'}"
        for i in intervals
        if i
    ]
    return "; ".join(cells) or "–"


def requests_cell(row: dict[str, Any]) -> str:
    """An S3 row's requests per iteration, measured/priced, per kind."""
    requests = row.get("requests_per_iteration") or {}
    measured, priced = requests.get("measured") or {}, requests.get("predicted_local") or {}
    kinds = [k for k in ("put", "get") if k in priced]
    return ", ".join(f"{k} {measured.get(k, math.nan):.1f}/{priced[k]:.1f}" for k in kinds) or "–"


def row_line(r: dict[str, Any]) -> str:
    cells = [term_cell(r, t) for t in TERMS]
    accuracy = r["accuracy_local"].get("total")
    shown = "–" if accuracy is None else f"{max(0.0, accuracy):.3f}"
    return (f"| {r['case']} | {r['iterations']} | {max(r['links'])} | " + " | ".join(cells)
            + f" | {shown} | {interval_cell(r)} | {requests_cell(r)} |")  # fmt: skip


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The figures the targets are read on, each beside its target."""
    lines = []
    if "total" in summary:
        s = summary["total"]
        lines.append(f"- Total accuracy: mean {s['mean']:.3f} (target ≥ {TARGET_MEAN}), worst "
                     f"{s['worst']:.3f} (target ≥ {TARGET_WORST}), {s['rows']} rows.")  # fmt: skip
    for term, s in (summary.get("abs_error_share_of_total") or {}).items():
        lines.append(
            f"- {term}: |miss| over the measured total, mean {s['mean']:.1%} (target ≤ "
            f"{TARGET_TERM_SHARE:.0%}), worst {s['worst']:.1%}, {s['rows']} rows."
        )
    cover = summary.get("interval_coverage")
    if cover:
        levels = ", ".join(f"{lv:g}" for lv in cover["levels"]) or "?"
        lines.append(
            f"- Interval coverage: {cover['inside']}/{cover['runs']} runs inside "
            f"({cover['coverage']:.0%}; level {levels}, target ~{TARGET_COVERAGE:.0%})."
        )
    else:
        lines.append("- Interval coverage: no run's report gave an interval.")
    for ratio in summary.get("requests_ratio") or []:
        kinds = ", ".join(f"{k} {ratio[k]:.3f}" for k in ("put", "get", "billed") if k in ratio)
        if "get_runs_apart" in ratio:
            kinds += f"; its runs' GETs {ratio['get_runs_apart']:.2f}× apart"
        lines.append(f"- S3 requests per iteration, measured/priced, {ratio['case']}: {kinds} "
                     f"(target within {TARGET_REQUESTS:.0%}).")  # fmt: skip
    return lines


def table(
    rows: list[dict[str, Any]], meta: dict[str, Any], summary: dict[str, Any], source: Path
) -> str:
    """The Markdown of a held-out run: the host, every row, the summary, how it was made."""
    draw = meta["held_out"]
    head = (
        "| configuration | k | links | "
        + " | ".join(f"{t} pred./meas. s" for t in TERMS)
        + " | accuracy (total) | interval (each run) | S3 requests/iteration meas./priced |"
    )
    lines = [
        f"# Held-out prediction on {meta['host']['cpu_model']}, {meta['host']['cores']} cores",
        "",
        f"Host: {host_text(meta['host'])}.",
        "",
        f"{len(rows)} configurations drawn at random with seed {draw['seed']} "
        f"({draw['redrawn']} draws redrawn as not runnable here: "
        f"{json.dumps(draw['redrawn_by_reason']) if draw['redrawn'] else 'none'}); "
        "the model's figures come from calibration, profiling and the anchors, never from these "
        "rows.",
        "",
        head,
        "|" + "---|" * (len(TERMS) + 6),
        *[row_line(r) for r in rows],
        "",
        "Summary:",
        "",
        *summary_lines(summary),
        "",
        "A term's figure in brackets is its miss as a share of its row's measured total, "
        "(predicted − measured) / measured total, + where the prediction was the larger. The "
        "total's accuracy is 1 − |predicted − measured| / measured, floored at 0 when shown. "
        "Each row's figures are the medians of the case's runs; an interval is each run's own.",
        *results.anchor_lines(meta),
        "",
        f"Load average while measuring: {meta['loadavg']}; CPU share: {meta['cpu_share']}.",
        f"Command: `{meta['command']}`; measured = the median of each case's runs "
        f"({results.runs_per_case_text(meta)}).",
        f"Platform figures: {meta.get('platform', 'catalog/local.json and profiles/')}.",
        interval_line(source),
    ]
    if "rescored" in meta:
        lines.append(f"Re-scored, nothing measured: {meta['rescored']}.")
    where = results.shown(source)
    lines.append(f"This table is rendered from {where}: `python -m bench.predict --render {where}` "
                 "writes it again, measuring nothing.")  # fmt: skip
    return "\n".join(lines) + "\n"
