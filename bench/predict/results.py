"""A run's results: the summary, the table (Markdown), the JSON and the chart.

The table is written from the JSON alone, so a results file is rendered again in a new format
without running anything (`python -m bench.predict --render bench/results/<name>.json`).
A term is read as its miss over the row's measured total, in words ("3% over", "12% under"):
its accuracy would blow up for a term of a few hundredths of a second. The total keeps its
accuracy, 1 − |predicted − measured| / measured, floored at 0 when shown.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.predict.anchors import ANCHORED_FIGURES, REPO_ROOT
from bench.predict.cases import TERMS
from bench.predict.noise import (
    CEILING_TRIALS,
    TARGET_MEAN,
    TARGET_WORST,
    noise_ceiling,
    repeatability,
)
from bench.predict.rows import accuracy, error_shares
from emulator.report_table import off_by_words

COLUMNS = ("load", "compute", "communication", "startup", "chaining", "launch", "total")
HOW_READ = (
    "How each figure is computed: a term's is its miss as a share of its row's measured total, "
    "(predicted − measured) / measured total, *over* where the prediction was the larger; its "
    "mean is over the rows (misses of either sign offset), its worst the largest in size. The "
    "total's is its accuracy, 1 − |predicted − measured| / measured, shown floored at 0, mean "
    "and worst over the rows. Each row's figures are the medians of the case's runs."
)


def summary_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and worst accuracy of the total and of every term, and each term's mean and worst
    miss as a share of its row's total (error_share_of_total), over the rows that have one."""
    out: dict[str, Any] = {}
    for term in TERMS:
        values = [r["accuracy_local"].get(term) for r in rows]
        values = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
        if values:
            out[term] = {"mean": statistics.fmean(values), "worst": min(values),
                         "rows": len(values)}  # fmt: skip
    shares = share_summary(rows)
    if shares:
        out["error_share_of_total"] = shares
    unanchored = [
        a
        for r in rows
        if (a := accuracy(r.get("unanchored_total_s"), r["terms"]["total"]["measured_s"]))
        is not None
    ]
    if unanchored:
        out["total_unanchored"] = {
            "mean": statistics.fmean(unanchored),
            "worst": min(unanchored),
            "rows": len(unanchored),
        }
    planned = [r for r in rows if r["planned"]]
    out["deadlines_met"] = f"{sum(bool(r['met_deadline']) for r in planned)}/{len(planned)}"
    repeat = repeatability(rows)
    if repeat is not None:
        out["repeatability"] = repeat
    ceiling = noise_ceiling(rows)
    if ceiling is not None:
        out["ceiling"] = ceiling
        out["ceiling_more_runs"] = noise_ceiling(rows, runs=int(ceiling["runs"]) + 2)
    return out


def share_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each term's (predicted − measured) / measured total over the rows (the total's own
    left out: it keeps its accuracy): the mean, signed, the worst, the largest in size."""
    per_row = [error_shares(r["terms"]) for r in rows]
    out = {}
    for term in TERMS[:-1]:
        values = [s[term] for s in per_row if term in s and math.isfinite(s[term])]
        if values:
            out[term] = {"mean": statistics.fmean(values), "worst": max(values, key=abs),
                         "rows": len(values)}  # fmt: skip
    return out


def write_results(
    rows: list[dict[str, Any]], meta: dict[str, Any], name: str, results: Path
) -> str:
    """JSON, table and chart under `results`/<name>.* (a partial run names its own files, so
    the full grid's stay); the table."""
    return write_files(rows, meta, summary_of(rows), results / f"{name}.json", table)


def write_files(
    rows: list[dict[str, Any]],
    meta: dict[str, Any],
    summary: dict[str, Any],
    source: Path,
    table_of: Callable[[list[dict[str, Any]], dict[str, Any], dict[str, Any], Path], str],
) -> str:
    """A results file's JSON at `source`, its table (`table_of`) beside it as .md and its chart
    as .png; the table."""
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2) + "\n")
    text = table_of(rows, meta, summary, source)
    source.with_suffix(".md").write_text(text)
    plot(rows, source.with_suffix(".png"))
    return text


def render(source: Path) -> str:
    """Write the table of the results file `source` (<name>.json) to <name>.md beside it, in
    this module's format, measuring nothing; the table."""
    try:
        data = json.loads(source.read_text())
        rows, meta = data["rows"], data["meta"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"bad --render {str(source)!r}: not a bench.predict results file "
                         f"({type(err).__name__}: {err})") from None  # fmt: skip
    # the summary as the run wrote it (a figure added since is not put into an older run's
    # table); the terms' shares, which the format reads, from its rows where it kept none
    summary = dict(data.get("summary") or summary_of(rows))
    summary.setdefault("error_share_of_total", share_summary(rows))
    text = table(rows, meta, summary, source)
    source.with_suffix(".md").write_text(text)
    return text


