"""The exact search for the best pipelined plan (S ≥ 2 stages).

Search space: S = 2 … min(blocks, MAX_STAGES); every cut of the blocks into S contiguous
stages; each stage's memory on the pipeline grid (the catalog's grid at PIPELINE_STEP_MB, up to
the limit); r = 1 … min(⌊concurrency / S⌋, MAX_REPLICAS) replicas (r ≤ b_g^max as today);
M ∈ the divisors of the local batch; every architecture; PS types × 1 … max shards per stage,
or S3 with k = 1 … min(r, FIRST_PASS_REDUCERS) reducers per stage. S = 1 is today's planner,
unchanged.

Why it is exact. For fixed (arch, sync route, r, M, S) a plan's time and every cost item are
non-decreasing in three figures of its stages: the slowest slot, the slowest sync and the sum of
the stages' memories (pipeline_model.run_figures; the figures that could depend on a stage in
another way are priced at bounds that do not). So only plans whose (max slot, max sync, Σ m)
no other plan beats in all three can be optimal. A dynamic programme over the blocks keeps, for
every (stages so far, blocks covered), exactly those label triples (a label another label
matches or beats in all three can be dropped: any completion of it is matched or beaten by the
same completion of the other); at the end each surviving label is priced and the goal's best
kept. Per stage, memories whose (slot, sync) a smaller memory reaches are dropped (stage cost
grows with memory, time is a max). test_pipeline_search.py holds it equal to enumeration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from provisioner.catalog import Catalog
from provisioner.pipeline_model import RunFigures, RunShape, SyncRoute, run_figures
from provisioner.pipeline_tables import (
    RangeTables,
    inverse_rates,
    range_options,
    range_syncs,
    stage_labels,
)
from provisioner.profile import WorkloadProfile
from provisioner.space import FIRST_PASS_REDUCERS, Limits, concurrency_cap, dominated_ps_types
from provisioner.terms import Arr, iterations, local_batch

# The space's caps, stated: more stages or replicas than these are not searched (the exact
# search is not yet fast enough for the full space; docs/pipeline.md, "Solve time").
MAX_STAGES = 4
MAX_REPLICAS = 16
PIPELINE_STEP_MB = 128


@dataclass(frozen=True)
class StageChoice:
    """One stage of a candidate: blocks [first, stop) at `memory_mb`."""

    first: int
    stop: int
    memory_mb: int
    slot_s: float
    sync_s: float
    compute_s: float
    boundary_s: float
    need_mb: int


@dataclass(frozen=True)
class PipelineCandidate:
    """A pipelined configuration and its predicted figures."""

    arch: str
    route: SyncRoute
    replicas: int
    micro_batches: int
    local_batch: int
    stages: tuple[StageChoice, ...]
    figures: RunFigures


def pipeline_memory_grid(catalog: Catalog, limits: Limits) -> np.ndarray:
    """Stage memories: the catalog's grid every PIPELINE_STEP_MB (and its top), up to the limit."""
    top = catalog.memory_max_mb
    if limits.max_memory_mb is not None:
        top = min(top, limits.max_memory_mb)
    grid = [m for m in catalog.memory_grid_mb if m <= top and (m % PIPELINE_STEP_MB == 0)]
    if top in catalog.memory_grid_mb and top not in grid:
        grid.append(top)
    return np.array(sorted(grid), dtype=np.int64)


def sync_routes(catalog: Catalog, limits: Limits, replicas: int, arch: str) -> list[SyncRoute]:
    """The stage sync routes the limits allow at r replicas: PS types of the workers'
    architecture (any, with arch "mixed") less those another beats on bandwidth and price
    (space.dominated_ps_types), × 1 … max shards; S3 with k = 1 … min(r, FIRST_PASS_REDUCERS)."""
    routes: list[SyncRoute] = []
    if limits.sync in ("ps", "auto"):
        types = tuple(
            p for p in catalog.ps_types
            if (limits.ps_types is None or p.name in limits.ps_types)
            and (limits.arch == "mixed" or p.arch == arch)
        )  # fmt: skip
        drop = dominated_ps_types(types)
        for ps in types:
            if ps.name not in drop:
                routes += [SyncRoute("ps", ps.name, c) for c in range(1, catalog.ps_max_shards + 1)]
    if limits.sync in ("s3", "auto"):
        top = min(replicas, FIRST_PASS_REDUCERS)
        routes += [SyncRoute("s3", reducers=k) for k in range(1, top + 1)]
    return routes


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def better(goal_deadline_s: float | None, a: RunFigures, b: RunFigures | None) -> bool:
    """Whether `a` beats `b` for the goal: cheaper (ties: faster) under a deadline, else
    faster (ties: cheaper) within a budget."""
    if b is None:
        return True
    if goal_deadline_s is not None:
        return (a.total_usd, a.total_s) < (b.total_usd, b.total_s)
    return (a.total_s, a.total_usd) < (b.total_s, b.total_usd)


def meets(deadline_s: float | None, budget_usd: float | None, f: RunFigures) -> bool:
    ok = np.isfinite(f.total_s)
    if deadline_s is not None:
        ok = ok and f.total_s <= deadline_s
    if budget_usd is not None:
        ok = ok and f.total_usd <= budget_usd
    return bool(ok)


def compute_cost_floor(grid: np.ndarray, inv_rate: Arr) -> float:
    """Σ_b min_m m·(1/R_b(m)) in MB·s per sample: no stage computes a sample for less (a sum's
    minimum is at least the sum of its parts' minima), whatever the cut and memories."""
    per_block = np.diff(inv_rate, axis=0) * grid[np.newaxis, :]
    return float(np.sum(np.min(per_block, axis=1)))


