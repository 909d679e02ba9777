"""The shape of a bad-input case, the helpers that build one, and the files a case can name.

In a case, `{dir}` is a scratch folder holding the files of FILES and the case's own `files`,
and `plan.json`, written from the case's `plan`: JSON text, or changes ("training.model": "gpt5";
DROP removes the field) to a valid plan from the real planner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.local_catalog import local_catalog_dict
from tests.provisioner.conftest import run_report_dict

REPO = Path(__file__).resolve().parents[2]
DROP = object()
PROGRAMS = {
    "plan": "python -m provisioner",
    "emulator": "python -m emulator",
    "cdk": "cdk synth",
    "profile": "python -m emulator.profile",
    "calibrate": "python -m emulator.calibrate",
    "catalog_from_runs": "python -m bench.lab.catalog_from_runs",
    "ps": "python -m functions.ps",
    "datasets": "python -m functions.datasets",
    "predict": "python -m bench.predict",
}


def _profile(**changes: Any) -> str:
    data = json.loads((REPO / "profiles" / "digits-mlp.json").read_text(encoding="utf-8"))
    return json.dumps({**data, **changes}, ensure_ascii=False)


def _digits_report(**changes: Any) -> str:
    """A finished run's report.json of digits-mlp with the top-level changes shown."""
    report = run_report_dict(**changes)
    report["plan"].update(model="mlp", dataset="digits", local_batch=16)
    return json.dumps(report)


FILES: dict[str, str | bytes] = {
    "no-terms.json": json.dumps({"job_id": "demo", "complete": True}),
    "aws-run.json": json.dumps({"job_id": "demo", "complete": True, "workers": []}),
    "interrupted.json": _digits_report(status="interrupted"),
    "cnn-run.json": json.dumps(run_report_dict()),
    "no-iterations.json": _digits_report(iterations={"planned": 100, "completed": 0}),
    "momentum.json": _profile(momentum=1.0),
    "nan-rate.json": _profile(learning_rate=float("nan")),
    "latin1.json": _profile(name="caf\u00e9").encode("latin-1"),
    "a-file": "not a folder",
    "local.json": json.dumps({"name": "local"}),
    "local-catalog.json": json.dumps(local_catalog_dict()),
    "not-json.json": "a profile? no: plain text",
    "no-data.json": _profile(dataset="data/no-such-folder"),
    "etc-name.json": _profile(name="../../etc/x"),
}


@dataclass(frozen=True)
class Case:
    entry: str  # a key of PROGRAMS
    args: tuple[str, ...]  # argv; for cdk, key=value context (cdk.json's values underneath)
    code: int  # exit code; for cdk the app's (the cdk CLI reports any non-zero as 1)
    says: str  # a fragment of the one line on stderr
    plan: str | dict[str, Any] | None = None
    given: str = ""  # what a file in args holds, for the table
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written into {dir} for this case


def plan_case(*args: str, says: str, code: int = 2, given: str = "") -> Case:
    return Case("plan", args, code, says, given=given)


def emu(*args: str, says: str, plan: str | dict[str, Any] | None = None, given: str = "") -> Case:
    if not given and isinstance(plan, dict):
        given = "plan.json: " + ", ".join(
            f"{key} {'removed' if value is DROP else json.dumps(value)}"
            for key, value in plan.items()
        )
    elif not given and plan is not None:
        given = f"plan.json: {plan}"
    return Case("emulator", ("{dir}/plan.json", *args), 2, says, plan=plan or {}, given=given)


def prof(*args: str, says: str, given: str = "") -> Case:
    return Case("profile", args, 2, says, given=given)


def ps_case(*args: str, says: str, given: str = "") -> Case:
    return Case("ps", args, 2, says, given=given)


def slack_case(
    catalog: str, runs: str, says: str, given: str, option: str = "--slack-from"
) -> Case:
    """python -m bench.lab.catalog_from_runs --out {dir}/CATALOG OPTION {dir}/RUNS
    (--slack-from, or --init-cores-from)"""
    args = ("--out", f"{{dir}}/{catalog}", option, f"{{dir}}/{runs}")
    return Case("catalog_from_runs", args, 2, says, given=given)


def cdk(*args: str, says: str, code: int = 2, given: str = "") -> Case:
    return Case("cdk", args, code, says, given=given)


DIGITS = ("--workload", "digits-mlp")
HOUR = (*DIGITS, "--deadline", "1h")
