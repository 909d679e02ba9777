"""Shared builders: small catalogs and synthetic workload profiles for exactness tests."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.catalog import Catalog, load_catalog
from provisioner.profile import WorkloadProfile, profile_from_dict


def profile_dict(**overrides: Any) -> dict[str, Any]:
    """A valid profile document; keyword arguments replace top-level fields."""
    base: dict[str, Any] = {
        "schema_version": 1,
        "name": "test-workload",
        "model": "cnn",
        "dataset": "synthetic-cifar",
        "model_bytes": 4_000_000,
        "dataset_samples": 20_000,
        "dataset_bytes": 60_000_000,
        "epochs": 5,
        "profiled_local_batch": 32,
        "max_global_batch": 512,
        "min_memory_mb": 256,
        "learning_rate": 0.05,
        "momentum": 0.9,
        "training_rate": {
            "x86_64": {
                "points": [
                    {"vcpu_share": 0.5, "samples_per_s": 100},
                    {"vcpu_share": 1.0, "samples_per_s": 180},
                ]
            },
            "arm64": {
                "points": [
                    {"vcpu_share": 0.5, "samples_per_s": 90},
                    {"vcpu_share": 1.0, "samples_per_s": 170},
                ]
            },
        },
        "startup_s": 5.0,
        "ps_aggregation_mb_s_per_core": 400.0,
        "sources": {"all": "test fixture"},
    }
    base.update(overrides)
    return base


def make_profile(**overrides: Any) -> WorkloadProfile:
    return profile_from_dict(profile_dict(**overrides))


def small_catalog(
    *,
    memory_max_mb: int = 1280,
    step_mb: int = 64,
    shards: int = 3,
    ps: tuple[str, ...] = (),
    total_vcpu: float | None = None,
    burst_s: float | None = None,
    load_cpu_s: float | None = None,
) -> Catalog:
    """Today's catalog cut down to a grid an exhaustive enumeration handles in milliseconds.

    `total_vcpu` shares cores among the functions (the local platform's cap); `burst_s` replaces
    every PS type's burst (the catalog's 300 s outlasts most small test jobs); `load_cpu_s` is the
    local platform's CPU-bound load.
    """
    cat = load_catalog("lambda-2025")
    types = tuple(p for p in cat.ps_types if not ps or p.name in ps)
    if burst_s is not None:
        types = tuple(dataclasses.replace(p, burst_s=burst_s) for p in types)
    return dataclasses.replace(
        cat,
        memory_min_mb=128,
        memory_max_mb=memory_max_mb,
        memory_step_mb=step_mb,
        ps_max_shards=shards,
        ps_types=types,
        total_vcpu=total_vcpu,
        load_cpu_s=load_cpu_s,
        # The run's set-up is one constant added to every cell (test_model checks it); the
        # grids and deadlines here were chosen without it.
        endpoint_ready_s=0.0,
        ps_start_s=0.0,
        ps_default_type=types[0].name
        if cat.ps_default_type not in {p.name for p in types}
        else cat.ps_default_type,
    )


@pytest.fixture(scope="session")
def catalog_2025() -> Catalog:
    return load_catalog("lambda-2025")


@pytest.fixture(scope="session")
def catalog_2020() -> Catalog:
    return load_catalog("lambda-2020")


def run_report_dict(**overrides: Any) -> dict[str, Any]:
    """A finished run's report.json as emulator/report.py writes it, cut to what calibration
    reads: profile_dict()'s workload, 2 workers × 1024 MB at 0.75 local cores, 100 iterations of
    local batch 32 in 20 s of compute (160 samples/s). Keyword arguments replace top-level fields.
    """

    def term(name: str, measured_s: float | None) -> dict[str, Any]:
        return {"term": name, "predicted_s": 1.0, "measured_s": measured_s}

    base: dict[str, Any] = {
        "job": "calib",
        "status": "done",
        "plan": {
            "n_workers": 2,
            "memory_mb": 1024,
            "arch": "x86_64",
            "vcpu_share": 0.5789,
            "ps_type": "loopback",
            "ps_count": 1,
            "iterations": 100,
            "local_batch": 32,
            "model": "cnn",
            "dataset": "synthetic-cifar",
        },
        "emulation": {"cpu_scale_cores_per_vcpu": 1.0, "worker_cores": 0.75},
        "terms": [
            term("load", 0.5),
            term("compute", 20.0),
            term("communication", 10.0),
            term("ps_aggregation", 2.0),
            term("startup", 2.5),
            term("chaining", 0.0),
            term("total", 40.0),
        ],
        "iterations": {"planned": 100, "completed": 100, "redone": 0},
    }
    base.update(overrides)
    return base


# (total vCPU, PS burst s, load CPU s, parallel speed[, the scheduler's tick s])
Platform = tuple[float | None, ...]


def on_platform(
    profile_fields: dict[str, Any], platform: Platform, **grid: Any
) -> tuple[WorkloadProfile, Catalog]:
    """A profile and a small catalog (`grid`: small_catalog's sizes) on one test platform: its
    shared cores, PS burst and CPU-bound load go to the catalog, the speed workers keep while
    they share the cores (measured with 2 at once) to the profile."""
    cores, burst_s, load_cpu_s, speed, *tick = platform
    if speed is not None:
        profile_fields = {**profile_fields, "parallel_speed_ratio": speed, "parallel_processes": 2}
    catalog = small_catalog(total_vcpu=cores, burst_s=burst_s, load_cpu_s=load_cpu_s, **grid)
    if cores is not None:  # the S3 requests' CPU on shared cores (local_s3.s3_cpu_floor_s)
        catalog = dataclasses.replace(catalog, s3_request_cpu_s=0.0014, s3_server_cpu_s=0.0012)
    if tick and tick[0]:  # where a short step's wait for the cores is timed
        catalog = dataclasses.replace(catalog, scheduler_tick_s=float(tick[0]))
    return make_profile(**profile_fields), catalog
