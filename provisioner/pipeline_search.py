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

Why it is fast. Best first: each (r, arch, route, M, S) gets a floor on the goal's figure that
no cut or memory of it can beat (pipeline_bounds), and they are searched cheapest floor first
until the next floor is above the best plan found (each later floor is no lower); a searched
one is bounded again with its route's sync tables before its labels' programme runs, and its
partial labels by pipeline_bounds.keeper. Floors keep ties (a plan equal to the bar is never
dropped), and among plans equal on the goal's figures the first in the enumeration order
(r, arch, route, M, S, label) wins: the plan is the one a plain enumeration would choose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from provisioner.catalog import Catalog
from provisioner.pipeline_bounds import (
    FLOOR_RTOL,
    cut_floor,
    keeper,
    other_usd_floor,
    ps_usd_floor,
)
from provisioner.pipeline_model import RunFigures, RunShape, SyncRoute, run_figures, stage_syncs_s
from provisioner.pipeline_tables import (
    RangeTables,
    StageTables,
    block_ranges,
    cut_floors,
    inverse_rates,
    range_floors,
    range_options,
    range_sizes,
    stage_labels,
    stage_tables,
)
from provisioner.profile import WorkloadProfile
from provisioner.space import FIRST_PASS_REDUCERS, Limits, concurrency_cap, dominated_ps_types
from provisioner.terms import Arr, iterations, local_batch

# The space's caps, stated: more stages or replicas than these are not searched (the 38-block
# GPT-2-large shape already takes over a second at these caps; docs/pipeline.md, "Solve time",
# measures what lifting them costs).
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


