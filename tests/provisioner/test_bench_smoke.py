"""The planner benchmark's core on a tiny grid, so it cannot rot: ours equals exhaustive."""

from __future__ import annotations

import math

from bench.planner import compare, render
from provisioner import load_profile
from tests.provisioner.conftest import small_catalog


def test_benchmark_core_is_exact_on_a_tiny_grid() -> None:
    catalog = small_catalog(
        memory_max_mb=1280, step_mb=32, shards=2, ps=("m5.large", "c5.large", "c6gn.large")
    )
    rows = compare(load_profile("digits-mlp"), catalog, (1.1, 2.0, 4.0), step_mb=64, max_n=8)
    assert len(rows) in (3, 6)  # one or two deadline anchors (ours, λDNN's setting)
    for row in rows:
        assert row.exact and math.isfinite(row.ours_usd)
        assert row.ours_s <= row.deadline_s
        # Never worse than the baselines when they meet the deadline.
        assert not row.alg1_met or row.alg1_usd >= row.ours_usd
        assert not row.naive_met or row.naive_usd >= row.ours_usd
        assert not row.hand_met or row.hand_usd >= row.ours_usd
        assert row.fixed_usd >= row.ours_usd
    assert f"{len(rows)}/{len(rows)} cases equal to exhaustive" in render(rows, [])
