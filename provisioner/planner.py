"""The planner: exact search over (n, m, arch, PS type, PS shard count) under the model.

Search space: n = 1 … min(concurrency limit, b_g^max); m on the catalog's grid between the
profile's minimum and the limit; every architecture the catalog, the profile and the limits
allow; every PS type (minus those another type beats on bandwidth *and* price) × 1 … max shards.

Strategy (exact, vectorised over "routes" = arch × PS option, and n):
1. For a fixed route and n, the time T(m) is non-increasing in m (R(m) and B_s(m) are
   non-decreasing, so fewer chain links are needed), hence the cells meeting a deadline are a
   suffix of the memory grid; a vectorised binary search finds where each suffix starts.
2. Cost is *not* monotone in m. Each cost term grows with m, with the billed time and with the
   number of links, so evaluating those at the largest memory gives a lower bound that is
   linear in m. With the best cost c* found on the suffix starts, only memories whose bound is
   ≤ c* can hold the optimum: those windows are evaluated exhaustively.
Tie-breaks: cost, then time, then smaller n, smaller m, architecture order, PS option order.
The budget goal is symmetric (time lower bound at the memory the budget bound allows).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from provisioner.catalog import Catalog, PsType
from provisioner.model import (
    Arr,
    Axis,
    Cells,
    NTerms,
    costs,
    evaluate,
    n_terms,
    timeline,
    training_rate_samples_s,
    vcpu_share,
)
from provisioner.parse import format_duration_s, format_usd
from provisioner.plan import CostBreakdown, Goal, Plan, Prediction, TrainingSpec
from provisioner.profile import WorkloadProfile

ARCH_CHOICES = ("x86_64", "arm64", "any")
SLACK = 1e-9  # relative widening of bound windows so float rounding never drops the optimum
BLOCK_LEVELS = (1024, 128, 16)  # memory steps per bounded block, coarse to fine, in cost windows


_CELL_FIELDS = tuple(Cells.__dataclass_fields__)


class Infeasible(ValueError):  # noqa: N818 - the contract names it Infeasible
    """No configuration meets the goal under the limits; the message is one line."""


@dataclass(frozen=True)
class Limits:
    """The account's and the user's limits on the search space."""

    max_memory_mb: int | None = None
    max_concurrency: int | None = None
    arch: str = "any"
    ps_types: tuple[str, ...] | None = None
    reserve_concurrency: bool = False


@dataclass(frozen=True)
class FrontierPoint:
    """One Pareto-optimal (time, cost) configuration."""

    total_s: float
    total_usd: float
    n_workers: int
    memory_mb: int
    arch: str
    ps_type: str
    ps_count: int


@dataclass(frozen=True)
class Choice:
    """A cell of the search space."""

    n_workers: int
    memory_mb: int
    arch: str
    ps_type: str
    ps_count: int


@dataclass(frozen=True)
class PlanResult:
    """The chosen plan, the Pareto frontier and a few next-best alternatives."""

    plan: Plan
    frontier: tuple[FrontierPoint, ...] = ()
    alternatives: tuple[Plan, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "frontier": [asdict(p) for p in self.frontier],
            "alternatives": [a.to_dict() for a in self.alternatives],
        }

    def to_json(self) -> str:
        """The `cdk.out/plan.json` document; sorted keys: the same result gives the same bytes."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


# --- the search space ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Space:
    """The discrete search space as arrays; a route is one (arch, PS type, PS count)."""

    memory_mb: Arr  # (J,)
    n: Arr  # (N,)
    archs: tuple[str, ...]
    rate: Arr  # (A, J) R(m) per architecture
    usd_per_gb_s: Arr  # (A,)
    route_arch: Arr  # (R,) index into archs
    route_ps: tuple[tuple[str, int], ...]  # (R,) (ps type, count)
    route_shard_mb_s: Arr  # (R,)
    route_count: Arr  # (R,)
    route_usd_per_hour: Arr  # (R,)
    notes: tuple[str, ...] = field(default_factory=tuple)


def concurrency_cap(catalog: Catalog, limits: Limits) -> int:
    """Workers the account can run: the limit, minus the unreserved headroom if reserving."""
    cap = catalog.concurrency_limit
    if limits.max_concurrency is not None:
        cap = limits.max_concurrency
    if limits.reserve_concurrency:
        cap -= catalog.unreserved_concurrency_min
    return min(cap, 1000)


