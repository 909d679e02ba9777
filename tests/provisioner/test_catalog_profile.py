"""Catalog and profile files: every figure is sourced and dated; loaders reject bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provisioner import load_catalog, load_profile
from provisioner.catalog import CATALOG_DIR, catalog_from_dict
from provisioner.profile import PROFILE_DIR, profile_from_dict
from tests.provisioner.conftest import profile_dict


def _figures(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if "value" in node:
            return [node]
        return [f for v in node.values() for f in _figures(v)]
    if isinstance(node, list):
        return [f for v in node for f in _figures(v)]
    return []


# The committed (AWS) catalogs; catalog/local.json is generated per machine by `make calibrate`,
# git-ignored, with tags of its own (tests/emulator/test_calibrate.py checks it).
COMMITTED_CATALOGS = sorted(p for p in CATALOG_DIR.glob("*.json") if p.stem != "local")


@pytest.mark.parametrize("path", COMMITTED_CATALOGS, ids=lambda p: p.stem)
def test_every_catalog_figure_has_unit_source_date_and_tag(path: Path) -> None:
    doc = json.loads(path.read_text())
    figures = _figures(doc)
    assert len(figures) > 30
    for fig in figures:
        assert {"unit", "source", "date", "tag"} <= set(fig), fig
        assert fig["tag"] in set(doc["tags"]) == {"AWS", "3rd", "est", "policy"}
    assert "describe_instance_types" in doc["refresh"] and "pricing" in doc["refresh"]
    load_catalog(path)


def test_catalog_grids() -> None:
    today, old = load_catalog("lambda-2025"), load_catalog("lambda-2020")
    assert len(today.memory_grid_mb) == 10_113 and today.memory_grid_mb[-1] == 10_240
    assert len(old.memory_grid_mb) == 46 and old.memory_grid_mb[-1] == 3008
    assert [a.arch for a in old.architectures] == ["x86_64"]
    assert [p.name for p in old.ps_types] == ["m5.large"] and old.ps_max_shards == 1
    assert today.arch("arm64").usd_per_gb_s < today.arch("x86_64").usd_per_gb_s
    assert today.ps_type("c5.large").baseline_mb_s == 93.75  # 0.75 Gbit/s baseline


@pytest.mark.parametrize("share", [-0.1, 0.9, 1.5])
def test_a_default_slack_outside_0_to_90_percent_is_rejected(share: float) -> None:
    doc = json.loads((CATALOG_DIR / "lambda-2025.json").read_text())
    figure = {"value": share, "unit": "share", "source": "test", "date": "2026-11-25", "tag": "x"}
    doc["orchestration"]["default_slack"] = figure
    with pytest.raises(ValueError, match=rf"default_slack: {share!r} is not a number in \[0, 0\.9"):
        catalog_from_dict(doc)
    doc["orchestration"]["default_slack"] = {**figure, "value": 0.2}
    assert catalog_from_dict(doc).default_slack == 0.2
    assert load_catalog("lambda-2025").default_slack == 0.0  # absent: nothing held back


@pytest.mark.parametrize("path", sorted(PROFILE_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_committed_profiles_load(path: Path) -> None:
    profile = load_profile(path)
    assert profile.name == path.stem and profile.sources


def test_unknown_names_list_what_exists() -> None:
    with pytest.raises(
        ValueError,
        # `local` is listed once `make calibrate` has measured this machine
        match="catalog 'lambda-1999' not found: give a name"
        " \\(lambda-2020, lambda-2025(, local)?\\)",
    ):
        load_catalog("lambda-1999")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"model": "vgg"},
            "profile field 'model': model 'vgg' is not accepted; use a zoo name (mlp, cnn, "
            "resnet18, mobilenetv2) or path/to/file.py:function",
        ),
        (
            {"model": "/home/me/model.py:build"},
            "profile field 'model': model '/home/me/model.py:build': the file must be a path "
            "inside the project folder, relative to it (the image copies it from there)",
        ),
        (
            {"model_digest": "md5:abc"},
            "profile field 'model_digest': 'md5:abc' is not sha256: and 64 hex digits",
        ),
        (
            {"dataset": "/data/cats"},
            "profile field 'dataset': '/data/cats' is not accepted; use digits, "
            "synthetic-cifar, cifar10, synthetic-tokens, a dataset path relative to the project "
            "folder, or "
            "s3://bucket/prefix",
        ),
        (
            {"input_shape": [3, 0, 32]},
            "profile field 'input_shape': [3, 0, 32] is not a list of positive integers",
        ),
        ({"epochs": 0}, "profile field 'epochs': 0 is not a whole number in [1, 1000000]"),
        ({"epochs": 2.5}, "profile field 'epochs': 2.5 is not a whole number in [1, 1000000]"),
        (
            {"model_bytes": 1e308},
            "profile field 'model_bytes': 1e+308 is not a whole number in [1, 1e+12]",
        ),
        (
            {"learning_rate": "fast"},
            "profile field 'learning_rate': 'fast' is not a number in (0, 1000]",
        ),
        ({"schema_version": 2}, "profile field 'schema_version': 2 is not 1"),
        (
            {"profiled_local_batch": 64, "max_global_batch": 32},
            "profile field 'profiled_local_batch': 64 exceeds max_global_batch 32",
        ),
        (
            {"training_rate": {"sparc": {"points": [{"vcpu_share": 1, "samples_per_s": 1}]}}},
            "profile training_rate.sparc: architecture 'sparc' is not one of x86_64, arm64",
        ),
        (
            {
                "training_rate": {
                    "x86_64": {
                        "points": [
                            {"vcpu_share": 1, "samples_per_s": 1},
                            {"vcpu_share": 1, "samples_per_s": 2},
                        ]
                    }
                }
            },
            "profile training_rate.x86_64: duplicate vcpu_share in points [1.0, 1.0]",
        ),
        (
            {"warmup_iterations": -1},
            "profile field 'warmup_iterations': -1 is not a number in [0, 1000000]",
        ),
        (
            {"parallel_speed_ratio": 1.3, "parallel_processes": 2},
            "profile field 'parallel_speed_ratio': 1.3 is not a number in (0, 1]",
        ),
        (
            {"loop_extra_cpu_s": [{"vcpu_share": 0.5, "cpu_s": -0.001}]},
            "profile field 'cpu_s': -0.001 is not a number in [0, 86400]",
        ),
        (
            {"loop_extra_cpu_s": {"vcpu_share": 0.5}},
            "profile field 'loop_extra_cpu_s': expected a list of {'vcpu_share', 'cpu_s'}",
        ),
        (
            {"loop_extra_cpu_s": [{"vcpu_share": 1, "cpu_s": 0}, {"vcpu_share": 1, "cpu_s": 0}]},
            "profile field 'loop_extra_cpu_s': duplicate vcpu_share",
        ),
        (
            {"parallel_speed_ratio": 0.8},
            "profile field 'parallel_speed_ratio': 0.8 needs to be at most 1, measured with "
            "parallel_processes ≥ 2 (got 1)",
        ),
    ],
)
def test_bad_profiles_are_rejected_with_one_line(override: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        profile_from_dict(profile_dict(**override))
    assert str(err.value) == message


def test_a_users_model_file_and_dataset_path_are_accepted() -> None:
    doc = profile_dict(
        model="examples/own-model/model.py:build", dataset="examples/own-model/data",
        model_digest="sha256:" + "0" * 64, input_shape=[3, 16, 16],
    )  # fmt: skip
    profile = profile_from_dict(doc)
    assert (profile.model, profile.dataset) == (doc["model"], doc["dataset"])
    assert profile.input_shape == (3, 16, 16) and profile.model_digest == doc["model_digest"]
    assert profile_from_dict(profile_dict(dataset="s3://bucket/cats")).dataset == "s3://bucket/cats"


def test_missing_field_is_named() -> None:
    doc = profile_dict()
    del doc["dataset_bytes"]
    with pytest.raises(ValueError, match="^profile: missing field 'dataset_bytes'$"):
        profile_from_dict(doc)


def test_the_loops_extra_cpu_is_read_sorted_by_share() -> None:
    points = [{"vcpu_share": 1.0, "cpu_s": 0.0002}, {"vcpu_share": 0.25, "cpu_s": 0.0003}]
    profile = profile_from_dict(profile_dict(loop_extra_cpu_s=points))
    assert profile.loop_extra_cpu == ((0.25, 0.0003), (1.0, 0.0002))
    assert profile_from_dict(profile_dict()).loop_extra_cpu == ()  # not measured: none
