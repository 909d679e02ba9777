"""Names the emulator gives to the resources the stacks would create for a job.

In AWS the buckets get CloudFormation-generated names; locally we pick stable, valid ones
(3–63 characters, lower case, digits, dots, hyphens). Prefixes come from `stacks.events`, the
same functions the stacks use, so the keys inside the buckets match the AWS path. The run folder
is `runs/<job>` (or the folder given), and it is never allowed to resolve outside that place: a run
deletes the `logs` and `artifacts` it finds there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from provisioner.parse import parse_job_name

# What a run deletes at its start, then writes: folders, then files (`tmp` is the functions' /tmp).
RUN_FOLDERS = ("logs", "artifacts", "tmp")
RUN_FILES = ("report.json", "loss.png")
RUN_ENTRIES = RUN_FOLDERS + RUN_FILES
SECRET_ENV = "LAMBDA_DNN_PS_SECRET"  # the worker event's secret_ref is f"env:{SECRET_ENV}"


def bucket_name(job: str, purpose: str) -> str:
    """A valid S3 bucket name `<job>-<purpose>` (lower-cased, invalid characters → '-')."""
    raw = f"{job}-{purpose}".lower()
    name = re.sub(r"[^a-z0-9.-]", "-", raw).strip("-.")
    if len(name) < 3:
        name = f"{name}-bucket"
    return name[:63].rstrip("-.")


def run_dir(job: str, given: Path | None, runs_root: Path) -> Path:
    """Where a run writes: `given`, else `runs_root/<job>`; ValueError (one line) if unusable.

    The job name is checked again here (no path is built from an unchecked name); the default
    must resolve strictly inside `runs_root`, and what a run deletes and rewrites in the folder
    (RUN_ENTRIES) must resolve inside the folder, so a symlink cannot send it elsewhere.
    """
    out = given if given is not None else runs_root / parse_job_name(job)
    for folder in (out, *out.parents):
        if folder.exists():
            if not folder.is_dir():
                where = "" if folder == out else f" ({str(folder)!r} is a file)"
                raise ValueError(f"output folder {str(out)!r} is not a folder{where}")
            if not os.access(folder, os.W_OK):
                raise ValueError(f"output folder {str(out)!r}: {str(folder)!r} is not writable")
            break
    root = out.resolve()
    if given is None and (
        root == runs_root.resolve() or not root.is_relative_to(runs_root.resolve())
    ):
        raise ValueError(f"output folder {str(out)!r} resolves outside {str(runs_root)!r}")
    for entry in RUN_ENTRIES:
        if not (out / entry).resolve().is_relative_to(root):
            raise ValueError(f"output folder {str(out)!r}: {entry!r} leads outside it (a symlink)")
    return out
