"""The discrete search space: limits, axes, routes and the model evaluated on its cells.

Search space: n = 1 … min(concurrency limit, b_g^max); m on the catalog's grid between the
profile's minimum and the limit; every architecture the catalog, the profile and the limits
allow; every PS type (minus those another type beats on bandwidth *and* price) × 1 … max
shards; and the S3 exchange (sync "s3") with k = 1 … n reducers. A *route* is one
(architecture, PS type, shard count) or one (architecture, S3, k); a cell is (route, n, m), and
an S3 cell with k > n does not exist (n_terms marks it not ok).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from provisioner.catalog import Catalog, PsType
from provisioner.cells import Axis, Cells, NTerms
from provisioner.model import evaluate, n_terms
from provisioner.parse import MAX_WORKERS
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.terms import Arr, training_rate_samples_s

# "any": one architecture per plan (workers and PS alike), the cheaper; "mixed": workers and PS
# may differ, and the deploy builds the image for both (linux/arm64 on an x86 host needs QEMU).
ARCH_CHOICES = ("x86_64", "arm64", "mixed", "any")  # the last is the default
SYNC_CHOICES = ("ps", "s3", "auto")  # auto: the better of the two for the goal, per job
# S3 routes with more reducers than this are held back from a search's first pass and flattened
# only where a lower bound on their cost can still beat the first pass (heldback.held_back).
FIRST_PASS_REDUCERS = 4


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
    # "ps", "s3" or "auto" (SYNC_CHOICES). The library default is λDNN's setting, "ps", which
    # callers written before the S3 exchange assume; the CLI's --sync and the context default
    # to "auto".
    sync: str = "ps"


@dataclass(frozen=True)
class Choice:
    """A cell of the search space."""

    n_workers: int
    memory_mb: int
    arch: str
    ps_type: str  # "" in an S3 cell
    ps_count: int  # 0 in an S3 cell
    sync: str = "ps"
    reducers: int = 0  # k of an S3 cell


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
    core_rate: Arr  # (A,) R(1 vCPU): full single-core speed, for the CPU-quota term
    route_burst_mb_s: Arr  # (R,) bandwidth of one shard while its network credits last
    route_burst_s: Arr  # (R,) seconds of burst of a fresh instance
    route_reducers: Arr  # (R,) S3 routes: k reducers; 0 on a PS route
    notes: tuple[str, ...] = field(default_factory=tuple)

    def s3_route_table(self) -> Arr:
        """(A, N + 1) route index of (arch, k) for the S3 routes; −1 where there is none."""
        table = np.full((len(self.archs), self.n.size + 1), -1, dtype=np.int64)
        s3 = np.nonzero(self.route_reducers > 0)[0]
        table[self.route_arch[s3], self.route_reducers[s3]] = s3
        return table


def concurrency_cap(catalog: Catalog, limits: Limits) -> int:
    """Workers the account can run: the limit, minus the unreserved headroom if reserving."""
    cap = catalog.concurrency_limit
    if limits.max_concurrency is not None:
        cap = limits.max_concurrency
    if limits.reserve_concurrency:
        cap -= catalog.unreserved_concurrency_min
    return min(cap, MAX_WORKERS)


def dominated_ps_types(types: tuple[PsType, ...]) -> set[str]:
    """Types another type beats on bandwidth at every moment and on price (never better).

    The model uses one core per shard, the burst bandwidth for the first burst_s of training and
    the baseline after, so a type with no more bandwidth at any time at no lower price can only
    tie or lose; on exact equality the first name is kept.
    """

    def profile(p: PsType) -> tuple[float, float, float, float]:
        return (p.baseline_gbps, p.burst_mb_s if p.burst_s > 0 else 0.0, p.burst_s, -p.usd_per_hour)

    out: set[str] = set()
    for b in types:
        for a in types:
            if a.name == b.name:
                continue
            burst_ok = b.burst_s == 0 or (a.burst_mb_s >= b.burst_mb_s and a.burst_s >= b.burst_s)
            no_worse = (
                a.baseline_gbps >= b.baseline_gbps and a.usd_per_hour <= b.usd_per_hour and burst_ok
            )
            equal = profile(a) == profile(b)
            if no_worse and (not equal or a.name < b.name):
                out.add(b.name)
                break
    return out


def validate_limits(catalog: Catalog, limits: Limits) -> None:
    """Reject limits that name nothing in the catalog, one line each."""
    if limits.arch not in ARCH_CHOICES:
        raise ValueError(f"arch {limits.arch!r} is not one of {', '.join(ARCH_CHOICES)}")
    if limits.sync not in SYNC_CHOICES:
        raise ValueError(f"sync {limits.sync!r} is not one of {', '.join(SYNC_CHOICES)}")
    if limits.max_memory_mb is not None and limits.max_memory_mb < catalog.memory_min_mb:
        raise ValueError(
            f"max memory {limits.max_memory_mb} MB is below the catalog minimum "
            f"({catalog.memory_min_mb}..{catalog.memory_max_mb} MB accepted)"
        )
    if limits.max_concurrency is not None and limits.max_concurrency < 1:
        raise ValueError(f"max concurrency {limits.max_concurrency} is not a positive integer")
    known = [p.name for p in catalog.ps_types]
    if limits.ps_types is not None and not limits.ps_types:  # e.g. `--ps-types ,,,`
        raise ValueError(f"PS types: none given (accepted: a comma list of {', '.join(known)})")
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
    top = (
        catalog.memory_max_mb
        if limits.max_memory_mb is None
        else min(catalog.memory_max_mb, limits.max_memory_mb)
    )
    mem = np.array([m for m in catalog.memory_grid_mb if profile.min_memory_mb <= m <= top])
    if mem.size == 0:
        raise Infeasible(
            f"no memory size fits: workload {profile.name} needs ≥ {profile.min_memory_mb} MB "
            f"but the limit allows at most {top} MB"
        )
    wanted = [a.arch for a in catalog.architectures]
    if limits.arch not in ("any", "mixed"):
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
    curves = [c for c in map(profile.rate, archs) if c is not None]  # archs are all profiled
    share = vcpu_share(mem, catalog.mb_per_vcpu, catalog.max_vcpu)
    n = np.arange(1, n_max + 1, dtype=np.int64)
    one = np.ones(1)
    rate = np.stack([training_rate_samples_s(c, share, mem) for c in curves])
    core_rate = np.array(
        [training_rate_samples_s(c, one, one * catalog.mb_per_vcpu)[0] for c in curves]
    )
    types = [p for p in catalog.ps_types if limits.ps_types is None or p.name in limits.ps_types]
    mixed = limits.arch == "mixed"
    # Dominance within what a route may pair: per architecture unless the plan may mix them.
    groups = [tuple(types)] if mixed else [tuple(p for p in types if p.arch == a) for a in archs]
    drop = set().union(*map(dominated_ps_types, groups)) if prune else set()
    kept = [p for p in types if p.name not in drop]
    routes = [
        (ai, p, c)
        for ai in range(len(archs))
        for p in kept
        if mixed or p.arch == archs[ai]
        for c in range(1, catalog.ps_max_shards + 1)
    ]
    routes = routes if limits.sync != "s3" else []
    s3_routes = [(ai, k) for ai in range(len(archs)) for k in range(1, n_max + 1)]
    s3_routes = s3_routes if limits.sync != "ps" else []
    if not routes and not s3_routes:
        raise Infeasible(
            f"no PS type of architecture {' or '.join(archs)} is allowed (ps_types "
            f"{', '.join(limits.ps_types or ())}); allow one, or -c arch=mixed"
        )
    notes = (
        (
            f"PS types {', '.join(sorted(drop))} skipped: another type has ≥ baseline "
            f"and burst bandwidth at ≤ price",
        )
        if drop
        else ()
    )
    none = [0.0] * len(s3_routes)  # an S3 route has no PS: no bandwidth, price or burst
    return Space(
        memory_mb=mem,
        n=n,
        archs=archs,
        rate=rate,
        usd_per_gb_s=np.array([catalog.arch(a).usd_per_gb_s for a in archs]),
        route_arch=np.array([r[0] for r in routes] + [r[0] for r in s3_routes], dtype=np.int64),
        route_ps=tuple((r[1].name, r[2]) for r in routes) + (("", 0),) * len(s3_routes),
        route_shard_mb_s=np.array([r[1].baseline_mb_s for r in routes] + none),
        route_count=np.array([r[2] for r in routes] + [0] * len(s3_routes), dtype=np.int64),
        route_usd_per_hour=np.array([r[1].usd_per_hour for r in routes] + none),
        core_rate=core_rate,
        route_burst_mb_s=np.array([r[1].burst_mb_s for r in routes] + none),
        route_burst_s=np.array([r[1].burst_s for r in routes] + none),
        route_reducers=np.array([0] * len(routes) + [k for _, k in s3_routes], dtype=np.int64),
        notes=notes,
    )


def cells_at(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, ni: Arr, j: Arr
) -> Cells:
    """Evaluate the model at broadcastable route, n-index and memory-index arrays."""
    a = space.route_arch[r]
    return evaluate(
        profile,
        catalog,
        Axis(
            memory_mb=space.memory_mb[j],
            rate_samples_s=space.rate[a, j],
            usd_per_gb_s=space.usd_per_gb_s[a],
            n=space.n[ni],
            shard_mb_s=space.route_shard_mb_s[r],
            ps_count=space.route_count[r],
            ps_usd_per_hour=space.route_usd_per_hour[r],
            core_rate_samples_s=space.core_rate[a],
            burst_shard_mb_s=space.route_burst_mb_s[r],
            burst_s=space.route_burst_s[r],
            reducers=space.route_reducers[r],
        ),
    )


def grid(space: Space) -> tuple[Arr, Arr]:
    r = np.arange(len(space.route_ps))[:, None]
    ni = np.arange(space.n.size)[None, :]
    return r, ni


@dataclass(frozen=True)
class Flat:
    """(route, n) pairs of a space, flattened in (route, n) order, n-terms included.

    `flatten` holds back the S3 routes with more than FIRST_PASS_REDUCERS reducers (up to n per
    n: too many pairs to evaluate whole); a solver flattens those of them a lower bound cannot
    rule out (heldback.held_back), unless `s3_held_back` is False. `left_out_n` marks worker
    counts (n-indices) left out of every search, held-back pairs included.
    """

    r: Arr
    ni: Arr
    nt: NTerms
    s3_held_back: bool = True
    left_out_n: Arr = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def without_n(self, n_mask: Arr) -> Flat:
        """The same pairs, the worker counts marked in `n_mask` (over n-indices) left out."""
        left = n_mask if self.left_out_n.size == 0 else self.left_out_n | n_mask
        return replace(self, nt=replace(self.nt, ok=self.nt.ok & ~n_mask[self.ni]), left_out_n=left)

    def only_sync(self, sync: str) -> Flat:
        """The same pairs, those of the other exchange (sync "ps" or "s3") left out."""
        s3 = sync == "s3"
        ok = self.nt.ok & (self.nt.s3 if s3 else ~self.nt.s3)
        return replace(self, nt=replace(self.nt, ok=ok), s3_held_back=self.s3_held_back and s3)


def route_terms(
    profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, ni: Arr
) -> NTerms:
    """The n-terms of routes r at n-indices ni (broadcast together)."""
    a = space.route_arch[r]
    return n_terms(
        profile,
        catalog,
        space.n[ni],
        space.route_shard_mb_s[r],
        space.route_count[r],
        core_rate_samples_s=space.core_rate[a],
        burst_shard_mb_s=space.route_burst_mb_s[r],
        burst_s=space.route_burst_s[r],
        reducers=space.route_reducers[r],
    )


def flat_pairs(profile: WorkloadProfile, catalog: Catalog, space: Space, r: Arr, ni: Arr) -> NTerms:
    """The n-terms of the (route, n-index) pairs r, ni (1-D), flattened."""
    return route_terms(profile, catalog, space, r, ni).flat()


def flatten(profile: WorkloadProfile, catalog: Catalog, space: Space) -> Flat:
    """Every PS pair and the S3 pairs with k ≤ FIRST_PASS_REDUCERS (those with k > n not ok);
    the rest held back. The n-terms are computed on the (route, n) grid, so what depends on n
    only is computed once per n."""
    rows = np.nonzero(space.route_reducers <= FIRST_PASS_REDUCERS)[0][:, None]
    ni = np.arange(space.n.size)[None, :]
    nt = route_terms(profile, catalog, space, rows, ni)
    shape = (rows.shape[0], ni.shape[1])
    return Flat(
        r=np.broadcast_to(rows, shape).ravel(),
        ni=np.broadcast_to(ni, shape).ravel(),
        nt=nt.flat(),
    )


def choice_of(space: Space, r: int, ni: int, j: int) -> Choice:
    ps_type, count = space.route_ps[r]
    k = int(space.route_reducers[r])
    return Choice(
        n_workers=int(space.n[ni]),
        memory_mb=int(space.memory_mb[j]),
        arch=space.archs[int(space.route_arch[r])],
        ps_type=ps_type,
        ps_count=count,
        sync="s3" if k else "ps",
        reducers=k,
    )


def ragged(starts: Arr, stops: Arr) -> tuple[Arr, Arr]:
    """Flat (owner, index) pairs for the inclusive windows [start, stop] of every owner."""
    counts = np.maximum(stops - starts + 1, 0)
    owner = np.repeat(np.arange(starts.size), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, starts[owner] + offsets
