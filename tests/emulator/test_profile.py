"""The profiler's output is a profile the provisioner loads, with dated, machine-named sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.profile import dataset_source, updated_profile
from provisioner import load_profile

REPO = Path(__file__).resolve().parents[2]


def test_updated_profile_loads_and_replaces_only_measured_fields(tmp_path: Path) -> None:
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [
        {"vcpu_share": 0.5, "samples_per_s": 1000.0, "startup_s": 9.0},
        {"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0},
    ]
    doc = updated_profile(
        raw,
        points,
        4.0,
        900.0,
        "x86_64",
        "2026-11-22",
        "test machine",
        cpu_limit="cgroup v2 cpu.max",
    )
    path = tmp_path / "digits-mlp.json"
    path.write_text(json.dumps(doc))
    profile = load_profile(path)
    curve = profile.rate("x86_64")
    assert curve is not None and curve.vcpu_shares == (0.5, 1.0)
    assert curve.samples_per_s == (1000.0, 1800.0)
    assert profile.startup_s == 4.0 and profile.ps_aggregation_mb_s_per_core == 900.0
    assert profile.dataset_samples == raw["dataset_samples"]  # untouched
    assert doc["sources"]["training_rate"]["tag"] == "measured"
    assert "test machine" in doc["sources"]["training_rate"]["method"]
    assert "in a cgroup v2 cpu.max of 0.5, 1 cores" in doc["sources"]["training_rate"]["method"]
    assert doc["sources"]["training_rate"]["date"] == "2026-11-22"
    assert raw["training_rate"] != doc["training_rate"]  # the input was not mutated


def test_dataset_source_names_the_runtime_loader_sources() -> None:
    assert dataset_source("digits", 1797) == "builtin:digits"
    assert dataset_source("synthetic-cifar", 50000) == "synthetic-cifar:2048"
    # CIFAR-10 is timed on same-shaped synthetic data (the rate depends on the shape only)
    assert dataset_source("cifar10", 50000) == "synthetic-cifar:2048"
    with pytest.raises(ValueError, match="'imagenet' cannot be profiled here"):
        dataset_source("imagenet", 10)
