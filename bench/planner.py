"""Planner benchmark: exactness, cost against λDNN's Algorithm 1 and a naive rule, solve time.

Run: `.venv/bin/python -m bench.planner` (writes bench/results/planner.md and planner.png).

For every workload × catalog × deadline:
- ours (both gradient exchanges, PS and S3 with k = 1 … n reducers) on the *reduced* grid (64 MB
  memory steps on lambda-2025, n ≤ 64 on both catalogs) against exhaustive enumeration of that
  grid: the costs must be equal. The full 1 MB grid with n ≤ 1,000 holds ~10^9 cells per goal,
  too many to enumerate; the hypothesis tests cover fine grids with few workers;
- ours on the full grid against λDNN's Algorithm 1 and "naive" (largest memory, smallest n
  meeting the deadline), both with the catalog's default PS type, one shard, x86_64;
- ours against ours held to one exchange ("PS only", "S3 only"): which mode wins where, and what
  choosing saves against always-PS and always-S3.
Deadlines are multiples of the fastest time achievable on the reduced grid, so each is feasible.
Solve times are medians of repeated runs on this machine, with exhaustive enumeration of the
reduced grid timed in the same run as the baseline. The records and the report are in
bench/planner_table.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.planner_table import Row, Timing, render, write_png
from provisioner import Goal, Limits, load_catalog, load_profile
from provisioner.baselines import algorithm1, fixed_route_space, naive
from provisioner.catalog import Catalog
from provisioner.planner import plan_job, predict
from provisioner.profile import WorkloadProfile
from provisioner.search import exhaustive, fastest_cell, solve_deadline
from provisioner.space import Choice, Space, build_space, choice_of

RESULTS = Path(__file__).resolve().parent / "results"
WORKLOADS = ("digits-mlp", "cifar10-resnet18", "paper-cifar10-mobilenetv2")
CATALOGS = ("lambda-2025", "lambda-2020")
FACTORS = (1.1, 1.5, 3.0)  # × the fastest time of ours and of λDNN's setting (two anchors)


def hand_choice(profile: WorkloadProfile, catalog: Catalog) -> Choice:
    """A fixed configuration someone might pick by hand: 16 workers at 3,008 MB (the old
    maximum, or the profile's minimum if larger), one default PS, x86_64 where profiled."""
    arch = "x86_64" if profile.rate("x86_64") is not None else profile.architectures[0]
    memory = min(max(3008, profile.min_memory_mb), catalog.memory_max_mb)
    memory -= (memory - catalog.memory_min_mb) % catalog.memory_step_mb
    return Choice(
        n_workers=min(16, profile.max_global_batch),
        memory_mb=memory,
        arch=arch,
        ps_type=catalog.ps_default_type,
        ps_count=1,
    )


def reduced(catalog: Catalog, step_mb: int) -> Catalog:
    """The catalog on a coarser memory grid (unchanged if its own step is already coarser)."""
    if catalog.memory_step_mb >= step_mb:
        return catalog
    top = catalog.memory_min_mb + (catalog.memory_max_mb - catalog.memory_min_mb) // step_mb * (
        step_mb
    )
    return dataclasses.replace(catalog, memory_step_mb=step_mb, memory_max_mb=top)


AUTO = Limits(sync="auto")


def _ours_choice(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, deadline_s: float
) -> tuple[float, float, Choice | None]:
    space = build_space(profile, catalog, limits)
    res = solve_deadline(profile, catalog, space, deadline_s)
    if res is None:
        return math.inf, math.inf, None
    i, pool = res
    choice = choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))
    return float(pool.total_usd[i]), float(pool.total_s[i]), choice


def _ours(
    profile: WorkloadProfile, catalog: Catalog, limits: Limits, deadline_s: float
) -> tuple[float, float]:
    usd, s, _ = _ours_choice(profile, catalog, limits, deadline_s)
    return usd, s


