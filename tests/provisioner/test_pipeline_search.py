"""The pipelined search equals enumerating every cut and every per-stage memory (small cases)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.catalog import Catalog
from provisioner.pipeline_model import (
    RunFigures,
    RunShape,
    run_figures,
    stage_figures,
    stage_sync_s,
    stage_syncs_s,
)
from provisioner.pipeline_search import (
    PipelineCandidate,
    better,
    divisors,
    meets,
    pipeline_memory_grid,
    search_pipeline,
    sync_routes,
)
from provisioner.profile import WorkloadProfile
from provisioner.space import Limits
from provisioner.terms import iterations, local_batch
from tests.provisioner.conftest import small_catalog
from tests.provisioner.pipeline_profiles import block_dict, blocks_profile

LIMITS = Limits(max_concurrency=4, sync="auto")


def catalog() -> Catalog:
    return small_catalog(memory_max_mb=768, shards=1, ps=("c5.large", "c6g.large"))


def stage_row(
    p: WorkloadProfile, cat: Catalog, arch: str, route, r: int, m: int, b_l: int, a: int, b: int,
    mem: int,
) -> tuple[float, float, int]:  # fmt: skip
    """(slot, sync, need) of blocks [a, b) at one memory, straight from the model's functions."""
    f = stage_figures(p, cat, arch, route, r, m, b_l, a, b, mem)
    return f.compute_s + f.boundary_s, f.sync_s, f.need_mb