@dataclass(frozen=True)
class Combo:
    """One (r, arch, route, M, S) of the space, with its route-independent floor: `order` is
    its place in the enumeration (r, arch, route, M, S), the tie-break among equal plans."""

    floor: float
    order: tuple[int, int, int, int, int]
    b_l: int
    k: int
    arch: str
    route: SyncRoute
    m: int
    lambda_usd: float  # the floor's Lambda part
    it_s: float  # the least iteration over every cut and memory
    slot_s: float  # the least slowest slot over every cut and memory
    sync_s: float  # the least slowest sync over every cut and memory


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

    Best first: every (r, arch, route, M, S) gets a floor on the goal's figure that holds for
    every cut and memory (_combos); they are searched cheapest floor first, and the search
    stops at the first floor above the best plan so far (every later one is no lower). Each
    searched one is bounded again with its route's sync (range_floors), and its labels by
    pipeline_bounds.keeper. Among plans equal on the goal's figures the first in the
    enumeration order (r, arch, route, M, S, label) wins, as in a plain enumeration.
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
    """search_pipeline over one memory grid."""
    archs = [
        a.arch for a in catalog.architectures
        if profile.rate(a.arch) is not None and limits.arch in ("any", "mixed", a.arch)
    ]  # fmt: skip
    count = len(profile.blocks)
    inv = {arch: inverse_rates(profile, catalog, grid, arch) for arch in archs}
    stage_cache: dict[tuple[str, int, int], StageTables] = {}

    def stage_of(arch: str, m: int, b_l: int) -> StageTables:
        key = (arch, m, b_l)
        if key not in stage_cache:
            stage_cache[key] = stage_tables(profile, catalog, grid, inv[arch], m, b_l)
        return stage_cache[key]

    # a range's sync depends on its parameter bytes alone: computed once per distinct size
    sizes, which = range_sizes(profile)
    by_size: dict[tuple[int, SyncRoute], Arr] = {}
    syncs_cache: dict[tuple[int, SyncRoute], Arr] = {}

    def sizes_of(r: int, route: SyncRoute) -> Arr:
        if (r, route) not in by_size:
            by_size[(r, route)] = stage_syncs_s(profile, catalog, route, sizes, r, grid)
        return by_size[(r, route)]

    def syncs_of(r: int, route: SyncRoute) -> Arr:
        if (r, route) not in syncs_cache:
            syncs_cache[(r, route)] = sizes_of(r, route)[which]
        return syncs_cache[(r, route)]

    sync_floors: dict[tuple[int, SyncRoute], list[Arr]] = {}
    first, stop = block_ranges(count)

    def sync_floor(r: int, route: SyncRoute, stages: int) -> float:
        """The least slowest sync over every cut into `stages` and every memory."""
        if (r, route) not in sync_floors:
            least = sizes_of(r, route).min(axis=1)[which]
            sync_floors[(r, route)] = cut_floors(least, first, stop, count, max_stages, add=False)
        return float(sync_floors[(r, route)][stages][0])

    combos = _combos(
        profile, catalog, limits, deadline_s, budget_usd, max_stages, archs, stage_of, sync_floor
    )
    tables_cache: dict[tuple[int, str, SyncRoute, int], RangeTables] = {}
    best: PipelineCandidate | None = None
    best_key: tuple[float, float, tuple[int, int, int, int, int], int] = (0.0, 0.0, (0,) * 5, 0)
    for c in combos:
        bar = _bar(ceiling, best, deadline_s)
        if c.floor * (1.0 - FLOOR_RTOL) > bar:
            break  # sorted: no later combination's floor is lower
        r, stages, slots = c.order[0], c.order[4], c.m + c.order[4] - 1
        stage = stage_of(c.arch, c.m, c.b_l)
        price = catalog.arch(c.arch).usd_per_gb_s
        ps_price = catalog.ps_type(c.route.ps_type).usd_per_hour if c.route.ps_type else 0.0
        shape = RunShape(stages, r, c.m, c.k, price, c.route, ps_price)
        # the route's other items at the floor's time, before the route's sync tables
        others = other_usd_floor(profile, catalog, shape, c.k * c.it_s)
        if deadline_s is not None and (c.lambda_usd + others) * (1.0 - FLOOR_RTOL) > bar:
            continue
        if budget_usd is not None and (c.lambda_usd + others) * (1.0 - FLOOR_RTOL) > budget_usd:
            continue
        syncs = syncs_of(r, c.route)
        secs = range_floors(stage, syncs, slots, 0.0)[1]
        rest_s = cut_floors(secs, stage.first, stage.stop, count, stages, add=False)
        it_floor = max(float(rest_s[stages][0]), c.it_s)  # no cut iterates faster
        floor_s = c.k * it_floor * (1.0 - FLOOR_RTOL)
        if floor_s > (deadline_s if deadline_s is not None else bar):
            continue
        mb_s = range_floors(stage, syncs, slots, it_floor, c.slot_s, c.sync_s)[0]
        rest_mb_s = cut_floors(mb_s, stage.first, stage.stop, count, stages, add=True)
        others = other_usd_floor(profile, catalog, shape, c.k * it_floor)
        usd = (price * r * c.k / 1024.0 * float(rest_mb_s[stages][0]) + others) * (1.0 - FLOOR_RTOL)
        if (budget_usd is not None and usd > budget_usd) or (deadline_s is not None and usd > bar):
            continue
        tkey = (r, c.arch, c.route, c.m)
        if tkey not in tables_cache:
            tables_cache[tkey] = range_options(stage, syncs)
        tables = tables_cache[tkey]
        rest_mem = cut_floors(tables.least_mb, stage.first, stage.stop, count, stages, add=True)
        rest = [(rest_mem[x].tolist(), rest_mb_s[x].tolist(), rest_s[x].tolist())
                for x in range(stages)]  # fmt: skip
        keep = keeper(deadline_s, budget_usd, bar - others, c.k, r, price, slots)
        for li, (slot, sync, mem, path) in enumerate(
            stage_labels(tables, count, stages, keep, rest)
        ):
            f = run_figures(profile, catalog, shape, slot, sync, mem)
            if not meets(deadline_s, budget_usd, f) or (
                (f.total_usd if deadline_s is not None else f.total_s) > ceiling
            ):
                continue
            goal = (f.total_usd, f.total_s) if deadline_s is not None else (f.total_s, f.total_usd)
            key = (*goal, c.order, li)
            if best is None or key < best_key:
                chosen = tuple(
                    StageChoice(a, b, *_stage(tables.options(a, b)[oi])) for a, b, oi in path
                )
                best = PipelineCandidate(c.arch, c.route, r, c.m, c.b_l, chosen, f)
                best_key = key
    return best