def compare(
    profile: WorkloadProfile, catalog: Catalog, factors: Sequence[float], step_mb: int, max_n: int
) -> list[Row]:
    """All comparisons for one workload on one catalog."""
    small_cat = reduced(catalog, step_mb)
    # n ≤ max_n on both catalogs: S3 routes (k ≤ n) make the whole lambda-2020 grid too big
    small_lim = Limits(max_concurrency=max_n, sync="auto")
    fast_s, _ = fastest_cell(profile, small_cat, build_space(profile, small_cat, small_lim))
    fixed_s, _ = fastest_cell(profile, catalog, fixed_route_space(profile, catalog, Limits()))
    anchors = sorted({fast_s, max(fast_s, fixed_s)})
    rows = []
    for anchor, factor in ((a, f) for a in anchors for f in factors):
        d = anchor * factor
        want = exhaustive(profile, small_cat, small_lim, Goal(deadline_s=d))
        r_usd, _ = _ours(profile, small_cat, small_lim, d)
        o_usd, o_s, o_choice = _ours_choice(profile, catalog, AUTO, d)
        ps_usd, _ = _ours(profile, catalog, Limits(sync="ps"), d)
        s3_usd, _ = _ours(profile, catalog, Limits(sync="s3"), d)
        fixed = solve_deadline(profile, catalog, fixed_route_space(profile, catalog, Limits()), d)
        f_usd = float(fixed[1].total_usd[fixed[0]]) if fixed else math.inf
        a = algorithm1(profile, catalog, Limits(), d)
        _, n_s, n_usd = naive(profile, catalog, Limits(), d)
        hand = predict(profile, catalog, hand_choice(profile, catalog))
        rows.append(
            Row(
                workload=profile.name,
                catalog=catalog.name,
                factor=factor,
                deadline_s=d,
                anchor="ours" if anchor == fast_s else "λDNN",
                reduced_ours_usd=r_usd,
                reduced_exhaustive_usd=want[2] if want else math.inf,
                ours_usd=o_usd,
                ours_s=o_s,
                fixed_usd=f_usd,
                alg1_usd=a[2] if a else math.inf,
                alg1_s=a[1] if a else math.inf,
                naive_usd=n_usd,
                naive_s=n_s,
                hand_usd=float(hand.total_usd[0]),
                hand_s=float(hand.total_s[0]),
                sync=o_choice.sync if o_choice else "—",
                reducers=o_choice.reducers if o_choice else 0,
                ps_only_usd=ps_usd,
                s3_only_usd=s3_usd,
            )
        )
    return rows


def run_cases(
    workloads: Sequence[str] = WORKLOADS,
    catalogs: Sequence[str] = CATALOGS,
    factors: Sequence[float] = FACTORS,
    step_mb: int = 64,
    max_n: int = 64,
) -> list[Row]:
    """The comparison table over workloads × catalogs × deadline factors."""
    rows: list[Row] = []
    for cat_name in catalogs:
        catalog = load_catalog(cat_name)
        for name in workloads:
            profile = load_profile(name)
            if not set(profile.architectures) & {a.arch for a in catalog.architectures}:
                continue
            rows += compare(profile, catalog, factors, step_mb, max_n)
    return rows


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (imports, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_solver(name: str, factor: float = 2.0, repeats: int = 15) -> Timing:
    """Median solve times on the full lambda-2025 grid (1 MB steps, n ≤ 1,000, all PS, 2 archs)
    for a deadline `factor` × the fastest achievable time."""
    profile, catalog = load_profile(name), load_catalog("lambda-2025")
    space = build_space(profile, catalog, AUTO)
    d = fastest_cell(profile, catalog, space)[0] * factor
    small_cat, small_lim = reduced(catalog, 64), Limits(max_concurrency=64, sync="auto")
    small = build_space(profile, small_cat, small_lim, prune=False)

    def search() -> object:
        return solve_deadline(profile, catalog, build_space(profile, catalog, AUTO), d)

    def full(points: int) -> Callable[[], object]:
        return lambda: plan_job(
            profile, catalog, Goal(deadline_s=d), AUTO, "bench", frontier_points=points
        )

    return Timing(
        workload=name,
        factor=factor,
        cells=_cells(build_space(profile, catalog, AUTO, prune=False)),
        deadline_s=d,
        search_ms=median_ms(search, repeats),
        plan_job_ms=median_ms(full(0), repeats),
        frontier_ms=median_ms(full(12), max(3, repeats // 5)),
        exhaustive_reduced_ms=median_ms(
            lambda: exhaustive(profile, small_cat, small_lim, Goal(deadline_s=d)), 3
        ),
        reduced_cells=_cells(small),
    )


def _cells(space: Space) -> int:
    """Cells of a space: every PS route × n × m, and the S3 routes' k ≤ n only."""
    ps = int(np.count_nonzero(space.route_reducers == 0)) * space.n.size
    s3 = int(np.count_nonzero(space.route_reducers[:, None] <= space.n[None, :])) - ps
    return (ps + s3) * space.memory_mb.size


def main(argv: Sequence[str] | None = None) -> int:
    load_avg = os.getloadavg()[0]
    args = list(sys.argv[1:] if argv is None else argv)
    repeats = 15 if "--quick" not in args else 3
    rows = run_cases()
    timings = [
        time_solver(name, factor, repeats=repeats)
        for name in WORKLOADS
        for factor in (1.1, 2.0, 5.0)
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = render(rows, timings, load_avg)
    (RESULTS / "planner.md").write_text(text, encoding="utf-8")
    write_png(rows, timings, RESULTS / "planner.png")
    print(text)
    return 0 if all(r.exact for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
