"""The planner's exact search, held to an envelope, for the remaining work of a run.

plan_job searches every n up to the concurrency cap and every memory of the catalog's grid; a
re-plan may take only the envelope's worker counts (divisors of the global batch) and memory
variants, on the plan's architecture, exchange and PS shards. The same space, model and solvers
(provisioner/space.py, search.py) are used, with the space's memory axis cut to the variants and
the flattened (route, n) pairs outside the envelope marked not ok, as `_alternatives` in
planner.py leaves worker counts out.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.profile import WorkloadProfile
from provisioner.replan_spec import Envelope
from provisioner.search import solve_budget, solve_deadline
from provisioner.space import (
    Choice,
    Flat,
    Infeasible,
    Limits,
    Space,
    build_space,
    choice_of,
    flatten,
)


def envelope_limits(plan: Plan, envelope: Envelope) -> Limits:
    """The planner's limits for a re-plan: the ceiling, and the plan's image, exchange and PS."""
    return Limits(
        max_concurrency=envelope.max_workers,
        arch=plan.arch,
        ps_types=(plan.ps_type,) if plan.sync == "ps" else None,
        reserve_concurrency=False,  # the ceiling is already within the account's cap
        sync=plan.sync,
    )


def envelope_space(
    profile: WorkloadProfile, catalog: Catalog, plan: Plan, envelope: Envelope
) -> tuple[Space, Flat]:
    """The search space and its (route, n) pairs within the envelope; Infeasible if empty."""
    space = build_space(profile, catalog, envelope_limits(plan, envelope))
    keep = np.isin(space.memory_mb, envelope.memory_variants_mb)
    if not np.any(keep):
        raise Infeasible(
            f"no memory variant {list(envelope.memory_variants_mb)} MB fits workload "
            f"{profile.name} (at least {profile.min_memory_mb} MB)"
        )
    space = replace(space, memory_mb=space.memory_mb[keep], rate=space.rate[:, keep])
    flat = flatten(profile, catalog, space)
    flat = flat.without_n(~np.isin(space.n, envelope.worker_counts))
    if plan.sync == "ps":  # the run's PS shards stay: the same count
        same = space.route_count[flat.r] == plan.ps_count
        flat = replace(flat, nt=replace(flat.nt, ok=flat.nt.ok & same), s3_held_back=False)
    return space, flat


def cheapest_within(
    profile: WorkloadProfile, catalog: Catalog, plan: Plan, envelope: Envelope, deadline_s: float
) -> Choice | None:
    """The cheapest configuration of the envelope finishing within `deadline_s` (ties: faster),
    None if none does."""
    if not deadline_s > 0:
        return None
    space, flat = envelope_space(profile, catalog, plan, envelope)
    res = solve_deadline(profile, catalog, space, deadline_s, flat)
    if res is None:
        return None
    i, pool = res
    return choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))


def fastest_within(
    profile: WorkloadProfile, catalog: Catalog, plan: Plan, envelope: Envelope
) -> Choice | None:
    """The fastest configuration of the envelope (ties: cheaper); None if none can run."""
    space, flat = envelope_space(profile, catalog, plan, envelope)
    res = solve_budget(profile, catalog, space, math.inf, flat)
    if res is None:
        return None
    i, pool = res
    return choice_of(space, int(pool.r[i]), int(pool.ni[i]), int(pool.j[i]))


def plan_choice(plan: Plan) -> Choice:
    """The configuration a plan runs."""
    return Choice(
        n_workers=plan.n_workers,
        memory_mb=plan.memory_mb,
        arch=plan.arch,
        ps_type=plan.ps_type,
        ps_count=plan.ps_count,
        sync=plan.sync,
        reducers=plan.reducers,
    )