def _fmt(x: Any, digits: int = 2) -> str:
    return (
        "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"
    )


def _accuracy(x: Any) -> str:
    """An accuracy as shown: three decimals, floored at 0."""
    return _fmt(x if x is None else max(0.0, x), 3)


def table(
    rows: list[dict[str, Any]], meta: dict[str, Any], summary: dict[str, Any], source: Path
) -> str:
    """The Markdown table of a run: every row's terms, predicted against measured, then each
    term's miss and the total's accuracy over the rows, the noise they are read against, and
    how the run was made; `source` is the JSON it is rendered from."""
    head = "| case | k | links | " + " | ".join(f"{c} pred./meas. s" for c in COLUMNS)
    head += " | accuracy (total) | deadline met |"
    lines = [
        "# Predicted (local catalog) vs measured on the emulator",
        "",
        head,
        "|" + "---|" * (len(COLUMNS) + 5),
    ]
    lines += [row_line(r) for r in rows]
    lines += ["", "| term | mean | worst | rows |", "|---|---|---|---|"]
    shares = summary.get("error_share_of_total") or {}
    for term in TERMS[:-1]:
        if term in shares:
            s = shares[term]
            lines.append(f"| {term} | {off_by_words(s['mean'])} | {off_by_words(s['worst'])} | "
                         f"{s['rows']} |")  # fmt: skip
    if "total" in summary:
        s = summary["total"]
        lines.append(f"| total | {_accuracy(s['mean'])} | {_accuracy(s['worst'])} | {s['rows']} |")
    lines += ["", HOW_READ, *noise_lines(summary), *anchor_lines(meta)]
    lines += [
        "",
        "Deadlines met by plans the planner chose on the local catalog: "
        f"{summary['deadlines_met']}.",
        f"Machine: {meta['machine']}; load average while measuring: {meta['loadavg']}; "
        f"CPU share: {meta['cpu_share']}.",
        f"Command: `{meta['command']}`; measured = the median of each case's runs "
        f"({runs_per_case_text(meta)}).",
        f"Platform figures: {meta.get('platform', 'catalog/local.json and profiles/')}.",
    ]
    if "rescored" in meta:
        lines.append(f"Re-scored, nothing measured: {meta['rescored']}.")
    where = shown(source)
    lines.append(f"This table is rendered from {where}: `python -m bench.predict --render {where}` "
                 "writes it again, measuring nothing.")  # fmt: skip
    return "\n".join(lines) + "\n"


def row_line(r: dict[str, Any]) -> str:
    """One case's line: each column's predicted/measured seconds, the total's accuracy, and
    whether a planned case met its deadline."""
    cells = [
        f"{_fmt(r['terms'].get(c, {}).get('predicted_local_s'))}/"
        f"{_fmt(r['terms'].get(c, {}).get('measured_s'))}"
        for c in COLUMNS
    ]
    met = "–" if r["met_deadline"] is None else ("yes" if r["met_deadline"] else "**no**")
    case = r["case"]
    if r["planned"]:
        tight = (r.get("case_fields") or {}).get("tight")
        case += f" ({r['deadline_s']:.2f} s)" if tight else ""
        case += f" → n={r['n']} m={r['memory_mb']}"
    return (
        f"| {case} | {r['iterations']} | {max(r['links'])} | "
        + " | ".join(cells)
        + f" | {_accuracy(r['accuracy_local'].get('total'))} | {met} |"
    )


def noise_lines(summary: dict[str, Any]) -> list[str]:
    """The repeatability, the ceiling and the unanchored prediction, where the run has them."""
    lines = []
    if "repeatability" in summary:
        rep = summary["repeatability"]
        lines += [
            "",
            f"Repeatability (the noise the accuracy is read against): each case's median total "
            f"as a prediction of its own other runs scores mean {rep['mean']:.3f}, worst "
            f"{rep['worst']:.3f}; a case's slowest run took {rep['spread']:.2f}× its fastest "
            "on average.",
        ]
    if "ceiling" in summary:
        top, more = summary["ceiling"], summary["ceiling_more_runs"]
        lines += [
            "",
            f"Ceiling (noise_ceiling): a model exact on every case's mean, held to the median of "
            f"{runs_text(top)} runs spread as each case's were, scores mean {top['mean']:.3f} and "
            f"worst {top['worst']:.3f} in the median of {CEILING_TRIALS} simulated grids; "
            f"mean ≥ {TARGET_MEAN} in {top['p_mean']:.0%} of them, worst ≥ {TARGET_WORST} in "
            f"{top['p_worst']:.0%} (with {more['runs']} runs a case: {more['p_mean']:.0%} and "
            f"{more['p_worst']:.0%}).",
        ]
    if "total_unanchored" in summary:
        un = summary["total_unanchored"]
        lines += [
            "",
            f"The same measurements predicted from the profiles measured at the start of the run "
            f"instead of each round's anchored ones: total mean {un['mean']:.3f}, worst "
            f"{un['worst']:.3f}.",
        ]
    return lines


