"""The local memory ceiling (provisioner/local_ceiling.py) and the pipelined terms' shared-core
corrections (provisioner/pipeline_local.py): the local planner cuts a model above the ceiling,
and only then."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.catalog import catalog_from_dict
from provisioner.local_ceiling import largest_block_need_mb, parse_ceiling_mb, with_memory_ceiling
from provisioner.pipeline_local import boundary_side_cpu_s, iteration_floor_s, startup_s
from provisioner.terms import training_rate_samples_s
from tests.local_catalog import shared_core_catalog_dict

LIMITS = Limits(max_concurrency=4)
HOUR = Goal(deadline_s=3600.0)


def test_the_catalog_figure_lowers_the_memory_a_function_holds() -> None:
    assert catalog_from_dict(shared_core_catalog_dict()).memory_ceiling_mb is None
    capped = catalog_from_dict(shared_core_catalog_dict(320))
    assert (capped.memory_max_mb, capped.memory_ceiling_mb) == (320, 320)
    # the calibrator's default: the ceiling at memory_max_mb, nothing lowered
    same = catalog_from_dict(shared_core_catalog_dict(2653))
    assert same.memory_max_mb == 2653


def test_a_ceiling_is_taken_on_the_local_machines_catalog_within_its_memories() -> None:
    local = catalog_from_dict(shared_core_catalog_dict())
    assert with_memory_ceiling(local, 300).memory_max_mb == 300
    with pytest.raises(ValueError, match="applies to the local machine's catalog only"):
        with_memory_ceiling(load_catalog("lambda-2025"), 300)
    for bad in (127, 2654):
        with pytest.raises(ValueError, match="expected MB from 128 to 2653"):
            with_memory_ceiling(local, bad)
    for text in ("", "x", "0", "-1", "1.5"):
        with pytest.raises(ValueError, match="expected a whole number of MB above 0"):
            parse_ceiling_mb(text)
    assert parse_ceiling_mb("320") == parse_ceiling_mb("320MB") == 320


def test_the_largest_blocks_need_is_the_runtime_and_the_block() -> None:
    profile = load_profile("digits-mlp-blocks")
    assert profile.runtime_memory_mb == 223
    assert largest_block_need_mb(profile) == ("0:Flatten", 224)


def test_the_local_planner_cuts_the_mlp_above_the_ceiling_only() -> None:
    blocks = load_profile("digits-mlp-blocks")
    local = catalog_from_dict(shared_core_catalog_dict())
    cut = plan_job(blocks, with_memory_ceiling(local, 320), HOUR, LIMITS, "cut").plan
    assert cut.pipeline is not None and cut.pipeline.reason == "does-not-fit"
    assert 2 <= len(cut.pipeline.stages) <= 3
    assert all(s.memory_needed_mb <= s.memory_mb <= 320 for s in cut.pipeline.stages)
    # without a ceiling it fits, and its plan is the profile without blocks' (the demo's)
    kept = plan_job(blocks, local, HOUR, LIMITS, "kept").plan
    plain = plan_job(load_profile("digits-mlp"), local, HOUR, LIMITS, "kept").plan
    assert kept.pipeline is None
    assert kept == dataclasses.replace(plain, workload=blocks.name)


def test_the_shared_core_corrections_hold_on_the_local_machine_only() -> None:
    profile = load_profile("digits-mlp-blocks")
    aws = load_catalog("lambda-2025")
    assert startup_s(profile, aws, 8) == profile.startup_s
    assert iteration_floor_s(profile, aws, 2) == 0.0
    local = catalog_from_dict(shared_core_catalog_dict())  # 1.5 vCPU, 2 compute cores
    # 4 cold starts on 1.5 cores: 4 / 1.5 times one alone
    assert startup_s(profile, local, 4) == pytest.approx(profile.startup_s * 4 / 1.5)
    one = np.array([1.0])
    per_sample = sum(
        1.0 / float(training_rate_samples_s(b.rate("x86_64"), one, one * 1769.0)[0])  # type: ignore[arg-type]
        for b in profile.blocks
    )
    # 2 replicas of local batch 16, at one core each, on 2 cores
    assert iteration_floor_s(profile, local, 2) == pytest.approx(2 * 16 * per_sample / 2.0)


def test_a_boundary_sides_requests_cost_their_cpu_on_the_local_machine_only() -> None:
    mem = np.array([256, 1769, 2653])
    assert not boundary_side_cpu_s(load_catalog("lambda-2025"), mem).any()
    local = dataclasses.replace(
        catalog_from_dict(shared_core_catalog_dict()), s3_request_cpu_s=0.002, s3_server_cpu_s=0.001
    )
    # a PUT, a GET and half an empty GET: the client's CPU at the share (one core at most)
    share = np.array([256 / 1769, 1.0, 1.0])
    expected = 2.5 * (0.002 / share + 0.001)
    np.testing.assert_allclose(boundary_side_cpu_s(local, mem), expected)
