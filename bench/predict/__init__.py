"""Predicted vs measured on the emulator: the model held to the platform it predicts.

`python -m bench.predict [--quick] [--planned] [--only WORKLOAD] [--repeats R] [--reuse]
[--precision P [--max-repeats M] [--extra-minutes X]] [--no-anchor]`
`python -m bench.predict --rescore [--quick] [--only WORKLOAD] [--set SECTION.FIELD=VALUE ...]
[--anchor-weight W] [--profile WORKLOAD=PATH ...]`
`python -m bench.predict --render bench/results/<name>.json`

Every configuration is planned on the local platform's catalog (`catalog/local.json`, written
by `python -m emulator.calibrate` for this machine): the same model and planner as for AWS, fed
figures measured here. The emulator then trains it and its report sets each term's local
prediction against the measurement. Writes bench/results/predict.{json,md,png} (`--quick`,
`--only W`: predict-quick.*, predict-W.*; a re-scoring: *-rescored.*).

One concern a module:
- cases: the fixed configurations and the deadlines the planner sizes for, and each one's plan;
- run_case: one case through the emulator, a row of the table;
- anchors: the platform measured at the start, and read again every round;
- rounds: rounds and repeats (the precision rule, the extra minutes);
- rows: a case's runs brought to their medians, and how a row is scored;
- noise: repeatability, the median's error, the noise ceiling;
- rescore: an earlier run predicted again by the current model;
- results: the summary, the table, the JSON and the chart (and rendering a table again);
- cli: the options, and what each mode does; __main__ the shell that runs it.

This module composes them: it hands each part the names it works with (the run, the plan, the
anchors, the results folder), read here when called, so replacing one of them on bench.predict,
as the tests do, replaces it for every part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.predict import anchors, cli, results, run_case
from bench.predict.anchors import (
    ANCHORED_FIGURES,
    REPO_ROOT,
    anchor_catalog,
    anchor_profile,
    anchored_figures_of,
)
from bench.predict.cases import (
    FIXED,
    PLANNED,
    QUICK,
    TERMS,
    Case,
    case_of,
    job_of,
    plan_of,
    tight_deadline_s,
)
from bench.predict.noise import comparable_totals, median_error, noise_ceiling, repeatability
from bench.predict.rescore import catalog_figures_set, predicted_terms, rescore_row
from bench.predict.results import (
    anchor_factors_text,
    loop_anchors_text,
    render,
    runs_per_case_text,
    runs_text,
    summary_of,
)
from bench.predict.rounds import Instruments, cases_wanting_runs
from bench.predict.rows import accuracy, error_shares, median_row
from emulator.orchestrator import run
from emulator.s3server import weed_server
from provisioner import load_catalog
from provisioner.catalog import catalog_from_dict

RESULTS = REPO_ROOT / "bench" / "results"

__all__ = [
    "ANCHORED_FIGURES", "FIXED", "PLANNED", "QUICK", "REPO_ROOT", "RESULTS", "TERMS", "Case",
    "accuracy", "anchor_catalog", "anchor_factors_text", "anchor_profile", "anchored_figures_of",
    "case_of", "cases_wanting_runs", "catalog_figures_set", "catalog_from_dict",
    "comparable_totals", "error_shares", "job_of", "keep_platform", "load_catalog",
    "loop_anchors_text", "main", "measure", "measure_platform", "median_error", "median_row",
    "noise_ceiling", "plan_of", "predicted_terms", "render", "repeatability", "rescore_row",
    "run", "runs_per_case_text", "runs_text", "summary_of", "tight_deadline_s", "weed_server",
    "write_results",
]  # fmt: skip


def measure(
    case: Case,
    endpoint: Any,
    out: Path,
    profile_path: Path | None = None,
    catalog_path: Path | None = None,
) -> dict[str, Any]:
    """run_case.measure, planned by this module's plan_of and trained by its run."""
    return run_case.measure(case, endpoint, out, profile_path, catalog_path, plan=plan_of, run=run)


def measure_platform(workloads: list[str], out: Path) -> dict[str, Path]:
    """anchors.measure_platform, on the repository at this module's REPO_ROOT."""
    return anchors.measure_platform(workloads, out, REPO_ROOT)


def keep_platform(workloads: list[str], out: Path) -> dict[str, Path]:
    """anchors.keep_platform, from the repository at this module's REPO_ROOT."""
    return anchors.keep_platform(workloads, out, REPO_ROOT)


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any], name: str = "predict") -> str:
    """results.write_results, under this module's RESULTS."""
    return results.write_results(rows, meta, name, RESULTS)


def main(argv: list[str] | None = None) -> int:
    """The command (cli.main) with this module's names, as they are when it is called."""
    lab = cli.Lab(
        results=RESULTS,
        quick=QUICK,
        instruments=Instruments(measure, anchor_catalog, anchor_profile, predicted_terms),
        load_catalog=load_catalog,
        measure_platform=measure_platform,
        keep_platform=keep_platform,
        weed_server=weed_server,
        write_results=write_results,
    )
    return cli.main(argv, lab)