def brute_force(
    p: WorkloadProfile, cat: Catalog, limits: Limits, deadline: float | None, budget: float | None
) -> RunFigures | None:
    """Every S, cut, per-stage memory, r, M, arch and route, priced by run_figures."""
    grid = [int(g) for g in pipeline_memory_grid(cat, limits)]
    count, best = len(p.blocks), None
    for stages in range(2, count + 1):
        for cut in itertools.combinations(range(1, count), stages - 1):
            bounds = list(zip((0, *cut), (*cut, count), strict=True))
            for r in range(1, (limits.max_concurrency or 1) // stages + 1):
                b_l = int(local_batch(np.array([r]), p.profiled_local_batch, p.max_global_batch)[0])
                k = int(iterations(p.dataset_samples, p.epochs, np.array([r * b_l]))[0])
                for arch in ("x86_64", "arm64"):
                    price = cat.arch(arch).usd_per_gb_s
                    for route in sync_routes(cat, limits, r, arch):
                        ps_price = cat.ps_type(route.ps_type).usd_per_hour if route.ps_type else 0.0
                        for m in divisors(b_l):
                            shape = RunShape(stages, r, m, k, price, route, ps_price)
                            table = {
                                (a, b, mem): stage_row(p, cat, arch, route, r, m, b_l, a, b, mem)
                                for a, b in bounds
                                for mem in grid
                            }
                            for mems in itertools.product(grid, repeat=stages):
                                figs = [
                                    table[(a, b, mem)]
                                    for (a, b), mem in zip(bounds, mems, strict=True)
                                ]
                                if any(
                                    need > mem for (_, _, need), mem in zip(figs, mems, strict=True)
                                ):
                                    continue
                                f = run_figures(
                                    p, cat, shape, max(x[0] for x in figs),
                                    max(x[1] for x in figs), sum(mems),
                                )  # fmt: skip
                                if meets(deadline, budget, f) and better(deadline, f, best):
                                    best = f
    return best


def _equal_to_brute_force(
    p: WorkloadProfile, cat: Catalog, deadline: float | None, budget: float | None
) -> PipelineCandidate | None:
    """The search's plan, asserted to price as brute force's best (both None, or equal)."""
    want = brute_force(p, cat, LIMITS, deadline, budget)
    got = search_pipeline(p, cat, LIMITS, deadline, budget)
    if want is None:
        assert got is None
        return None
    assert got is not None
    assert math.isclose(got.figures.total_usd, want.total_usd, rel_tol=1e-12)
    assert math.isclose(got.figures.total_s, want.total_s, rel_tol=1e-12)
    return got


block = st.tuples(
    st.integers(1, 3_000_000),  # parameters
    st.integers(100, 400_000),  # output per sample
    st.integers(0, 2_000_000),  # activations per sample
    st.floats(50.0, 2000.0),  # rate at one vCPU
)


@settings(max_examples=10, deadline=None)
@given(
    blocks=st.lists(block, min_size=3, max_size=4),
    deadline_s=st.floats(200.0, 20_000.0),
    budget=st.booleans(),
)
def test_search_equals_brute_force(
    blocks: list[tuple[int, int, int, float]], deadline_s: float, budget: bool
) -> None:
    docs = [block_dict(f"{i}:B", *b) for i, b in enumerate(blocks)]
    p = blocks_profile(
        docs, dataset_samples=2000, epochs=1, profiled_local_batch=8, max_global_batch=32
    )
    cat = catalog()
    goal = (None, 0.5) if budget else (deadline_s, None)
    got = _equal_to_brute_force(p, cat, *goal)
    if got is None:
        return
    # the best-first bounds keep a plan equal to the ceiling, and drop every plan above it
    bar = got.figures.total_s if budget else got.figures.total_usd
    at_bar = search_pipeline(p, cat, LIMITS, *goal, ceiling=bar)
    assert at_bar is not None and at_bar.figures == got.figures and at_bar.stages == got.stages
    assert search_pipeline(p, cat, LIMITS, *goal, ceiling=bar * (1 - 1e-6)) is None


def test_the_cut_it_reports_prices_as_found() -> None:
    docs = [block_dict(f"{i}:B", 1_000_000, 50_000, 400_000, 300.0) for i in range(4)]
    p = blocks_profile(docs, dataset_samples=2000, epochs=1, profiled_local_batch=8)
    cat = catalog()
    got = search_pipeline(p, cat, LIMITS, 20_000.0, None)
    assert got is not None
    stages = got.stages
    assert stages[0].first == 0 and stages[-1].stop == 4
    assert all(x.stop == y.first for x, y in zip(stages, stages[1:], strict=False))
    assert all(s.memory_mb >= s.need_mb for s in stages)
    slot = max(s.slot_s for s in stages)
    assert math.isclose(
        got.figures.iteration_s,
        (got.micro_batches + len(stages) - 1) * slot + max(s.sync_s for s in stages),
    )


@settings(max_examples=20, deadline=None)
@given(params=st.lists(st.integers(0, 4_000_000_000), min_size=1, max_size=5), r=st.integers(1, 16))
def test_stage_syncs_equal_stage_sync_bit_for_bit(params: list[int], r: int) -> None:
    blocks = [block_dict(f"{i}:B", 1000, 100, 100, 100.0) for i in range(2)]
    p = blocks_profile(blocks, dataset_samples=2000, epochs=1, profiled_local_batch=8)
    cat = catalog()
    grid = pipeline_memory_grid(cat, LIMITS)
    routes = sync_routes(cat, LIMITS, r, "x86_64") + sync_routes(cat, LIMITS, r, "arm64")
    assert {x.sync for x in routes} == {"ps", "s3"}
    for route in routes:
        got = stage_syncs_s(p, cat, route, np.array(params), r, grid)
        for row, size in zip(got, params, strict=True):
            assert np.array_equal(row, stage_sync_s(p, cat, route, size, r, grid))


@settings(max_examples=8, deadline=None)
@given(blocks=st.lists(block, min_size=3, max_size=4), deadline_s=st.floats(200.0, 20_000.0))
def test_search_equals_brute_force_on_shared_cores(
    blocks: list[tuple[int, int, int, float]], deadline_s: float
) -> None:
    """The local machine's stage corrections (pipeline_local.py: shared start-up, the CPU floor
    of S·r workers on C cores, the boundary requests' CPU, a PS sync's loopback floor at the
    stage's share) keep the bounds below every plan."""
    docs = [block_dict(f"{i}:B", *b) for i, b in enumerate(blocks)]
    p = blocks_profile(
        docs, dataset_samples=2000, epochs=1, profiled_local_batch=8, max_global_batch=32
    )
    # a loop overhead above the PS terms at small shares, so the sync floor picks memories
    p = dataclasses.replace(p, loop_overhead=((0.25, 0.02), (0.5, 0.006), (1.0, 0.001)))
    cat = dataclasses.replace(
        catalog(), total_vcpu=2.0, s3_request_cpu_s=0.004, s3_server_cpu_s=0.002
    )
    _equal_to_brute_force(p, cat, deadline_s, None)