def dominated_ps_types(types: tuple[PsType, ...]) -> set[str]:
    """Types another type beats on baseline bandwidth and price (never better in the model).

    The model uses one core per shard and the baseline bandwidth, so a type with no more
    bandwidth at no lower price can only tie or lose; on exact equality the first name is kept.
    """
    out: set[str] = set()
    for b in types:
        for a in types:
            if a.name == b.name:
                continue
            no_worse = a.baseline_gbps >= b.baseline_gbps and a.usd_per_hour <= b.usd_per_hour
            equal = a.baseline_gbps == b.baseline_gbps and a.usd_per_hour == b.usd_per_hour
            if no_worse and (not equal or a.name < b.name):
                out.add(b.name)
                break
    return out


def validate_limits(catalog: Catalog, limits: Limits) -> None:
    """Reject limits that name nothing in the catalog, one line each."""
    if limits.arch not in ARCH_CHOICES:
        raise ValueError(f"arch {limits.arch!r} is not one of {', '.join(ARCH_CHOICES)}")
    if limits.max_memory_mb is not None and limits.max_memory_mb < catalog.memory_min_mb:
        raise ValueError(
            f"max memory {limits.max_memory_mb} MB is below the catalog minimum "
            f"({catalog.memory_min_mb}..{catalog.memory_max_mb} MB accepted)"
        )
    if limits.max_concurrency is not None and limits.max_concurrency < 1:
        raise ValueError(f"max concurrency {limits.max_concurrency} is not a positive integer")
    known = [p.name for p in catalog.ps_types]
    for name in limits.ps_types or ():
        if name not in known:
            raise ValueError(
                f"PS type {name!r} is not in catalog {catalog.name} (accepted: {', '.join(known)})"
            )


def build_space(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, *, prune: bool = True
) -> Space:
    """Enumerate the axes allowed by catalog, profile and limits; Infeasible if one is empty."""
    validate_limits(catalog, limits)
    top = catalog.memory_max_mb if limits.max_memory_mb is None else min(
        catalog.memory_max_mb, limits.max_memory_mb
    )
    mem = np.array([m for m in catalog.memory_grid_mb if profile.min_memory_mb <= m <= top])
    if mem.size == 0:
        raise Infeasible(
            f"no memory size fits: workload {profile.name} needs ≥ {profile.min_memory_mb} MB "
            f"but the limit allows at most {top} MB"
        )
    wanted = [a.arch for a in catalog.architectures]
    if limits.arch != "any":
        wanted = [a for a in wanted if a == limits.arch]
    archs = tuple(a for a in wanted if profile.rate(a) is not None)
    if not archs:
        raise Infeasible(
            f"no architecture fits: limit {limits.arch}, catalog {catalog.name} offers "
            f"{', '.join(a.arch for a in catalog.architectures)}, workload {profile.name} is "
            f"profiled on {', '.join(profile.architectures)}"
        )
    n_max = min(concurrency_cap(catalog, limits), profile.max_global_batch)
    if n_max < 1:
        raise Infeasible(f"no worker count fits: the concurrency limit leaves {n_max} workers")
    rate = np.stack([
        training_rate_samples_s(
            profile.rate(a),  # type: ignore[arg-type]  # archs only holds profiled ones
            vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu), mem,
        )
        for a in archs
    ])
    types = [p for p in catalog.ps_types if limits.ps_types is None or p.name in limits.ps_types]
    drop = dominated_ps_types(tuple(types)) if prune else set()
    kept = [p for p in types if p.name not in drop]
    routes = [(ai, p, c) for ai in range(len(archs)) for p in kept
              for c in range(1, catalog.ps_max_shards + 1)]
    notes = (f"PS types {', '.join(sorted(drop))} skipped: another type has ≥ baseline "
             f"bandwidth at ≤ price",) if drop else ()
    return Space(
        memory_mb=mem,
        n=np.arange(1, n_max + 1, dtype=np.int64),
        archs=archs,
        rate=rate,
        usd_per_gb_s=np.array([catalog.arch(a).usd_per_gb_s for a in archs]),
        route_arch=np.array([r[0] for r in routes], dtype=np.int64),
        route_ps=tuple((r[1].name, r[2]) for r in routes),
        route_shard_mb_s=np.array([r[1].baseline_mb_s for r in routes]),
        route_count=np.array([r[2] for r in routes], dtype=np.int64),
        route_usd_per_hour=np.array([r[1].usd_per_hour for r in routes]),
        notes=notes,
    )


def cells_at(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, ni: Arr, j: Arr
) -> Cells:
    """Evaluate the model at broadcastable route, n-index and memory-index arrays."""
    a = space.route_arch[r]
    return evaluate(profile, catalog, Axis(
        memory_mb=space.memory_mb[j],
        rate_samples_s=space.rate[a, j],
        usd_per_gb_s=space.usd_per_gb_s[a],
        n=space.n[ni],
        shard_mb_s=space.route_shard_mb_s[r],
        ps_count=space.route_count[r],
        ps_usd_per_hour=space.route_usd_per_hour[r],
    ))


