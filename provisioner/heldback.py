"""The S3 pairs a search holds back from its first pass, and the bound that lets them in.

S3 routes have k ≤ n reducers: k goes up to n, so the pairs with many reducers are held back
(space.flatten) and flattened only where a closed-form lower bound on their cost (the
exchange's requests, k·Q, plus the Lambda GB-s of the exchange alone at the smallest memory,
P·(A + C/k)) fits under the first pass's best cost (or the budget) and a lower bound on their
time (k iterations of the exchange at the top memory) under the deadline.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from provisioner.catalog import Catalog
from provisioner.cells import NTerms
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.s3exchange import s3_exchange_requests, s3_latency_s, s3_reduce_mb_s
from provisioner.space import FIRST_PASS_REDUCERS, Flat, Space, flat_pairs, ragged
from provisioner.terms import iterations, local_batch, s3_bandwidth_mb_s

# held-back reducer counts, searched window by window so a cheap window can rule out the rest
HELD_BACK_WINDOWS = ((FIRST_PASS_REDUCERS + 1, 16), (17, 64), (65, 256), (257, 1 << 62))


def held_back(
    profile: WorkloadProfile,
    catalog: Catalog,
    space: Space,
    flat: Flat,
    max_usd: float,
    max_s: float,
    window: tuple[int, int] = (FIRST_PASS_REDUCERS + 1, 1 << 62),
) -> Flat | None:
    """The held-back S3 pairs with k in `window` that may cost ≤ max_usd within max_s.

    Per (arch, n), with Q the exchange's request charges per reducer over the run, P the Lambda
    price of n workers at the smallest memory for k_iter iterations, and A + C/k a floor on one
    iteration's billed time (start-up spread over the iterations, the compute at the fastest rate
    of any memory, one exchange at the top memory: the fastest), cost ≥ Q·k + P·(A + C/k) and
    T ≥ k_iter·(A + C/k): both hold on an interval of k, found in closed form. None if no pair is
    left.
    """
    if not flat.s3_held_back or not np.any(space.route_reducers >= window[0]):
        return None
    table = space.s3_route_table()
    n = space.n.astype(np.float64)
    model_mb = profile.model_bytes / 1e6
    b_l = local_batch(space.n, profile.profiled_local_batch, profile.max_global_batch)
    k_iter = iterations(profile.dataset_samples, profile.epochs, space.n * b_l).astype(np.float64)
    top = space.memory_mb[-1:]
    bw = s3_bandwidth_mb_s(
        top, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    reduce = s3_reduce_mb_s(
        profile.ps_aggregation_mb_s_per_core,
        vcpu_share(top, catalog.mb_per_vcpu, catalog.max_vcpu),
    )
    # s3exchange.s3_communication_s at the top memory, split into A (per pair) and C/k
    put_bw = bw if catalog.s3_put_mb_s is None else catalog.s3_put_mb_s
    fastest_rate = max(float(np.max(space.rate)), float(np.max(space.core_rate)))
    with np.errstate(divide="ignore"):  # no rate at all: a_s = inf, no pair can run
        a_s = (
            model_mb / bw
            + model_mb / put_bw
            + s3_latency_s(catalog.s3_request_s, catalog.put_latency_s)
            + b_l / fastest_rate
            + profile.startup_s / np.maximum(k_iter, 1.0)
        )
    c_s = (n / bw + 2.0 / put_bw) * model_mb + n * model_mb / reduce
    # The GETs that find their object only: the ones that find nothing yet (s3_exchange_misses)
    # are never negative and only add to a cell's cost, so leaving them out keeps q, and the
    # bound on k below, a true lower bound.
    puts, gets = s3_exchange_requests(n, np.ones(1))
    q = k_iter * (catalog.s3_usd_per_put * puts + catalog.s3_usd_per_get * gets)
    wide = 1.0 + 1e-6  # bounds widened so float rounding never drops a pair that could win
    lo = np.full((len(space.archs), n.size), float(window[0]))
    hi = np.minimum(np.broadcast_to(n, lo.shape), float(window[1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        room = max_s * wide - k_iter * a_s  # time bound: k ≥ k_iter·C / room
        lo = np.maximum(lo, np.where(room > 0, k_iter * c_s / room, np.inf))
        p = space.usd_per_gb_s[:, None] * space.memory_mb[0] / 1024.0 * n * k_iter
        b = max_usd * wide - p * a_s  # cost bound: q·k² − b·k + p·C ≤ 0
        disc = b * b - 4.0 * q * p * c_s
        root = np.sqrt(np.maximum(disc, 0.0))
        fits = (b > 0) & (disc >= 0)
        k_lo = np.where(q > 0, (b - root) / (2.0 * q), p * c_s / b)
        k_hi = np.where(q > 0, (b + root) / (2.0 * q), np.inf)
        if math.isfinite(max_usd):  # no incumbent yet: no cost bound
            lo = np.where(fits, np.maximum(lo, k_lo), np.inf)
            hi = np.where(fits, np.minimum(hi, k_hi), -np.inf)
    lo_i = np.ceil(np.where(np.isfinite(lo), lo * (1 - 1e-9), n.size + 1.0)).astype(np.int64)
    hi_i = np.floor(np.where(np.isfinite(hi), hi * (1 + 1e-9), 0.0)).astype(np.int64)
    if flat.left_out_n.size:
        hi_i = np.where(flat.left_out_n[None, :], 0, hi_i)
    owner, k = ragged(lo_i.ravel(), hi_i.ravel())
    if owner.size == 0:
        return None
    a, ni = np.divmod(owner, n.size)
    r = table[a, k]
    order = np.lexsort((ni, r))  # (route, n) order, as flatten's
    r, ni = r[order], ni[order]
    nt = flat_pairs(profile, catalog, space, r, ni)
    return Flat(r=r, ni=ni, nt=nt, s3_held_back=False)


def with_held_back(flat: Flat, extra: Flat | None) -> Flat:
    """`flat` with the held-back pairs `extra` added (none: `flat` as it is), held back no more."""
    if extra is None:
        return replace(flat, s3_held_back=False)
    return Flat(
        r=np.concatenate([flat.r, extra.r]),
        ni=np.concatenate([flat.ni, extra.ni]),
        nt=_concat_terms([flat.nt, extra.nt]),
        s3_held_back=False,
        left_out_n=flat.left_out_n,
    )


def _concat_terms(parts: list[NTerms]) -> NTerms:
    fields = NTerms.__dataclass_fields__
    return NTerms(*(np.concatenate([np.asarray(getattr(p, k)) for p in parts]) for k in fields))
