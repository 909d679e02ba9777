"""The report of a run that did not finish: why, and how far it got.

A failed or interrupted run's own state (worker results, the PS) is gone by the time the report
is written, so how far it got is read back from what the run left in its `logs/`: the workers'
progress lines and results, and the PS shards' "checkpointed iteration N" lines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from emulator.progress import PROGRESS_RE
from provisioner.files import write_text_atomically

_CHECKPOINTED_RE = re.compile(r"shard (\d+) checkpointed iteration (\d+)")


def iterations_completed(logs: Path) -> int:
    """Iterations the PS has applied, as the workers saw them.

    Under BSP a worker logs iteration i (or returns it) only after pulling the parameters of i,
    i.e. once every worker's gradient for i - 1 was applied: the furthest any worker saw is the
    number of completed iterations.
    """
    reached = [0]
    for log in logs.glob("worker-*.log"):
        text = log.read_text(errors="replace")
        reached.extend(int(it) for _, it, _ in PROGRESS_RE.findall(text))
    for result in logs.glob("worker-*.result.json"):
        try:
            reached.append(int(json.loads(result.read_text()).get("iteration", 0)))
        except (ValueError, TypeError, AttributeError):
            continue  # an error object or a half-written file says nothing about progress
    return max(reached)


def last_common_checkpoint(logs: Path, shards: int) -> int | None:
    """Newest iteration every PS shard logged as checkpointed (what a restart resumes from)."""
    by_shard: dict[int, set[int]] = {k: set() for k in range(shards)}
    for log in logs.glob("ps-*.log"):
        for shard, iteration in _CHECKPOINTED_RE.findall(log.read_text(errors="replace")):
            by_shard.setdefault(int(shard), set()).add(int(iteration))
    common = set.intersection(*by_shard.values()) if by_shard else set()
    return max(common) if common else None


def unfinished_report(
    *, job: str, status: str, planned: int, shards: int, logs: Path, **detail: Any
) -> dict[str, Any]:
    """report.json of a run that ended as `status` ("failed" or "interrupted")."""
    checkpoint = last_common_checkpoint(logs, shards)
    # The PS may have got further than any worker said (a checkpoint when it was stopped).
    completed = max(iterations_completed(logs), checkpoint or 0)
    return {
        "job": job,
        "status": status,
        **detail,
        "iterations": {"planned": planned, "completed": completed},
        "last_checkpoint_iteration": checkpoint,
        "logs": str(logs),
    }


def write_report(out_dir: Path, report: dict[str, Any]) -> Path:
    """Write report.json atomically: an interrupt while writing leaves the old file or the new."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.json"
    write_text_atomically(path, json.dumps(report, indent=2) + "\n")
    return path
