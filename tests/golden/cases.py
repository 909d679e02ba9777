"""The fixed inputs whose plans and templates are recorded, and how each is produced.

Synths cover the stacks (both exchanges, both AWS catalogs, the profiling mode, several
workloads); plans cover the planner more widely and cheaply (every shipped profile, several
deadlines, both AWS catalogs and the test stand-in for this machine's catalog). The container
image's asset hash is a hash of the functions/ and provisioner/ sources, so a reshaping of those
files changes it by design, and with it the PS instances' logical IDs (their user data names the
image). So the
golden synths hash the image without its Python sources (the Dockerfile and the requirements
still count), and what hashes remain are replaced by a placeholder; nothing else is.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from tests.local_catalog import local_catalog

GOLDEN_DIR = Path(__file__).resolve().parent / "recorded"

SYNTHS: dict[str, dict[str, str]] = {
    "default-2h": {"deadline": "2h"},
    "digits-10m-s3": {"deadline": "10m", "sync": "s3"},
    "digits-90m-ps-2020": {"deadline": "90m", "sync": "ps", "catalog": "lambda-2020"},
    "cnn-1h": {"workload": "synthetic-cifar-cnn", "dataset": "synthetic-cifar:4096",
               "deadline": "1h"},
    "mobilenet-budget": {"workload": "synthetic-cifar-mobilenetv2",
                         "dataset": "synthetic-cifar:4096", "budget": "5"},
    "profile-mode": {"mode": "profile"},
    # re-planning off: the plan and templates the default synth had before re-planning
    "default-2h-replan-off": {"deadline": "2h", "replan": "off"},
}  # fmt: skip

PROFILES = (
    "digits-mlp",
    "synthetic-cifar-cnn",
    "synthetic-cifar-mobilenetv2",
    "cifar10-resnet18",
    "paper-cifar10-mobilenetv2",
    "paper-cifar10-resnet50",
)
DEADLINES_S = (600.0, 3600.0, 4 * 3600.0)
CATALOGS = ("lambda-2025", "lambda-2020", "local")
SYNCS = ("ps", "s3")

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def normalized(text: str) -> str:
    """The text with every 64-hex asset hash replaced by a placeholder."""
    return _ASSET_HASH.sub("<asset-hash>", text)


def synth_files(name: str) -> dict[str, str]:
    """{file name: text} of one synth: its plan.json and each stack's template."""
    from stacks.image import ImageSpec
    from tests.stacks.conftest import run_synth

    exclude = ImageSpec.exclude.fget  # type: ignore[attr-defined]
    without_sources = property(
        lambda spec: [*exclude(spec), "functions/**/*.py", "provisioner/**/*.py"]
    )
    with (
        tempfile.TemporaryDirectory() as outdir,
        mock.patch.object(ImageSpec, "exclude", without_sources),
    ):
        result = run_synth(SYNTHS[name], outdir)
        if result.code != 0:
            raise RuntimeError(f"synth {name} failed: {result.stderr}")
        files = {
            f"{stack}.template.json": json.dumps(template, indent=1, sort_keys=True)
            for stack, template in result.templates.items()
        }
        plan = Path(outdir) / "plan.json"
        if plan.exists():
            files["plan.json"] = plan.read_text(encoding="utf-8")
    return {key: normalized(text) for key, text in files.items()}


def _catalog(name: str) -> Any:
    return local_catalog() if name == "local" else load_catalog(name)


def plan_documents() -> dict[str, str]:
    """{case name: plan JSON, or the planner's refusal} for every profile x deadline x catalog."""
    docs: dict[str, str] = {}
    catalogs = {name: _catalog(name) for name in CATALOGS}
    for profile in PROFILES:
        workload = load_profile(profile)
        for catalog in CATALOGS:
            for deadline_s in DEADLINES_S:
                for sync in SYNCS:
                    name = f"{profile}-{catalog}-{int(deadline_s)}s-{sync}"
                    try:
                        result = plan_job(workload, catalogs[catalog],
                                          Goal(deadline_s=deadline_s), Limits(sync=sync),
                                          "golden")  # fmt: skip
                        docs[name] = result.to_json()
                    except Exception as exc:  # noqa: BLE001 (a refusal is behaviour too)
                        docs[name] = f"refused: {type(exc).__name__}: {exc}"
    return docs
