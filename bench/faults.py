"""The fault table: each injected fault, how many iterations the run completed, how many it redid,
and how it ended, read from the run reports the fault tests leave.

`python -m bench.faults` runs the emulator's fault tests (tests/emulator/test_end_to_end.py and
test_faults.py) with a kept temp folder, then reads every run's report.json and writes
bench/results/faults.md. The tests assert the outcomes; this only tabulates what they produced.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "faults.md"
TESTS = ["tests/emulator/test_end_to_end.py", "tests/emulator/test_faults.py"]

# job name (set by each test) → the fault it injects
FAULTS = {
    "emu-e2e": "none (re-invoked every 1500 iterations)",
    "emu-clock": "none (wall-clock limit 4 s ends links)",
    "emu-crash-start": "worker SIGKILL at the start of its first link",
    "emu-crash-after-push": "worker SIGKILL after its 100th push, before the pull",
    "emu-crash-after-step": "worker SIGKILL after its 100th step",
    "emu-crash-before-checkpoint": "worker SIGKILL when asking the PS to checkpoint (link end)",
    "emu-psfail": "PS shard 1 of 2 SIGKILL mid-run (checkpoint every 200)",
    "emu-s3pause": "S3 server SIGSTOP mid-run, then SIGCONT",
    "emu-s3kill": "S3 server SIGKILL mid-run",
    "emu-fail": "worker raises on every attempt (max attempts 1)",
    "emu-interrupt": "SIGINT / SIGTERM to `python -m emulator`",
}


def outcome(report: dict[str, Any]) -> str:
    """How the run ended, in a few words."""
    status = report.get("status", "?")
    if status == "done":
        failed = report.get("invocations", {}).get("failed_attempts", 0)
        restarts = report.get("ps_restarts", 0)
        return f"done; {failed} failed attempt(s) retried, {restarts} PS restart(s)"
    if status == "interrupted":
        return f"interrupted by {report.get('signal')}; report written"
    return f"failed: {str(report.get('error', ''))[:90]}"


def row(report: dict[str, Any]) -> str:
    it = report.get("iterations", {})
    redone = it.get("redone", "n/a")
    fault = FAULTS.get(report.get("job", ""), report.get("job", "?"))
    return (
        f"| {fault} | {it.get('planned')} | {it.get('completed')} | {redone} "
        f"| {report.get('last_checkpoint_iteration', '—')} | {outcome(report)} |"
    )


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as base:
        test = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", f"--basetemp={base}", *TESTS], cwd=REPO
        )
        reports = [json.loads(p.read_text()) for p in sorted(Path(base).rglob("report.json"))]
    # A finished run's report is also kept among its artifacts: one row per run.
    unique = {row(r): r for r in reports if r.get("job") in FAULTS}
    reports = list(unique.values())
    reports.sort(key=lambda r: list(FAULTS).index(r["job"]))
    lines = [
        "| fault | planned | completed | redone | last checkpoint | outcome |",
        "|---|---:|---:|---:|---:|---|",
        *(row(r) for r in reports),
    ]
    table = "\n".join(lines)
    RESULTS.write_text(
        "# Fault table\n\n`python -m bench.faults` (runs the fault tests, reads their reports).\n"
        "`redone`: iterations a worker trained twice (after a PS restart or rollback); "
        "`completed` of an unfinished run is a lower bound.\n\n" + table + "\n"
    )
    print(table)
    return test.returncode


if __name__ == "__main__":
    sys.exit(main())