# --- exact search --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """Evaluated candidate cells (flat arrays): route, n-index, memory-index, time, cost."""

    r: Arr
    ni: Arr
    j: Arr
    total_s: Arr
    total_usd: Arr

    @staticmethod
    def of(r: Arr, ni: Arr, j: Arr, cells: Cells) -> Pool:
        shape = np.broadcast(r, ni, j).shape

        def flat(x: Arr) -> Arr:
            return np.broadcast_to(x, shape).ravel()

        return Pool(r=flat(r), ni=flat(ni), j=flat(j), total_s=flat(cells.total_s),
                    total_usd=flat(cells.total_usd))

    @staticmethod
    def concat(pools: list[Pool]) -> Pool:
        return Pool(*(np.concatenate([getattr(p, f) for p in pools])
                      for f in ("r", "ni", "j", "total_s", "total_usd")))


def _order(pool: Pool, cost_first: bool) -> Arr:
    """Indices of the pool in goal order: (cost, time) or (time, cost), then n, m, route.

    np.lexsort treats its *last* key as the primary one, hence the reversed tuples.
    """
    keys = (pool.r, pool.j, pool.ni)
    primary = (pool.total_s, pool.total_usd) if cost_first else (pool.total_usd, pool.total_s)
    return np.lexsort((*keys, *primary))


def _grid(space: Space) -> tuple[Arr, Arr]:
    r = np.arange(len(space.route_ps))[:, None]
    ni = np.arange(space.n.size)[None, :]
    return r, ni


