"""Exact search over the space: cheapest under a deadline, fastest within a budget.

Strategy (exact, vectorised over (route, n) pairs):
1. For a fixed route and n, the time T(m) is non-increasing in m (R(m) and B_s(m) are
   non-decreasing, so fewer chain links are needed): the cells meeting a deadline are a suffix
   of the memory grid, and a vectorised bisection finds where each suffix starts.
2. Cost is *not* monotone in m. Every cost item grows with m, with the billed time and with the
   number of links, so over a block of memories [a, b] the cost is at least the cost formula
   with memory a and the times of memory b. Pairs, then blocks (coarse to fine), whose bound
   exceeds the best cost found so far are pruned; surviving blocks are evaluated whole.
3. Before any bisection, pairs are pruned by the fastest time they can reach (at the top
   memory) and by a bound on their Lambda GB-s (k·b_l·min(m/R(m)) plus the rest at the top).
4. S3 routes with k ≤ n reducers: the pairs with many reducers are held back from the first
   pass and let in only where a lower bound on their cost and time can still win (heldback).
Tie-breaks: cost, then time, then smaller n, smaller m, route order (budget: time first); PS
routes come before S3 routes.
`solve_goal` picks the solver for a Goal; the slices a search may use are the pairs `Flat` marks ok.
`exhaustive` enumerates every cell, without pruning PS types, as the reference in tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from provisioner.catalog import Catalog
from provisioner.cells import Cells, NTerms
from provisioner.heldback import HELD_BACK_WINDOWS, held_back, with_held_back
from provisioner.model import costs, timeline
from provisioner.plan import Goal
from provisioner.profile import WorkloadProfile
from provisioner.space import (
    Choice,
    Flat,
    Limits,
    Space,
    build_space,
    cells_at,
    choice_of,
    flatten,
    ragged,
)
from provisioner.terms import Arr

SLACK = 1e-9  # relative widening of bound windows so float rounding never drops the optimum


BLOCK_LEVELS = (1024, 128, 16)  # memory steps per bounded block, coarse to fine, in cost windows


_CELL_FIELDS = tuple(Cells.__dataclass_fields__)


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

        return Pool(
            r=flat(r),
            ni=flat(ni),
            j=flat(j),
            total_s=flat(cells.total_s),
            total_usd=flat(cells.total_usd),
        )

    @staticmethod
    def concat(pools: list[Pool]) -> Pool:
        return Pool(
            *(
                np.concatenate([getattr(p, f) for p in pools])
                for f in ("r", "ni", "j", "total_s", "total_usd")
            )
        )


def goal_order(pool: Pool, cost_first: bool) -> Arr:
    """Indices of the pool in goal order: (cost, time) or (time, cost), then n, m, route.

    np.lexsort treats its *last* key as the primary one, hence the reversed tuples.
    """
    keys = (pool.r, pool.j, pool.ni)
    primary = (pool.total_s, pool.total_usd) if cost_first else (pool.total_usd, pool.total_s)
    return np.lexsort((*keys, *primary))


def _cells(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, nt: NTerms, j: Arr
) -> Cells:
    """Timeline and costs of flat cells whose n-terms are already taken (same math as evaluate)."""
    a = space.route_arch[r]
    mem = space.memory_mb[j]
    tl = timeline(profile, catalog, nt, mem, space.rate[a, j])
    return costs(catalog, nt, tl, mem, space.usd_per_gb_s[a], space.route_usd_per_hour[r])


def _bisect_deadline(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    r: Arr,
    nt: NTerms,
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


def _compute_bound(
    space: Space, r: Arr, ni: Arr, at_top: Cells, nt: NTerms, period_s: float, tick_s: float = 0.0
) -> Arr:
    """Lower bound on the Lambda compute cost of a (route, n) over every memory size.

    GB-s = m·n·billed(m)/1024 with billed(m) = k·t(m) + rest(m); rest(m) — start-up, load,
    exchange, chaining — is non-increasing in m, so it is at least its value at the top memory,
    paid at the smallest memory. The step t(m) is at least min(c, x(m)) and x(m) − e (the CPU
    quota refunds at most the exchange e, and none without a period), with x(m) ≥ b_l/R(m), so
    m·t(m) is at least max(min(m_0·c, B), B − m_top·e) with B = b_l·min(m/R(m)) over the grid.
    Where the scheduler's tick moves part of the quota's wait out of the step into the exchange
    (`tick_s`, local_machine.waits_in_compute), t(m) is still at least c, not x(m) − e: the
    bound keeps min(m_0·c, B).
    """
    a = space.route_arch[r]
    with np.errstate(divide="ignore"):
        best_mb_per_rate = np.min(space.memory_mb[None, :] / space.rate, axis=1)
    k = np.asarray(at_top.iterations, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # an infeasible cell (inf − inf) gets NaN: never chosen
        rest_s = at_top.billed_s - k * at_top.compute_per_iteration_s
    b = at_top.local_batch * best_mb_per_rate[a]
    refund = nt.exchange_s if period_s > 0 else np.zeros_like(b)
    with np.errstate(invalid="ignore"):
        mb_s_per_step = np.minimum(space.memory_mb[0] * nt.core_compute_s, b)
        if tick_s <= 0:
            mb_s_per_step = np.maximum(mb_s_per_step, b - space.memory_mb[-1] * refund)
    gb_s = (k * mb_s_per_step + space.memory_mb[0] * rest_s) * space.n[ni] / 1024.0
    return np.asarray(space.usd_per_gb_s[a] * gb_s)


@dataclass(frozen=True)
class _Blocks:
    """Memory windows of (route, n) pairs, searched coarse to fine (BLOCK_LEVELS, then 1).

    A window [a, b] of pair `sel` is split into blocks; each block's top end is evaluated (its
    time is the block's lowest), and the block is bounded from below in cost by the cost formula
    with memory a and the times of memory b. Only blocks that `may_win` are split further; the
    block ends found so far go to `observe`, which tightens the caller's incumbent.
    """

    profile: WorkloadProfile
    catalog: Catalog
    space: Space
    r: Arr
    ni: Arr
    nt: NTerms

    def refine(self, sel: Arr, a: Arr, b: Arr, *, observe: Callable[[Cells], None],
               may_win: Callable[[Arr, Cells], Arr]) -> list[Pool]:  # fmt: skip
        """Every block end evaluated, as pools; `a`, `b` are per-`sel` window bounds."""
        pools: list[Pool] = []
        memory = self.space.memory_mb
        for size in (*BLOCK_LEVELS, 1):
            count = np.maximum(-(-(b - a + 1) // size), 0)
            owner, t = ragged(np.zeros_like(count), count - 1)
            sel, a = sel[owner], a[owner] + t * size
            b = np.minimum(a + size - 1, b[owner])
            if sel.size == 0:
                break
            ends = _cells(self.profile, self.catalog, self.space, self.r[sel],
                          self.nt.take(sel), b)  # fmt: skip
            pools.append(Pool.of(self.r[sel], self.ni[sel], b, ends))
            observe(ends)
            if size == 1:
                break
            # An infeasible block end's floor reads nan (inf − inf), which no may_win accepts:
            # the block goes, rightly (a slower, lower memory is no more feasible).
            with np.errstate(invalid="ignore"):
                bound = ends.others_floor_usd + ends.lambda_usd / memory[b] * memory[a]
            live = np.nonzero(may_win(bound, ends) & (a < b))[0]  # a block's end is done
            sel, a, b = sel[live], a[live], b[live] - 1
        return pools


# The held-back S3 reducer counts, searched in these windows in turn, so that a cheap plan found
# with few reducers bounds the windows of many (a deadline only the many can meet is found late).


def _best_of(results: list[tuple[int, Pool] | None], cost_first: bool) -> tuple[int, Pool] | None:
    found = [res for res in results if res is not None]
    if len(found) <= 1:
        return found[0] if found else None
    pool = Pool.concat([p for _, p in found])
    ok = np.zeros(pool.r.size, dtype=bool)
    offset = 0
    for i, p in found:
        ok[offset + i] = True  # each pass's optimum (a pool also holds cells beyond its goal)
        offset += p.r.size
    order = goal_order(pool, cost_first)
    return int(order[ok[order]][0]), pool


def solve_deadline(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    deadline_s: float,
    flat: Flat | None = None,
) -> tuple[int, Pool] | None:
    """The cheapest cell with T ≤ deadline (ties: faster); None if no cell meets it.

    A first pass over `flat` (every pair but the held-back S3 ones), then a pass over the held-back
    pairs whose bounds can still beat it.
    """
    f = flat if flat is not None else flatten(profile, catalog, space)
    found = [_deadline_pass(profile, catalog, space, deadline_s, f)]
    for window in HELD_BACK_WINDOWS:
        best = _best_of(found, True)
        best_usd = math.inf if best is None else float(best[1].total_usd[best[0]])
        extra = held_back(profile, catalog, space, f, best_usd, deadline_s, window)
        if extra is not None:
            found.append(_deadline_pass(profile, catalog, space, deadline_s, extra))
    return _best_of(found, True)


def _deadline_pass(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    deadline_s: float,
    f: Flat,
) -> tuple[int, Pool] | None:
    """solve_deadline over the pairs of `f` only.

    Bounds prune (route, n) pairs before any bisection: T at the top memory is the fastest the
    pair can be, and cost ≥ base + slope·m with base and slope taken at the top memory.
    """
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
    base = at_top.others_floor_usd
    best_usd = float(at_top.total_usd.min())

    def survivors(lower_bound: Arr) -> Arr:
        return np.nonzero(lower_bound <= best_usd * (1 + SLACK))[0]

    # A cheap first pass: bisect the pairs with the lowest bound to tighten best_usd.
    period_s = catalog.cpu_throttle_period_s
    lb0 = np.maximum(
        base + slope * space.memory_mb[0],
        _compute_bound(space, r, ni, at_top, nt, period_s, catalog.scheduler_tick_s) + base,
    )
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
        m_hi = np.where(
            slope[keep] > 0, (best_usd * (1 + SLACK) - base[keep]) / slope[keep], np.inf
        )
    stop = np.minimum(np.searchsorted(space.memory_mb, m_hi, side="right") - 1, top - 1)

    def observe(ends: Cells) -> None:
        nonlocal best_usd
        best_usd = min(best_usd, float(ends.total_usd.min()))

    # Windows (j0, stop] of the surviving pairs, refined coarse to fine.
    def may_win(bound: Arr, _ends: Cells) -> Arr:
        return bound <= best_usd * (1 + SLACK)

    blocks = _Blocks(profile, catalog, space, r, ni, nt)
    pools += blocks.refine(keep, j0[keep] + 1, stop, observe=observe, may_win=may_win)
    pool = Pool.concat(pools)
    best = int(goal_order(pool, cost_first=True)[0])
    return best, pool


def solve_budget(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    budget_usd: float,
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
    f = with_held_back(f, held_back(profile, catalog, space, f, budget_usd, t_ub))
    top = space.memory_mb.size - 1
    ids = np.nonzero(f.nt.ok)[0]
    nt, r, ni = f.nt.take(ids), f.r[ids], f.ni[ids]
    at_top = _cells(profile, catalog, space, r, nt, np.full(ids.size, top))
    base = at_top.others_floor_usd
    slope = at_top.lambda_usd / space.memory_mb[top]
    with np.errstate(divide="ignore", invalid="ignore"):
        m_cap = np.where(slope > 0, (budget_usd * (1 + SLACK) - base) / slope, np.inf)
    j_cap = np.minimum(np.searchsorted(space.memory_mb, m_cap, side="right") - 1, top)
    alive = np.nonzero((j_cap >= 0) & (at_top.total_s <= t_ub * (1 + SLACK)))[0]
    r, ni, nt, j_cap = r[alive], ni[alive], nt.take(alive), j_cap[alive]

    def observe(ends: Cells) -> None:
        nonlocal t_ub
        fits = ends.total_usd <= budget_usd
        if np.any(fits):
            t_ub = min(t_ub, float(ends.total_s[fits].min()))

    def may_win(bound: Arr, ends: Cells) -> Arr:
        return (bound <= budget_usd * (1 + SLACK)) & (ends.total_s <= t_ub * (1 + SLACK))

    blocks = _Blocks(profile, catalog, space, r, ni, nt)
    pools += blocks.refine(np.arange(r.size), np.zeros(r.size, dtype=np.int64), j_cap,
                           observe=observe, may_win=may_win)  # fmt: skip
    pool = Pool.concat(pools)
    fits = pool.total_usd <= budget_usd
    order = goal_order(pool, cost_first=False)
    best = int(order[fits[order]][0])
    return best, pool


def solve_goal(
    profile: WorkloadProfile, catalog: Catalog, space: Space, goal: Goal, flat: Flat | None = None
) -> tuple[int, Pool] | None:
    """The optimum for the goal: cheapest under the (planning) deadline and within the budget if
    one is given, else fastest within the budget; None if no cell of `flat` meets the goal."""
    if goal.planning_deadline_s is None:
        return solve_budget(profile, catalog, space, float(goal.budget_usd or 0.0), flat)
    res = solve_deadline(profile, catalog, space, goal.planning_deadline_s, flat)
    if res is not None and goal.budget_usd is not None:
        # The cheapest cell under the deadline is over budget: nothing meets both.
        return None if float(res[1].total_usd[res[0]]) > goal.budget_usd else res
    return res


def fastest_cell(profile: WorkloadProfile, catalog: Catalog, space: Space) -> tuple[float, Choice]:
    """The fastest achievable configuration: T is non-increasing in m, so check the top memory;
    and in k (more reducers, a shorter exchange), so of the S3 routes only k = n."""
    ps = np.nonzero(space.route_reducers == 0)[0]
    r_ps, ni_ps = (x.ravel() for x in np.meshgrid(ps, np.arange(space.n.size), indexing="ij"))
    table = space.s3_route_table()
    a, ni_s3 = np.nonzero(table[:, 1:] >= 0)  # S3 routes (arch, k), k = ni + 1
    keep = table[a, ni_s3 + 1] >= 0
    r = np.concatenate([r_ps, table[a, ni_s3 + 1][keep]])
    ni = np.concatenate([ni_ps, ni_s3[keep]])
    top = np.full(r.size, space.memory_mb.size - 1)
    cells = cells_at(profile, catalog, space, r, ni, top)
    best = int(np.argmin(cells.total_s))
    return float(cells.total_s[best]), choice_of(space, int(r[best]), int(ni[best]), int(top[best]))


def _enumerate(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, goal: Goal
) -> tuple[Space, Pool, Arr]:
    """Every cell (no PS-type pruning) and the indices of those meeting the goal, in goal order."""
    space = build_space(profile, catalog, limits, prune=False)
    shape = (len(space.route_ps), space.n.size, space.memory_mb.size)
    r, ni, j = np.meshgrid(*(np.arange(k) for k in shape), indexing="ij")
    pool = Pool.of(r, ni, j, cells_at(profile, catalog, space, r, ni, j))
    ok = np.isfinite(pool.total_s)
    # held to the deadline as the planner holds it: less the slack, at the interval's top
    held = goal.for_catalog(catalog.default_slack, catalog.prediction_interval.high)
    if held.planning_deadline_s is not None:
        ok &= pool.total_s <= held.planning_deadline_s
    if goal.budget_usd is not None:
        ok &= pool.total_usd <= goal.budget_usd
    order = goal_order(pool, cost_first=goal.deadline_s is not None)
    return space, pool, order[ok[order]]


def _found(space: Space, pool: Pool, i: int) -> tuple[Choice, float, float]:
    choice = choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))
    return choice, float(pool.total_s[i]), float(pool.total_usd[i])


def exhaustive(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, goal: Goal
) -> tuple[Choice, float, float] | None:
    """Reference optimum: evaluate every cell (no PS-type pruning) and sort. Small grids only."""
    space, pool, order = _enumerate(profile, catalog, limits, goal)
    return _found(space, pool, int(order[0])) if order.size else None


def exhaustive_per_n(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, goal: Goal
) -> list[tuple[Choice, float, float]]:
    """Reference alternatives: the optimum of every worker count n that can meet the goal, in goal
    order (the first is the optimum overall). Enumerates every cell: small grids only."""
    space, pool, order = _enumerate(profile, catalog, limits, goal)
    _, first = np.unique(pool.ni[order], return_index=True)
    return [_found(space, pool, int(i)) for i in order[np.sort(first)]]