def anchor_lines(meta: dict[str, Any]) -> list[str]:
    """What the anchors read, round by round, where the run anchored."""
    lines = []
    if meta.get("anchors"):
        lines += [
            "",
            "Anchors: before its rows in every round, each workload's rate at the anchored shares "
            "and its start-up were measured again and its profile moved to that speed "
            "(bench.lab.anchor.anchored_profile); speed factor per round, over the profile's: "
            f"{anchor_factors_text(meta['anchors'])}.",
        ]
    if meta.get("loop_anchors"):
        lines += [
            "",
            "Loop anchors: in every round, before its rows, the catalog's round trip, the "
            "client's CPU share of an exchange and the shard's CPU per exchange were read again "
            "(bench.lab.catalog_anchor.measure_loop_now), in grids that list them also the load's "
            "CPU-bound part (measure_load_now) and an S3 request's CPU (measure_requests_now), "
            "and the round's rows planned and "
            f"predicted on the catalog with them (<name>-platform/anchors/local-round<k>.json): "
            f"{loop_anchors_text(meta['loop_anchors'])}.",
        ]
    return lines


def shown(path: Path) -> str:
    """A results file's path as the table names it: from the repository's root if under it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def runs_per_case_text(meta: dict[str, Any]) -> str:
    """How many runs each case got: the repeats, and with --precision the extra rounds' rule."""
    text = f"{meta.get('repeats', 1)} per case, taken round the cases"
    rule = meta.get("precision")
    if not rule:
        return text
    counts = rule["runs"]
    return (
        f"{text}, then again round those whose median could still stray more than "
        f"{rule['median_error']:.0%} (median_error, read from the measured totals alone), up "
        f"to {rule['max_repeats']} and for at most {rule['extra_minutes']:g} minutes: "
        f"{min(counts)}-{max(counts)} runs a case, {sum(counts)} in all"
    )


def runs_text(ceiling: dict[str, Any]) -> str:
    """The runs a case the ceiling drew: one count, or each case's own (a grid that ran the
    noisier cases more; ceilings written before kept one count)."""
    low, high = ceiling.get("runs_range") or (ceiling["runs"], ceiling["runs"])
    return f"{low}" if low == high else f"each case's own {low}-{high}"


def loop_anchors_text(rounds: list[dict[str, float]]) -> str:
    """Each anchored catalog figure's readings per round (anchor_catalog), seconds in ms, a
    share as is."""
    parts = []
    for field in ANCHORED_FIGURES:
        values = [r[field] for r in rounds if field in r]
        if values and field.endswith("_s"):
            parts.append(f"{field} {', '.join(f'{v * 1e3:.3f}' for v in values)} ms")
        elif values:
            parts.append(f"{field} {', '.join(f'{v:.3f}' for v in values)}")
    return "; ".join(parts)


def anchor_factors_text(anchors: dict[str, list[Any]]) -> str:
    """Each workload's speed factors per round, per anchored share (runs from before the
    two-share anchor kept one 1-vCPU factor per round)."""
    parts = []
    for w, rounds in sorted(anchors.items()):
        by_share = [r if isinstance(r, dict) else {"1": r} for r in rounds]
        shares = sorted({k for r in by_share for k in r}, key=float)
        each = "; ".join(
            f"{k} vCPU {', '.join(f'{r[k]:.2f}' for r in by_share if k in r)}" for k in shares
        )
        parts.append(f"{w} ({each})")
    return "; ".join(parts)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Predicted against measured totals, per workload, on log axes with a ±10% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for workload in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == workload]
        ax.scatter(
            [r["terms"]["total"]["predicted_local_s"] for r in mine],
            [r["terms"]["total"]["measured_s"] for r in mine],
            label=workload,
        )
    values = [
        v
        for r in rows
        for v in (r["terms"]["total"]["predicted_local_s"], r["terms"]["total"]["measured_s"])
        if v
    ]
    lo, hi = min(values) * 0.8, max(values) * 1.2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
    ax.fill_between(
        [lo, hi], [lo / 1.1, hi / 1.1], [lo / 0.9, hi / 0.9], color="k", alpha=0.07, label="±10%"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted total, local catalog (s)")
    ax.set_ylabel("measured total (s)")
    ax.set_title("λDNN model on the emulator: total training time")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