def _ragged(starts: Arr, stops: Arr) -> tuple[Arr, Arr]:
    """Flat (owner, index) pairs for the inclusive windows [start, stop] of every owner."""
    counts = np.maximum(stops - starts + 1, 0)
    owner = np.repeat(np.arange(starts.size), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, starts[owner] + offsets


def _cost_bound_slope(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, ni: Arr, j_top: Arr
) -> tuple[Arr, Arr]:
    """Cost lower bound A + B·m valid for every m ≤ memory[j_top] of a (route, n).

    Billed time, total time and links are non-increasing in m, so their values at j_top are
    lower bounds; the Lambda compute term is the only one with a factor m.
    """
    at_top = cells_at(profile, catalog, space, r, ni, j_top)
    m_top = space.memory_mb[j_top]
    slope = at_top.lambda_usd / m_top
    with np.errstate(invalid="ignore"):  # infeasible pairs: inf - inf
        return at_top.total_usd - at_top.lambda_usd, slope


@dataclass(frozen=True)
class Flat:
    """Every (route, n) pair of a space, flattened (id = route·N + n-index), n-terms included."""

    r: Arr
    ni: Arr
    nt: NTerms


def flatten(profile: WorkloadProfile, catalog: Catalog, space: Space) -> Flat:
    r, ni = _grid(space)
    nt = n_terms(profile, catalog, space.n[ni], space.route_shard_mb_s[r], space.route_count[r])
    shape = (r.shape[0], ni.shape[1])
    return Flat(r=np.broadcast_to(r, shape).ravel(), ni=np.broadcast_to(ni, shape).ravel(),
                nt=nt.flat())


def _cells(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, nt: NTerms, j: Arr
) -> Cells:
    """Timeline and costs of flat cells whose n-terms are already taken (same math as evaluate)."""
    a = space.route_arch[r]
    mem = space.memory_mb[j]
    tl = timeline(profile, catalog, nt, mem, space.rate[a, j])
    return costs(catalog, nt, tl, mem, space.usd_per_gb_s[a], space.route_usd_per_hour[r])


def _bisect_deadline(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, nt: NTerms,
    deadline_s: float,
) -> Arr:
    """Smallest memory index with T ≤ deadline per flat cell; the top index must satisfy it."""
    lo = np.zeros(r.size, dtype=np.int64)
    hi = np.full(r.size, space.memory_mb.size - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        a = space.route_arch[r]
        t = timeline(profile, catalog, nt, space.memory_mb[mid], space.rate[a, mid]).total_s
        ok = np.isfinite(t) & (t <= deadline_s)
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, np.minimum(mid + 1, hi))
    return lo


def _compute_bound(space: Space, r: Arr, ni: Arr, at_top: Cells) -> Arr:
    """Lower bound on the Lambda compute cost of a (route, n) over every memory size.

    GB-s = m·n·billed(m)/1024 with billed(m) = k·b_l/R(m) + rest(m); m/R(m) is at least its
    minimum over the grid, and rest(m) — start-up, load, exchange, chaining — is non-increasing
    in m, so it is at least its value at the top memory, paid at the smallest memory.
    """
    a = space.route_arch[r]
    with np.errstate(divide="ignore"):
        best_mb_per_rate = np.min(space.memory_mb[None, :] / space.rate, axis=1)
    k = np.asarray(at_top.iterations, dtype=np.float64)
    rest_s = at_top.billed_s - k * at_top.compute_per_iteration_s
    gb_s = (k * at_top.local_batch * best_mb_per_rate[a]
            + space.memory_mb[0] * rest_s) * space.n[ni] / 1024.0
    return np.asarray(space.usd_per_gb_s[a] * gb_s)


def solve_deadline(
    profile: WorkloadProfile, catalog: Catalog, space: Space, deadline_s: float,
    flat: Flat | None = None,
) -> tuple[int, Pool] | None:
    """The cheapest cell with T ≤ deadline (ties: faster); None if no cell meets it.

    Bounds prune (route, n) pairs before any bisection: T at the top memory is the fastest the
    pair can be, and cost ≥ base + slope·m with base and slope taken at the top memory.
    """
    f = flat if flat is not None else flatten(profile, catalog, space)
    top = space.memory_mb.size - 1
    ids = np.nonzero(f.nt.ok)[0]
    nt, r, ni = f.nt.take(ids), f.r[ids], f.ni[ids]
    at_top = _cells(profile, catalog, space, r, nt, np.full(ids.size, top))
    alive = np.isfinite(at_top.total_s) & (at_top.total_s <= deadline_s)
    if not np.any(alive):
        return None
    ids, nt, r, ni = ids[alive], nt.take(np.nonzero(alive)[0]), r[alive], ni[alive]
    at_top = Cells(*(np.asarray(getattr(at_top, k))[alive] for k in _CELL_FIELDS))
    pools = [Pool.of(r, ni, np.full(r.size, top), at_top)]
    slope = at_top.lambda_usd / space.memory_mb[top]
    base = at_top.total_usd - at_top.lambda_usd
    best_usd = float(at_top.total_usd.min())

    def survivors(lower_bound: Arr) -> Arr:
        return np.nonzero(lower_bound <= best_usd * (1 + SLACK))[0]

    # A cheap first pass: bisect the pairs with the lowest bound to tighten best_usd.
    lb0 = np.maximum(base + slope * space.memory_mb[0],
                     _compute_bound(space, r, ni, at_top) + base)
    probe = np.argsort(lb0, kind="stable")[:64]
    j_probe = _bisect_deadline(profile, catalog, space, r[probe], nt.take(probe), deadline_s)
    probe_cells = _cells(profile, catalog, space, r[probe], nt.take(probe), j_probe)
    best_usd = min(best_usd, float(probe_cells.total_usd.min()))
    keep = survivors(lb0)
    r, ni, nt, base, slope = r[keep], ni[keep], nt.take(keep), base[keep], slope[keep]
    j0 = _bisect_deadline(profile, catalog, space, r, nt, deadline_s)
    first = _cells(profile, catalog, space, r, nt, j0)
    pools.append(Pool.of(r, ni, j0, first))
    best_usd = min(best_usd, float(first.total_usd.min()))
    keep = survivors(base + slope * space.memory_mb[j0])
    with np.errstate(divide="ignore", invalid="ignore"):
        m_hi = np.where(slope[keep] > 0, (best_usd * (1 + SLACK) - base[keep]) / slope[keep],
                        np.inf)
    stop = np.minimum(np.searchsorted(space.memory_mb, m_hi, side="right") - 1, top - 1)
    # Windows (j0, stop] split into blocks, coarse to fine; a block [a, b] is bounded by the cost
    # formula with memory a and the (lower) times of memory b, so only blocks that could still
    # win are split further, and only blocks of BLOCK steps that survive are evaluated whole.
    sel, a, b = keep, j0[keep] + 1, stop
    for size in (*BLOCK_LEVELS, 1):
        count = np.maximum(-(-(b - a + 1) // size), 0)
        owner, t = _ragged(np.zeros_like(count), count - 1)
        sel, a = sel[owner], a[owner] + t * size
        b = np.minimum(a + size - 1, b[owner])
        if sel.size == 0:
            break
        ends = _cells(profile, catalog, space, r[sel], nt.take(sel), b)
        pools.append(Pool.of(r[sel], ni[sel], b, ends))
        best_usd = min(best_usd, float(ends.total_usd.min()))
        if size == 1:
            break
        bound = ends.total_usd - ends.lambda_usd + ends.lambda_usd / space.memory_mb[b] * (
            space.memory_mb[a])
        live = survivors(bound)
        live = live[a[live] < b[live]]  # the end itself is evaluated already
        sel, a, b = sel[live], a[live], b[live] - 1
    pool = Pool.concat(pools)
    best = int(_order(pool, cost_first=True)[0])
    return best, pool


def solve_budget(
    profile: WorkloadProfile, catalog: Catalog, space: Space, budget_usd: float,
    flat: Flat | None = None,
) -> tuple[int, Pool] | None:
    """The fastest cell with C ≤ budget (ties: cheaper); None if no cell fits.

    The cheapest cell of the space gives a first feasible time T_ub (or proves the budget too
    small). A (route, n) pair can only beat T_ub with memories whose cost bound fits the budget
    (m ≤ its cap); blocks of memories are pruned when their cost bound exceeds the budget or the
    time at their top end — the fastest they can be — exceeds T_ub, coarse to fine.
    """
    f = flat if flat is not None else flatten(profile, catalog, space)
    cheap = solve_deadline(profile, catalog, space, math.inf, f)
    if cheap is None or float(cheap[1].total_usd[cheap[0]]) > budget_usd:
        return None
    pools = [cheap[1]]
    t_ub = float(cheap[1].total_s[cheap[0]])
    top = space.memory_mb.size - 1
    ids = np.nonzero(f.nt.ok)[0]
    nt, r, ni = f.nt.take(ids), f.r[ids], f.ni[ids]
    at_top = _cells(profile, catalog, space, r, nt, np.full(ids.size, top))
    with np.errstate(invalid="ignore"):
        base = at_top.total_usd - at_top.lambda_usd
    slope = at_top.lambda_usd / space.memory_mb[top]
    with np.errstate(divide="ignore", invalid="ignore"):
        m_cap = np.where(slope > 0, (budget_usd * (1 + SLACK) - base) / slope, np.inf)
    j_cap = np.minimum(np.searchsorted(space.memory_mb, m_cap, side="right") - 1, top)
    alive = np.nonzero((j_cap >= 0) & (at_top.total_s <= t_ub * (1 + SLACK)))[0]
    r, ni, nt, j_cap = r[alive], ni[alive], nt.take(alive), j_cap[alive]
    sel, a, b = np.arange(r.size), np.zeros(r.size, dtype=np.int64), j_cap
    for size in (*BLOCK_LEVELS, 1):
        count = np.maximum(-(-(b - a + 1) // size), 0)
        owner, t = _ragged(np.zeros_like(count), count - 1)
        sel, a = sel[owner], a[owner] + t * size
        b = np.minimum(a + size - 1, b[owner])
        if sel.size == 0:
            break
        ends = _cells(profile, catalog, space, r[sel], nt.take(sel), b)
        pools.append(Pool.of(r[sel], ni[sel], b, ends))
        fits = ends.total_usd <= budget_usd
        if np.any(fits):
            t_ub = min(t_ub, float(ends.total_s[fits].min()))
        if size == 1:
            break
        bound = ends.total_usd - ends.lambda_usd + ends.lambda_usd / space.memory_mb[b] * (
            space.memory_mb[a])
        live = np.nonzero((bound <= budget_usd * (1 + SLACK))
                          & (ends.total_s <= t_ub * (1 + SLACK)) & (a < b))[0]
        sel, a, b = sel[live], a[live], b[live] - 1
    pool = Pool.concat(pools)
    fits = pool.total_usd <= budget_usd
    order = _order(pool, cost_first=False)
    best = int(order[fits[order]][0])
    return best, pool


def fastest_cell(profile: WorkloadProfile, catalog: Catalog, space: Space) -> tuple[float, Choice]:
    """The fastest achievable configuration: T is non-increasing in m, so check the top memory."""
    r, ni = _grid(space)
    top = np.full((r.shape[0], ni.shape[1]), space.memory_mb.size - 1)
    cells = cells_at(profile, catalog, space, r, ni, top)
    flat = int(np.argmin(cells.total_s))
    rr, nn = np.unravel_index(flat, cells.total_s.shape)
    return float(cells.total_s[rr, nn]), choice_of(space, int(rr), int(nn), top[rr, nn])


def choice_of(space: Space, r: int, ni: int, j: int) -> Choice:
    ps_type, count = space.route_ps[r]
    return Choice(
        n_workers=int(space.n[ni]), memory_mb=int(space.memory_mb[j]),
        arch=space.archs[int(space.route_arch[r])], ps_type=ps_type, ps_count=count,
    )


def exhaustive(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, goal: Goal
) -> tuple[Choice, float, float] | None:
    """Reference optimum: evaluate every cell (no PS-type pruning) and sort. Small grids only."""
    space = build_space(profile, catalog, limits, prune=False)
    shape = (len(space.route_ps), space.n.size, space.memory_mb.size)
    r, ni, j = np.meshgrid(*(np.arange(k) for k in shape), indexing="ij")
    pool = Pool.of(r, ni, j, cells_at(profile, catalog, space, r, ni, j))
    ok = np.isfinite(pool.total_s)
    if goal.deadline_s is not None:
        ok &= pool.total_s <= goal.deadline_s
    if goal.budget_usd is not None:
        ok &= pool.total_usd <= goal.budget_usd
    if not np.any(ok):
        return None
    order = _order(pool, cost_first=goal.deadline_s is not None)
    best = int(order[ok[order]][0])
    return (choice_of(space, int(pool.r[best]), int(pool.ni[best]), int(pool.j[best])),
            float(pool.total_s[best]), float(pool.total_usd[best]))


# --- baselines for the benchmark -----------------------------------------------------------------


def fixed_route_space(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits
) -> Space:
    """λDNN's setting: one PS of the catalog's default type, x86_64 (or the only arch)."""
    arch = "x86_64" if profile.rate("x86_64") is not None else profile.architectures[0]
    fixed = Limits(max_memory_mb=limits.max_memory_mb, max_concurrency=limits.max_concurrency,
                   arch=arch, ps_types=(catalog.ps_default_type,),
                   reserve_concurrency=limits.reserve_concurrency)
    space = build_space(profile, catalog, fixed, prune=False)
    one = np.array([i for i, (_, c) in enumerate(space.route_ps) if c == 1])
    return Space(**{**space.__dict__, "route_arch": space.route_arch[one],
                    "route_ps": tuple(space.route_ps[i] for i in one),
                    "route_shard_mb_s": space.route_shard_mb_s[one],
                    "route_count": space.route_count[one],
                    "route_usd_per_hour": space.route_usd_per_hour[one]})


def algorithm1(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, deadline_s: float
) -> tuple[Choice, float, float] | None:
    """λDNN Algorithm 1: per memory size, scan n from n_lower to n_upper, keep the first n that
    meets the deadline, and return the cheapest of those (one default PS, x86_64).

    n_lower assumes free communication (n ≥ (d_t/B_s + n_t·e/R)/(D − start-up)); n_upper is the
    concurrency cap. Taking the *first* feasible n per m is what makes it sub-optimal.
    """
    space = fixed_route_space(profile, catalog, limits)
    best: tuple[Choice, float, float] | None = None
    budget_s = deadline_s - profile.startup_s
    if budget_s <= 0:
        return None
    n_all = np.arange(space.n.size)
    for j in range(space.memory_mb.size):
        s3 = min(catalog.s3_mb_s_per_memory_mb * space.memory_mb[j] + catalog.s3_mb_s_intercept,
                 catalog.s3_max_mb_s)
        work_s = profile.dataset_bytes / 1e6 / s3 + (
            profile.dataset_samples * profile.epochs / max(float(space.rate[0, j]), 1e-12))
        n_lower = max(1, math.ceil(work_s / budget_s))
        scan = n_all[n_lower - 1:]
        if scan.size == 0:
            continue
        cells = cells_at(profile, catalog, space, np.zeros_like(scan), scan, np.full_like(scan, j))
        hit = np.nonzero(cells.total_s <= deadline_s)[0]
        if hit.size == 0:
            continue
        h = int(hit[0])
        cand = (choice_of(space, 0, int(scan[h]), j), float(cells.total_s[h]),
                float(cells.total_usd[h]))
        if best is None or (cand[2], cand[1]) < (best[2], best[1]):
            best = cand
    return best


def naive(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, deadline_s: float
) -> tuple[Choice, float, float]:
    """Largest memory, smallest n meeting the deadline (the fastest n if none does); one PS."""
    space = fixed_route_space(profile, catalog, limits)
    ni = np.arange(space.n.size)
    top = space.memory_mb.size - 1
    cells = cells_at(profile, catalog, space, np.zeros_like(ni), ni, np.full_like(ni, top))
    hit = np.nonzero(cells.total_s <= deadline_s)[0]
    k = int(hit[0]) if hit.size else int(np.argmin(cells.total_s))
    return choice_of(space, 0, k, top), float(cells.total_s[k]), float(cells.total_usd[k])


# --- from a cell to a Plan -----------------------------------------------------------------------


def predict(profile: WorkloadProfile, catalog: Catalog, choice: Choice) -> Cells:
    """The model at one configuration (same code path as the search)."""
    ps = catalog.ps_type(choice.ps_type)
    curve = profile.rate(choice.arch)
    if curve is None:
        raise ValueError(f"workload {profile.name} has no training rate for {choice.arch}")
    mem = np.array([choice.memory_mb])
    share = vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu)
    return evaluate(profile, catalog, Axis(
        memory_mb=mem, rate_samples_s=training_rate_samples_s(curve, share, mem),
        usd_per_gb_s=np.array([catalog.arch(choice.arch).usd_per_gb_s]),
        n=np.array([choice.n_workers]), shard_mb_s=np.array([ps.baseline_mb_s]),
        ps_count=np.array([choice.ps_count]), ps_usd_per_hour=np.array([ps.usd_per_hour]),
    ))


def _f(x: Arr) -> float:
    return float(np.asarray(x).ravel()[0])


def _i(x: Arr) -> int:
    return int(np.asarray(x).ravel()[0])


def build_plan(
    profile: WorkloadProfile, catalog: Catalog, choice: Choice, goal: Goal, limits: Limits,
    job: str, notes: tuple[str, ...] = (),
) -> Plan:
    """Fill every Plan field from one evaluated cell."""
    c = predict(profile, catalog, choice)
    if not bool(np.asarray(c.feasible).ravel()[0]):
        raise Infeasible(f"configuration {choice} cannot run under catalog {catalog.name}")
    k, links = _i(c.iterations), _i(c.invocations)
    per_inv = _i(c.iterations_per_invocation)
    startup = profile.startup_s
    prediction = Prediction(
        load_s=_f(c.load_s), compute_s=k * _f(c.compute_per_iteration_s),
        communication_s=k * _f(c.communication_per_iteration_s),
        ps_aggregation_s=k * _f(c.aggregation_per_iteration_s), startup_s=startup,
        chaining_s=_f(c.chaining_s), total_s=_f(c.total_s), iteration_s=_f(c.iteration_s),
        compute_per_iteration_s=_f(c.compute_per_iteration_s),
        communication_per_iteration_s=_f(c.communication_per_iteration_s),
        ps_bandwidth_mb_s=_f(c.ps_mb_s), s3_bandwidth_mb_s=_f(c.s3_mb_s),
    )
    cost = CostBreakdown(
        lambda_compute_usd=_f(c.lambda_usd), lambda_requests_usd=_f(c.requests_usd),
        ephemeral_storage_usd=_f(c.ephemeral_usd), ps_instances_usd=_f(c.ps_usd),
        step_functions_usd=_f(c.sfn_usd), s3_requests_usd=_f(c.s3_usd),
        total_usd=_f(c.total_usd),
    )
    b_l = _i(c.local_batch)
    every = profile.checkpoint_every_iterations or per_inv
    training = TrainingSpec(
        model=profile.model, dataset=profile.dataset, dataset_samples=profile.dataset_samples,
        dataset_bytes=profile.dataset_bytes, model_bytes=profile.model_bytes,
        epochs=profile.epochs, local_batch=b_l, global_batch=b_l * choice.n_workers,
        iterations=k, learning_rate=profile.learning_rate, momentum=profile.momentum,
        checkpoint_every_iterations=max(1, min(every, per_inv)),
    )
    share = float(vcpu_share(np.array([choice.memory_mb]), catalog.mb_per_vcpu,
                             catalog.max_vcpu)[0])
    return Plan(
        job=job, workload=profile.name, catalog=catalog.name, goal=goal,
        n_workers=choice.n_workers, memory_mb=choice.memory_mb, arch=choice.arch,
        vcpu_share=round(share, 4), ps_type=choice.ps_type, ps_count=choice.ps_count,
        ps_arch=catalog.ps_type(choice.ps_type).arch,
        invocation_timeout_s=catalog.invocation_timeout_s,
        ephemeral_storage_mb=_i(c.ephemeral_mb), invocations_per_worker=links,
        iterations_per_invocation=per_inv, reserve_concurrency=limits.reserve_concurrency,
        training=training, prediction=prediction, cost=cost, notes=notes,
    )


# --- the public entry point ----------------------------------------------------------------------


def _infeasible_message(
    profile: WorkloadProfile, catalog: Catalog, space: Space, goal: Goal
) -> str:
    fast_s, fast = fastest_cell(profile, catalog, space)
    if not math.isfinite(fast_s):
        return (f"no configuration of {profile.name} can run on {catalog.name} under these "
                f"limits: no memory size fits one iteration into an invocation of "
                f"{catalog.invocation_timeout_s} s, or the dataset shard does not fit in /tmp")
    cheap = solve_deadline(profile, catalog, space, math.inf)
    wanted = []
    if goal.deadline_s is not None:
        wanted.append(f"deadline {format_duration_s(goal.deadline_s)}")
    if goal.budget_usd is not None:
        wanted.append(f"budget {format_usd(goal.budget_usd)}")
    text = (f"no plan meets {' and '.join(wanted)} for {profile.name} on {catalog.name} under "
            f"these limits: fastest achievable {format_duration_s(fast_s)} "
            f"(n={fast.n_workers}, {fast.memory_mb} MB, {fast.arch}, {fast.ps_type}×"
            f"{fast.ps_count})")
    if cheap is not None:
        i, pool = cheap
        text += (f", cheapest achievable {format_usd(float(pool.total_usd[i]))} "
                 f"(takes {format_duration_s(float(pool.total_s[i]))})")
    return text


def _alternatives(pool: Pool, best: int, space: Space, cost_first: bool, count: int) -> list[int]:
    """The best cell of each other (route, n) group, in goal order: next-best distinct shapes."""
    order = _order(pool, cost_first)
    order = order[np.isfinite(pool.total_s[order])]
    group = pool.r[order] * space.n.size + pool.ni[order]
    _, first = np.unique(group, return_index=True)
    picks = order[np.sort(first)]
    chosen = pool.r[best] * space.n.size + pool.ni[best]
    return [int(i) for i in picks if pool.r[i] * space.n.size + pool.ni[i] != chosen][:count]


def frontier(
    profile: WorkloadProfile, catalog: Catalog, space: Space, points: int = 12
) -> tuple[FrontierPoint, ...]:
    """Pareto (time, cost) points: exact cheapest plans at deadlines log-spaced between the fastest
    achievable time and the time of the cheapest plan; dominated duplicates removed."""
    fast_s, _ = fastest_cell(profile, catalog, space)
    flat = flatten(profile, catalog, space)
    cheap = solve_deadline(profile, catalog, space, math.inf, flat)
    if cheap is None:
        return ()
    slow_s = float(cheap[1].total_s[cheap[0]])
    deadlines = np.geomspace(fast_s, max(slow_s, fast_s), points) if slow_s > fast_s else [fast_s]
    found: dict[Choice, tuple[float, float]] = {}
    for d in deadlines:
        res = solve_deadline(profile, catalog, space, float(d) * (1 + SLACK), flat)
        if res is None:
            continue
        i, pool = res
        ch = choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))
        found[ch] = (float(pool.total_s[i]), float(pool.total_usd[i]))
    pts = sorted(found.items(), key=lambda kv: (kv[1][0], kv[1][1]))
    out: list[FrontierPoint] = []
    for ch, (t, c) in pts:
        if out and c >= out[-1].total_usd:
            continue
        out.append(FrontierPoint(total_s=t, total_usd=c, n_workers=ch.n_workers,
                                 memory_mb=ch.memory_mb, arch=ch.arch, ps_type=ch.ps_type,
                                 ps_count=ch.ps_count))
    return tuple(out)


def plan_job(
    profile: WorkloadProfile, catalog: Catalog, goal: Goal, limits: Limits, job: str,
    *, alternatives: int = 3, frontier_points: int = 12,
) -> PlanResult:
    """Plan a training job: the exact optimum for the goal, its frontier and alternatives."""
    if goal.deadline_s is None and goal.budget_usd is None:
        raise ValueError("goal: give a deadline, a budget or both")
    for value, what in ((goal.deadline_s, "deadline"), (goal.budget_usd, "budget")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{what} {value!r} is not a positive finite number")
    space = build_space(profile, catalog, limits)
    if goal.deadline_s is not None:
        res = solve_deadline(profile, catalog, space, goal.deadline_s)
        cost_first = True
        over = res is not None and goal.budget_usd is not None and (
            float(res[1].total_usd[res[0]]) > goal.budget_usd
        )
        if over:  # the cheapest plan under the deadline is over budget: nothing fits both
            res = None
    else:
        res = solve_budget(profile, catalog, space, float(goal.budget_usd))  # type: ignore[arg-type]
        cost_first = False
    if res is None:
        raise Infeasible(_infeasible_message(profile, catalog, space, goal))
    best, pool = res
    choice = choice_of(space, int(pool.r[best]), int(pool.ni[best]), int(pool.j[best]))
    why = ("cheapest plan meeting the deadline (ties: faster)" if cost_first
           else "fastest plan within the budget (ties: cheaper)")
    notes = (why, "exact search over n, memory, arch, PS type and shard count", *space.notes,
             "Lambda GB-s priced at tier 1 (one job stays below the first monthly tier)")
    if profile.provisional:
        notes += (f"workload profile {profile.name} holds provisional figures: re-profile",)
    plan = build_plan(profile, catalog, choice, goal, limits, job, notes)
    alts = tuple(
        build_plan(profile, catalog,
                   choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i])),
                   goal, limits, job, ("next-best alternative",))
        for i in _alternatives(pool, best, space, cost_first, alternatives)
    )
    front = frontier(profile, catalog, space, frontier_points) if frontier_points else ()
    return PlanResult(plan=plan, frontier=front, alternatives=alts)
