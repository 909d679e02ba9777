"""One case through the emulator: plan it, train it (real S3 server, PS processes, workers held
to their CPU share) and read its report into a row of the table."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.predict.cases import INVOCATION_LIMIT_S, TERMS, Case, plan_of
from emulator import orchestrator
from emulator.options import LOCAL_CATALOG, Options


def measure(
    case: Case,
    endpoint: Any,
    out: Path,
    profile_path: Path | None = None,
    catalog_path: Path | None = None,
    *,
    plan: Callable[[Case, Path | None, Path | None], Any] = plan_of,
    run: Callable[..., Any] = orchestrator.run,
) -> dict[str, Any]:
    """Train one case; the row of the table (every term: local prediction, measured, accuracy,
    share of the total), planned (`plan`) on the catalog at `catalog_path` and predicted on it
    by the emulator's report (default: catalog/local.json); `run` trains it."""
    chosen = plan(case, profile_path, catalog_path)
    started = time.monotonic()
    run(
        chosen,
        Options(
            invocation_limit_s=INVOCATION_LIMIT_S,
            # 1 local core a vCPU for a local plan; None fits an AWS plan to this machine
            cpu_scale=1.0 if case.cpu_scale == "1" else None,
            out_dir=out,
            quiet=True,
            print_report=False,
            iterations_per_invocation=case.per_invocation,
            workload=str(profile_path) if profile_path else None,
            local_catalog=str(catalog_path) if catalog_path else LOCAL_CATALOG,
        ),
        endpoint=endpoint,
    )
    report = json.loads((out / "report.json").read_text())
    return row_of(case, chosen, report, time.monotonic() - started)


def row_of(case: Case, plan: Any, report: dict[str, Any], run_s: float) -> dict[str, Any]:
    """The row a run's report makes: its configuration, every term predicted here, measured
    and predicted for AWS, the report's accuracies and shares, and whether it met its
    deadline."""
    terms = {row["term"]: row for row in report["terms"]}
    return {
        "case": case.label,
        "case_fields": dataclasses.asdict(case),
        "workload": case.workload,
        "planned": case.planned,
        "deadline_s": plan.goal.deadline_s if case.planned else None,
        "n": plan.n_workers,
        "memory_mb": plan.memory_mb,
        "ps_count": plan.ps_count,
        "sync": case.sync,
        "reducers": case.reducers,
        "cpu_scale": case.cpu_scale,
        # the cores a worker ran on: what the report's local prediction stands its memory for
        "worker_cores": report["emulation"].get("worker_cores"),
        "iterations": plan.training.iterations,
        "links": report["invocations"]["per_worker"],
        "cpu_share": report["emulation"]["cpu_share"],
        "terms": {
            t: {
                "predicted_local_s": terms[t].get("predicted_local_s"),
                "measured_s": terms[t].get("measured_s"),
                "predicted_aws_s": terms[t].get("predicted_s"),
            }
            for t in TERMS
            if t in terms
        },
        "accuracy_local": report.get("accuracy_local") or {},
        "error_share_of_total_local": report.get("error_share_of_total_local") or {},
        # where the report has them: the total's interval, and an S3 run's requests a round
        "interval_local": report.get("interval_local"),
        "requests_per_iteration": (report.get("exchange") or {}).get("requests_per_iteration"),
        "met_deadline": (
            terms["total"]["measured_s"] <= plan.goal.deadline_s if case.planned else None
        ),
        "run_s": run_s,
    }
