"""Predicted vs measured on the emulator: the model held to the platform it predicts.

`python -m bench.predict [--quick] [--planned] [--only WORKLOAD] [--repeats R] [--reuse]
[--precision P [--max-repeats M] [--extra-minutes X]] [--no-anchor]`
`python -m bench.predict --rescore [--quick] [--only WORKLOAD] [--set SECTION.FIELD=VALUE ...]
[--anchor-weight W] [--profile WORKLOAD=PATH ...]`
`python -m bench.predict --held-out N [--seed S] [--repeats R] [--reuse] [--no-anchor]`
`python -m bench.predict --render bench/results/<name>.json`

Every configuration is planned on the local platform's catalog (`catalog/local.json`, written
by `python -m emulator.calibrate` for this machine): the same model and planner as for AWS, fed
figures measured here. The emulator then trains it and its report sets each term's local
prediction against the measurement. Writes bench/results/predict.{json,md,png} (`--quick`,
`--only W`: predict-quick.*, predict-W.*; a re-scoring: *-rescored.*). `--held-out N` draws N
configurations at random from a wide space instead (heldout) and keeps its results per host:
bench/results/hosts/<host-id>/predict-heldout.{json,md,png}.

One concern a module:
- cases: the fixed configurations and the deadlines the planner sizes for, and each one's plan;
- heldout: the held-out draw (seeded), each case's iterations, what is drawn again and why;
- host: the host a run measured on, its id and what it is;
- run_case: one case through the emulator, a row of the table;
- anchors: the platform measured at the start, and read again every round;
- rounds: rounds and repeats (the precision rule, the extra minutes);
- rows: a case's runs brought to their medians, and how a row is scored;
- noise: repeatability, the median's error, the noise ceiling;
- rescore: an earlier run predicted again by the current model;
- results: the summary, the table, the JSON and the chart (and rendering a table again);
- heldout_results: a held-out run's summary (coverage, shares, requests) and table;
- cli: the options, and what each mode does; __main__ the shell that runs it.

This module composes them: it hands each part the names it works with (the run, the plan, the
anchors, the results folder), read here when called, so replacing one of them on bench.predict,
as the tests do, replaces it for every part.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.predict import anchors, cli, heldout, heldout_results, results, run_case
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
from bench.predict.heldout import Draws, Here, draw_cases
from bench.predict.heldout_results import heldout_summary, render_any
from bench.predict.host import this_host
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
    "ANCHORED_FIGURES", "Draws", "FIXED", "Here", "command", "draw", "draw_cases",
    "heldout_summary", "render_any", "this_host", "write_heldout",
    "PLANNED", "QUICK", "REPO_ROOT", "RESULTS", "TERMS", "Case",
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


def draw(count: int, seed: int, local_catalog: Path) -> Draws:
    """heldout.draw_cases for this machine, on the local catalog file `local_catalog`."""
    return heldout.draw_cases(count, seed, Here.of(local_catalog))


def write_heldout(rows: list[dict[str, Any]], meta: dict[str, Any], folder: Path) -> str:
    """heldout_results.write_heldout, in the host's `folder`."""
    return heldout_results.write_heldout(rows, meta, folder)


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
        draw=draw,
        host=this_host,
        write_heldout=write_heldout,
    )
    return cli.main(argv, lab)


def command(argv: list[str] | None = None) -> int:
    """The shell's entry: main, with a bad option or input one line on stderr and exit 2."""
    try:
        return main(argv)
    except ValueError as err:
        print(f"bench.predict: {err}", file=sys.stderr)
        return 2