def _combos(
    profile: WorkloadProfile,
    catalog: Catalog,
    limits: Limits,
    deadline_s: float | None,
    budget_usd: float | None,
    max_stages: int,
    archs: list[str],
    stage_of: Callable[[str, int, int], StageTables],
    sync_floor: Callable[[int, SyncRoute, int], float],
) -> list[Combo]:
    """Every (r, arch, route, M, S) of the space that can meet the goal, cheapest floor first
    (ties: enumeration order). The floors hold for every cut and memory. Time: k iterations at
    least, the iteration (M + S − 1)·(slowest slot) + (slowest sync), each slowest at least its
    least over the cuts (the slot's without sync, cut_floor; the sync's at any memory,
    `sync_floor`). Cost: Lambda compute is p·r·Σ_s m_s/1024·billed, billed ≥ k·iteration
    (start-up, load and chaining only add), so at least p·r·k/1024 × (the least Σ_s
    m_s·(M + S − 1)·max(slot_s, slot floor) + the least Σ_s m_s × the sync floor); the PS
    shards at least their price over the time floor (ps_usd_floor); every other item ≥ 0. A
    deadline orders by the cost floor and drops a time floor past the deadline; a budget alone
    orders by the time floor and drops a cost floor past the budget."""
    count = len(profile.blocks)
    cap = concurrency_cap(catalog, limits)
    r_max = min(cap // 2, profile.max_global_batch, MAX_REPLICAS)
    combos: list[Combo] = []
    for r in range(1, r_max + 1):
        b_l = int(local_batch(np.array([r]), profile.profiled_local_batch,
                              profile.max_global_batch)[0])  # fmt: skip
        if b_l < 1:
            continue
        k = int(iterations(profile.dataset_samples, profile.epochs, np.array([r * b_l]))[0])
        for ai, arch in enumerate(archs):
            price = catalog.arch(arch).usd_per_gb_s
            routes = sync_routes(catalog, limits, r, arch)
            for mi, m in enumerate(divisors(b_l)):
                stage = stage_of(arch, m, b_l)
                for stages in range(2, min(count, max_stages, cap // r) + 1):
                    slots = m + stages - 1
                    mb_s, it_s = cut_floor(stage, count, stages, slots)
                    slot_s = it_s / slots  # the least slowest slot over the cuts
                    least_mb = float(
                        cut_floors(
                            stage.least_mb, stage.first, stage.stop, count, stages, add=True
                        )[stages][0]
                    )
                    if not math.isfinite(mb_s):
                        continue  # no cut fits
                    for ri, route in enumerate(routes):
                        # iteration = slots·max slot + max sync ≥ the least of each over the
                        # cuts; Σ_s m_s·iteration ≥ Σ_s m_s·(slots·max(slot_s, the slot
                        # floor) + the sync floor) ≥ the least of its first part (mb_s) + the
                        # least Σ memory × the sync floor (a sum's least ≥ its parts' least)
                        sync_s = sync_floor(r, route, stages)
                        it = slots * slot_s + sync_s
                        time_s = k * it * (1.0 - FLOOR_RTOL)
                        if deadline_s is not None and time_s > deadline_s:
                            continue
                        lam = price * r * k / 1024.0 * (mb_s + least_mb * sync_s)
                        # a route's PS shards run the whole job: at least its time floor
                        usd = (lam + ps_usd_floor(catalog, route, stages, k * it)) * (
                            1.0 - FLOOR_RTOL
                        )
                        if budget_usd is not None and usd > budget_usd:
                            continue
                        floor = usd if deadline_s is not None else time_s
                        order = (r, ai, ri, mi, stages)
                        combos.append(
                            Combo(floor, order, b_l, k, arch, route, m, lam, it, slot_s, sync_s)
                        )
    combos.sort(key=lambda c: (c.floor, c.order))
    return combos


def _bar(ceiling: float, best: PipelineCandidate | None, deadline_s: float | None) -> float:
    """What a plan must not exceed to matter: the goal's figure (cost under a deadline, time
    for a budget alone) of the best so far, or the ceiling."""
    if best is None:
        return ceiling
    return min(ceiling, best.figures.total_usd if deadline_s is not None else best.figures.total_s)


def _stage(
    option: tuple[float, float, int, float, float, int],
) -> tuple[int, float, float, float, float, int]:
    slot, sync, mem, comp, bnd, need = option
    return (mem, slot, sync, comp, bnd, need)
