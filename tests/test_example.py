"""The "Train your own model" example end to end, as a user runs it (README; `make example`):
a user's model file and image folder, profiled on this machine, synthesized for AWS with the file
in the image, and trained in the emulator from the plan synth wrote."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.cpu import machine_cores
from functions.model_spec import file_digest
from provisioner import load_profile
from tests.stacks.conftest import run_synth

REPO = Path(__file__).resolve().parents[1]
SPEC = "examples/own-model/model.py:build"


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder inside the project (datasets and model files are named relative to it)."""
    folder = REPO / "runs" / f"test-example-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_users_model_and_images_profile_synthesize_and_train(scratch: Path) -> None:
    data = scratch / "data"
    _run("examples/own-model/make_data.py", "--out", str(data), "--per-class", "40")
    assert sorted(p.name for p in data.iterdir()) == ["circle", "cross", "square"]
    dataset = data.relative_to(REPO).as_posix()
    profile_path = scratch / "shapes-cnn.json"
    _run("-m", "emulator.profile", "--model", SPEC, "--dataset", dataset, "--name", "shapes-cnn",
         "--epochs", "4", "--shares", "1", "--repeats", "1", "--pairs", "2", "--measure-s", "0.3",
         "--output", str(profile_path))  # fmt: skip
    profile = load_profile(profile_path)
    assert (profile.model, profile.dataset, profile.input_shape) == (SPEC, dataset, (3, 16, 16))
    assert profile.model_digest == file_digest(SPEC) and profile.dataset_samples == 120
    assert not profile.provisional and 128 <= profile.min_memory_mb < 10240
    if machine_cores() >= 2:  # one child per core, as the ranks of one run (emulator.profile)
        assert profile.parallel_speed_ratio is not None and 0 < profile.parallel_speed_ratio <= 1
        method = json.loads(profile_path.read_text())["sources"]["parallel_speed_ratio"]["method"]
        assert "in lockstep" in method
        readings = json.loads(profile_path.read_text())["sources"]["parallel_speed_ratio"][
            "readings"
        ]
        assert len(readings) == 2 and all(0 < r <= 1 for r in readings)  # --pairs 2, each shown
        assert profile.parallel_speed_ratio == pytest.approx(sum(readings) / 2, abs=1e-3)

    synth = run_synth({"workload": str(profile_path), "dataset": dataset, "job": "shapes",
                       "deadline": "15m"}, str(scratch / "cdk.out"))  # fmt: skip
    assert synth.code == 0, synth.stderr
    plan_path = Path(synth.outdir) / "plan.json"
    training = json.loads(plan_path.read_text())["plan"]["training"]
    assert (training["model"], training["dataset"]) == (SPEC, dataset)

    out = scratch / "run"
    _run("-m", "emulator", str(plan_path), "--workload", str(profile_path), "--out", str(out),
         "--invocation-limit", "20s", "--quiet")  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    assert report["plan"]["model"] == SPEC
    assert report["iterations"]["completed"] == report["iterations"]["planned"] > 0
    first, last = report["loss"]["first"], report["loss"]["last"]
    assert last < first  # it trained
    assert report["accuracy"]["samples"] == 24  # a fifth of 120 held out
