"""The exact search for the best pipelined plan (S ≥ 2 stages).

Search space: S = 2 … min(blocks, MAX_STAGES); every cut of the blocks into S contiguous
stages; each stage's memory on the pipeline grid (the catalog's grid at PIPELINE_STEP_MB, up to
the limit); r = 1 … ⌊concurrency / S⌋ replicas (n ≤ b_g^max as today); M ∈ the divisors of the
local batch; every architecture; PS types × 1 … max shards per stage, or S3 with k = 1 …
min(r, FIRST_PASS_REDUCERS) reducers per stage. S = 1 is today's planner, unchanged.

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
from provisioner.pipeline_model import (
    RunFigures,
    RunShape,
    SyncRoute,
    boundary_transfer_s,
    run_figures,
    stage_compute_per_micro_s,
    stage_memory_needed_mb,
    stage_sync_s,
)
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.space import FIRST_PASS_REDUCERS, Limits, concurrency_cap, dominated_ps_types
from provisioner.terms import Arr, iterations, local_batch

MAX_STAGES = 8
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


Option = tuple[float, float, int, float, float, int]


@dataclass(frozen=True)
class _Tables:
    """Every block range's (row: range_index) options as arrays over memory; a range's list of
    (slot, sync, memory, compute, boundary, need) is built when the search first asks for it
    (the bounds leave many ranges unasked)."""

    rows: dict[tuple[int, int], int]
    arrays: tuple[Arr, Arr, Arr, Arr]  # slot, sync, compute, boundary: (ranges, memories)
    keep: Arr  # (ranges, memories): the useful memories of each range
    need: Arr  # (ranges,)
    least_mb: Arr  # (ranges,) the smallest memory that fits, inf where none does
    grid: Arr
    built: dict[tuple[int, int], list[Option]]

    def options(self, a: int, b: int) -> list[Option]:
        found = self.built.get((a, b))
        if found is None:
            i = self.rows[(a, b)]
            js = np.nonzero(self.keep[i])[0]
            cols = [x[i, js].tolist() for x in self.arrays]
            need = int(self.need[i])
            found = [
                (sl, sy, m, co, bo, need)
                for sl, sy, m, co, bo in zip(
                    cols[0], cols[1], self.grid[js].tolist(), cols[2], cols[3], strict=True
                )  # fmt: skip
            ]
            self.built[(a, b)] = found
        return found


def inverse_rates(profile: WorkloadProfile, catalog: Catalog, grid: np.ndarray, arch: str) -> Arr:
    """(blocks + 1, J) prefix sums over the blocks of 1 / R_b(share(m)): a range's compute per
    sample at every memory is the difference of two rows (stage_compute_per_micro_s's sum)."""
    share = vcpu_share(grid, catalog.mb_per_vcpu, catalog.max_vcpu)
    rows = [stage_compute_per_micro_s((b,), arch, 1, share, grid) for b in profile.blocks]
    return np.vstack([np.zeros(grid.size), np.cumsum(np.array(rows), axis=0)])


def block_ranges(count: int) -> tuple[Arr, Arr]:
    """(first, stop) of every block range [a, b), a < b ≤ count, in one fixed order."""
    pairs = [(a, b) for a in range(count) for b in range(a + 1, count + 1)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def range_syncs(
    profile: WorkloadProfile,
    catalog: Catalog,
    grid: np.ndarray,
    route: SyncRoute,
    replicas: int,
) -> Arr:
    """(ranges, J): every stage range's sync per iteration at every memory (stage_sync_s)."""
    first, stop = block_ranges(len(profile.blocks))
    params = np.concatenate([[0], np.cumsum([b.parameter_bytes for b in profile.blocks])])
    memo: dict[int, Arr] = {}
    rows = []
    for p in (params[stop] - params[first]).tolist():
        if p not in memo:
            memo[p] = stage_sync_s(profile, catalog, route, int(p), replicas, grid)
        rows.append(memo[p])
    return np.array(rows)


def range_options(
    profile: WorkloadProfile,
    catalog: Catalog,
    grid: np.ndarray,
    inv_rate: Arr,
    syncs: Arr,
    micro_batches: int,
    b_l: int,
) -> _Tables:
    """Every stage range's memory options at once; a memory is dropped where the next smaller
    one is no worse in slot and in sync (it reaches the same pair for less)."""
    blocks = profile.blocks
    count = len(blocks)
    micro = b_l // micro_batches
    first, stop = block_ranges(count)
    params = np.concatenate([[0], np.cumsum([b.parameter_bytes for b in blocks])])
    acts = np.concatenate([[0], np.cumsum([b.activation_bytes_per_sample for b in blocks])])
    # stage 0's input is the dataset sample, read with the shard: it crosses no boundary; the
    # last stage hands nothing on
    outs = [b.output_bytes_per_sample for b in blocks]
    in_sample = np.array([0, *outs[:-1]])[first]
    out_sample = np.array([*outs[:-1], 0, 0])[stop - 1]
    side_in = np.array([boundary_transfer_s(catalog, micro * x, 0.0, grid) for x in
                        [0, *outs[:-1]]])  # fmt: skip
    side_out = np.array([boundary_transfer_s(catalog, 0.0, micro * x, grid) for x in
                         [*outs[:-1], 0]])  # fmt: skip
    need = stage_memory_needed_mb(
        profile.runtime_memory_mb or 0, params[stop] - params[first], acts[stop] - acts[first],
        in_sample + out_sample, b_l, micro,
    )  # fmt: skip
    comp = micro * (inv_rate[stop] - inv_rate[first])
    bnd = side_in[first] + side_out[stop - 1]
    slot = comp + bnd
    valid = grid[np.newaxis, :] >= need[:, np.newaxis]
    keep = valid.copy()
    better = (slot[:, 1:] < slot[:, :-1]) | (syncs[:, 1:] < syncs[:, :-1])
    keep[:, 1:] &= better | ~valid[:, :-1]  # the first memory that fits is always an option
    fits = valid.any(axis=1)
    least = np.where(fits, grid[np.argmax(valid, axis=1)], np.inf)
    rows = {(a, b): i for i, (a, b) in enumerate(zip(first.tolist(), stop.tolist(), strict=True))}
    return _Tables(rows, (slot, syncs, comp, bnd), keep, need, least, grid, {})


Label = tuple[float, float, int, tuple[tuple[int, int, int], ...]]


def _pareto(labels: list[Label]) -> list[Label]:
    """The labels no other label matches or beats in (max slot, max sync, Σ memory)."""
    labels.sort(key=lambda x: (x[0], x[1], x[2]))
    out: list[Label] = []
    for lab in labels:
        if any(o[1] <= lab[1] and o[2] <= lab[2] for o in out):
            continue  # o's slot ≤ lab's too (sorted): lab is matched or beaten
        out.append(lab)
    return out


def least_memory_rest(tables: _Tables, count: int, stages: int) -> list[list[float]]:
    """rest[ℓ][b]: the least Σ memory of blocks [b, count) cut into ℓ stages, each at its
    smallest memory that fits (inf where none): a floor on what a partial label still adds."""
    least = np.full((count + 1, count + 1), np.inf)  # least[b, c]: range [b, c) alone
    for (a, c), i in tables.rows.items():
        least[a, c] = tables.least_mb[i]
    rest = np.full(count + 1, np.inf)
    rest[count] = 0.0
    out = [rest.tolist()]
    for _ in range(stages):
        rest = np.min(least + rest[np.newaxis, :], axis=1)
        out.append(rest.tolist())
    return out


def stage_labels(
    tables: _Tables, count: int, stages: int, keep: Callable[[float, float, float], bool]
) -> list[Label]:
    """The Pareto labels of every cut of `count` blocks into `stages` stages with one memory
    option each; a label's last member lists its stages as (first, stop, option index).
    `keep(max slot, max sync, Σ memory)` drops a partial label that cannot lead to a better
    plan: the three figures only grow as stages are added, so a bound on them holds for every
    completion."""
    rest = least_memory_rest(tables, count, stages)
    layer: dict[int, list[Label]] = {0: [(0.0, 0.0, 0, ())]}
    for s in range(stages):
        nxt: dict[int, list[Label]] = {}
        left = stages - s - 1  # each later stage needs a block
        for a, labels in layer.items():
            stops = [count] if left == 0 else range(a + 1, count - left + 1)
            for b in stops:
                out = nxt.setdefault(b, [])
                for oi, (slot, sync, mem, *_rest) in enumerate(tables.options(a, b)):
                    for ls, ly, lm, path in labels:
                        lab = (max(ls, slot), max(ly, sync), lm + mem)
                        if keep(lab[0], lab[1], lab[2] + rest[left][b]):
                            out.append((*lab, (*path, (a, b, oi))))
        layer = {b: _pareto(v) for b, v in nxt.items() if v}
    return layer.get(count, [])


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
    r_max = min(cap // 2, profile.max_global_batch)
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
                    tables: _Tables | None = None
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
