"""Baselines for the benchmark only: λDNN's Algorithm 1 and a naive largest-memory rule.

Both run in λDNN's setting: the catalog's default PS type, one shard, x86_64.
"""

from __future__ import annotations

import math

import numpy as np

from provisioner.catalog import Catalog
from provisioner.profile import WorkloadProfile
from provisioner.space import Choice, Limits, Space, build_space, cells_at, choice_of


def fixed_route_space(profile: WorkloadProfile, catalog: Catalog, limits: Limits) -> Space:
    """λDNN's setting: one PS of the catalog's default type, x86_64 (or the only arch)."""
    arch = "x86_64" if profile.rate("x86_64") is not None else profile.architectures[0]
    fixed = Limits(
        max_memory_mb=limits.max_memory_mb,
        max_concurrency=limits.max_concurrency,
        arch=arch,
        ps_types=(catalog.ps_default_type,),
        reserve_concurrency=limits.reserve_concurrency,
        sync="ps",
    )
    space = build_space(profile, catalog, fixed, prune=False)
    one = np.array([i for i, (_, c) in enumerate(space.route_ps) if c == 1])
    return Space(
        **{
            **space.__dict__,
            "route_arch": space.route_arch[one],
            "route_ps": tuple(space.route_ps[i] for i in one),
            "route_shard_mb_s": space.route_shard_mb_s[one],
            "route_count": space.route_count[one],
            "route_usd_per_hour": space.route_usd_per_hour[one],
            "route_burst_mb_s": space.route_burst_mb_s[one],
            "route_burst_s": space.route_burst_s[one],
            "route_reducers": space.route_reducers[one],
        }
    )


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
        s3 = min(
            catalog.s3_mb_s_per_memory_mb * space.memory_mb[j] + catalog.s3_mb_s_intercept,
            catalog.s3_max_mb_s,
        )
        work_s = profile.dataset_bytes / 1e6 / s3 + (
            profile.dataset_samples * profile.epochs / max(float(space.rate[0, j]), 1e-12)
        )
        n_lower = max(1, math.ceil(work_s / budget_s))
        scan = n_all[n_lower - 1 :]
        if scan.size == 0:
            continue
        cells = cells_at(profile, catalog, space, np.zeros_like(scan), scan, np.full_like(scan, j))
        hit = np.nonzero(cells.total_s <= deadline_s)[0]
        if hit.size == 0:
            continue
        h = int(hit[0])
        cand = (
            choice_of(space, 0, int(scan[h]), j),
            float(cells.total_s[h]),
            float(cells.total_usd[h]),
        )
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
