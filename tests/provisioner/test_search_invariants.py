"""The facts the exact search relies on, checked directly on random workloads.

1. For a fixed route and n, total time (and billed time and links) never increases with memory.
2. Over a memory block [a, b], cost ≥ cost formula at memory a with the times of memory b and
   the non-Lambda floor of memory b (the S3 exchange's misses are not monotone in memory).
3. The non-Lambda floor of a memory never exceeds the non-Lambda cost at any lower memory.
4. The per-(route, n) bound on Lambda compute cost never exceeds the cost at any memory.
Each on AWS as catalogued and on platforms with shared cores and a burst that ends mid-run.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from provisioner.catalog import Catalog
from provisioner.profile import WorkloadProfile
from provisioner.search import _compute_bound
from provisioner.space import Infeasible, Limits, build_space, cells_at, flatten
from tests.provisioner.conftest import Platform, on_platform
from tests.provisioner.test_planner_exact import FEWER_MISSES_BELOW, PLATFORMS, workload

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _setup(fields: dict[str, object], platform: Platform) -> tuple[WorkloadProfile, Catalog]:
    return on_platform(fields, platform, memory_max_mb=3008, step_mb=8, shards=2)


def _all_cells(fields: dict[str, object], platform: Platform) -> tuple[object, object] | None:
    profile, catalog = _setup(fields, platform)
    try:
        space = build_space(profile, catalog, Limits(max_concurrency=6, sync="auto"))
    except Infeasible:
        return None
    shape = (len(space.route_ps), space.n.size, space.memory_mb.size)
    r, ni, j = np.meshgrid(*(np.arange(k) for k in shape), indexing="ij")
    return space, cells_at(profile, catalog, space, r, ni, j)


@SETTINGS
@given(workload(), PLATFORMS)
def test_time_is_non_increasing_in_memory(fields: dict[str, object], platform: Platform) -> None:
    got = _all_cells(fields, platform)
    if got is None:
        return
    _, cells = got
    with np.errstate(invalid="ignore"):  # inf - inf where both cells are infeasible
        for name in ("total_s", "billed_s"):
            step = np.diff(getattr(cells, name), axis=2)
            assert np.all((step <= 0) | np.isnan(step)), name
    assert np.all(np.diff(cells.invocations, axis=2)[np.isfinite(cells.total_s[..., 1:])] <= 0)


@SETTINGS
@given(workload(), PLATFORMS)
@example(FEWER_MISSES_BELOW, (None, None, None, None))
def test_the_non_lambda_floor_holds_at_every_lower_memory(
    fields: dict[str, object], platform: Platform
) -> None:
    got = _all_cells(fields, platform)
    if got is None:
        return
    _, cells = got
    with np.errstate(invalid="ignore"):  # infeasible cells: inf - inf
        others = cells.total_usd - cells.lambda_usd  # type: ignore[attr-defined]
    others = np.where(np.isfinite(cells.total_usd), others, np.inf)  # type: ignore[attr-defined]
    least_below = np.minimum.accumulate(others, axis=2)
    floor = cells.others_floor_usd  # type: ignore[attr-defined]
    ok = np.isfinite(floor)
    assert np.all(floor[ok] <= least_below[ok] * (1 + 1e-9))


@SETTINGS
@given(workload(), st.data(), PLATFORMS)
def test_block_bound_never_exceeds_the_cost(
    fields: dict[str, object], data: st.DataObject, platform: Platform
) -> None:
    got = _all_cells(fields, platform)
    if got is None:
        return
    space, cells = got
    size = space.memory_mb.size  # type: ignore[attr-defined]
    a = data.draw(st.integers(0, size - 1))
    b = data.draw(st.integers(a, size - 1))
    usd, lam = cells.total_usd, cells.lambda_usd  # type: ignore[attr-defined]
    floor = cells.others_floor_usd  # type: ignore[attr-defined]
    mem = space.memory_mb  # type: ignore[attr-defined]
    ok = np.isfinite(usd[..., b])
    bound = floor[..., b] + lam[..., b] / mem[b] * mem[a]
    block = usd[..., a : b + 1].min(axis=2)
    assert np.all(bound[ok] <= block[ok] * (1 + 1e-9))


@SETTINGS
@given(workload(), PLATFORMS)
def test_compute_bound_never_exceeds_the_lambda_cost(
    fields: dict[str, object], platform: Platform
) -> None:
    got = _all_cells(fields, platform)
    if got is None:
        return
    space, cells = got
    profile, catalog = _setup(fields, platform)
    f = flatten(profile, catalog, space)  # type: ignore[arg-type]
    top = np.full(f.r.size, space.memory_mb.size - 1)  # type: ignore[attr-defined]
    at_top = cells_at(profile, catalog, space, f.r, f.ni, top)  # type: ignore[arg-type]
    period_s = catalog.cpu_throttle_period_s
    bound = _compute_bound(space, f.r, f.ni, at_top, f.nt, period_s, catalog.scheduler_tick_s)  # type: ignore[arg-type]
    lam = np.where(np.isfinite(cells.total_s), cells.lambda_usd, np.inf)  # type: ignore[attr-defined]
    ok = np.isfinite(at_top.total_s)
    assert np.all(bound[ok] <= lam.min(axis=2)[f.r, f.ni][ok] * (1 + 1e-9))