def search_pipeline(
    profile: WorkloadProfile,
    catalog: Catalog,
    limits: Limits,
    deadline_s: float | None,
    budget_usd: float | None,
    *,
    max_stages: int = MAX_STAGES,
    ceiling: float = math.inf,
) -> PipelineCandidate | None:
    """The goal's best pipelined plan (S ≥ 2) over the module's space; None if none meets it.
    `ceiling` (US dollars under a deadline, seconds for a budget alone) is a figure the plan
    must not exceed to matter, e.g. the one-stage plan's: it bounds the search from the start.

    Prunings, each a bound no pruned plan can beat (docs/pipeline.md): per (r, M, S) the
    Lambda compute floor against the bar, per label its iterations against the deadline and
    its stages' compute over them, with the least memory the rest needs, against the bar.
    """
    if len(profile.blocks) < 2:
        return None
    return _search(profile, catalog, limits, deadline_s, budget_usd, max_stages,
                   pipeline_memory_grid(catalog, limits), ceiling)  # fmt: skip


def _search(
    profile: WorkloadProfile,
    catalog: Catalog,
    limits: Limits,
    deadline_s: float | None,
    budget_usd: float | None,
    max_stages: int,
    grid: np.ndarray,
    ceiling: float,
) -> PipelineCandidate | None:
    """search_pipeline over one memory grid, starting from the incumbent `best`."""
    archs = [
        a.arch for a in catalog.architectures
        if profile.rate(a.arch) is not None and limits.arch in ("any", "mixed", a.arch)
    ]  # fmt: skip
    count = len(profile.blocks)
    top_stages = min(count, max_stages)
    cap = concurrency_cap(catalog, limits)
    r_max = min(cap // 2, profile.max_global_batch, MAX_REPLICAS)
    inv = {arch: inverse_rates(profile, catalog, grid, arch) for arch in archs}
    best: PipelineCandidate | None = None
    for r in range(1, r_max + 1):
        b_l = int(local_batch(np.array([r]), profile.profiled_local_batch,
                              profile.max_global_batch)[0])  # fmt: skip
        if b_l < 1:
            continue
        k = int(iterations(profile.dataset_samples, profile.epochs, np.array([r * b_l]))[0])
        for arch in archs:
            price = catalog.arch(arch).usd_per_gb_s
            floor = compute_cost_floor(grid, inv[arch]) * price / 1024.0
            slowest = float(np.max(np.diff(inv[arch], axis=0)[:, -1]))
            for route in sync_routes(catalog, limits, r, arch):
                syncs: Arr | None = None
                ps_price = catalog.ps_type(route.ps_type).usd_per_hour if route.ps_type else 0.0
                for m in divisors(b_l):
                    micro = b_l // m
                    tables: RangeTables | None = None
                    for stages in range(2, min(top_stages, cap // r) + 1):
                        slots = k * (m + stages - 1) * micro
                        if deadline_s is not None and slots * slowest > deadline_s:
                            continue
                        if deadline_s is not None and r * slots * floor > _bar(
                            ceiling, best, deadline_s
                        ):
                            continue
                        if syncs is None:
                            syncs = range_syncs(profile, catalog, grid, route, r)
                        if tables is None:
                            tables = range_options(profile, catalog, grid, inv[arch], syncs, m, b_l)
                        shape = RunShape(stages, r, m, k, price, route, ps_price)
                        bar = _bar(ceiling, best, deadline_s)
                        keep = _keeper(deadline_s, budget_usd, bar, k, r, price, m + stages - 1)
                        for slot, sync, mem, path in stage_labels(tables, count, stages, keep):
                            f = run_figures(profile, catalog, shape, slot, sync, mem)
                            if not meets(deadline_s, budget_usd, f) or (
                                (f.total_usd if deadline_s is not None else f.total_s) > ceiling
                            ):
                                continue
                            if best is None or better(deadline_s, f, best.figures):
                                chosen = tuple(
                                    StageChoice(a, b, *_stage(tables.options(a, b)[oi]))
                                    for a, b, oi in path
                                )
                                best = PipelineCandidate(arch, route, r, m, b_l, chosen, f)
    return best


def _bar(ceiling: float, best: PipelineCandidate | None, deadline_s: float | None) -> float:
    """What a plan must not exceed to matter: the goal's figure (cost under a deadline, time
    for a budget alone) of the best so far, or the ceiling."""
    if best is None:
        return ceiling
    return min(ceiling, best.figures.total_usd if deadline_s is not None else best.figures.total_s)


def _keeper(
    deadline_s: float | None,
    budget_usd: float | None,
    bar: float,
    k: int,
    r: int,
    price: float,
    slots: int,
) -> Callable[[float, float, float], bool]:
    """The bound a (partial) label must meet: its k iterations alone within the deadline (or,
    for a budget, within the bar on time), its stages' Lambda compute over those iterations
    (billed time is at least the iterations) within the bar on cost (or the budget)."""

    def keep(slot: float, sync: float, mem: float) -> bool:
        floor_s = k * (slots * slot + sync)
        usd = price * r * mem / 1024.0 * floor_s
        if deadline_s is not None:
            if floor_s > deadline_s or usd > bar:
                return False
        elif floor_s > bar:
            return False
        return budget_usd is None or usd <= budget_usd

    return keep


def _stage(
    option: tuple[float, float, int, float, float, int],
) -> tuple[int, float, float, float, float, int]:
    slot, sync, mem, comp, bnd, need = option
    return (mem, slot, sync, comp, bnd, need)
