"""The envelope a deployed app allows a re-plan, and what a run costs if every re-plan goes to it.

A re-plan may change only what needs no new deploy: the worker count, up to a ceiling the data
stack prepares shards for and the Map takes from the re-plan, and the memory among a few
function variants synthesized for the purpose. The architecture (the image), the gradient
exchange and the PS shards (type and count, started by the run) stay the plan's. Worker counts
divide the plan's global batch, so every count trains the same global batch (BSP: the same
trajectory to float tolerance) with a whole local batch.
"""

from __future__ import annotations

from dataclasses import replace

from provisioner import runaway
from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.replan_spec import Envelope
from provisioner.space import Limits, concurrency_cap

# The default ceiling: twice the plan's workers. Doubling n halves each worker's share of the
# global batch, so it recovers a compute pace up to 2× slower than the catalog's; beyond that
# the exchange grows with n and each extra worker buys less, while the worst case (every
# re-plan at the ceiling) grows with the ceiling.
CEILING_FACTOR = 2
MAX_CEILING_FACTOR = 16  # a larger ceiling's worst case dwarfs the plan it protects


def worker_counts(global_batch: int, max_workers: int) -> tuple[int, ...]:
    """Counts n ≤ max_workers that divide the global batch (b_l = b_g / n is whole)."""
    return tuple(n for n in range(1, max_workers + 1) if global_batch % n == 0)


def _on_grid_mb(memory_mb: int, catalog: Catalog) -> int:
    """The catalog grid's size nearest below `memory_mb`, within the catalog's range."""
    top = min(memory_mb, catalog.memory_max_mb)
    steps = (top - catalog.memory_min_mb) // catalog.memory_step_mb
    return catalog.memory_min_mb + max(0, steps) * catalog.memory_step_mb


def check_ceiling_factor(factor: int) -> int:
    """The factor, or ValueError naming it and the accepted range (one line)."""
    whole = isinstance(factor, int) and not isinstance(factor, bool)
    if not (whole and 1 <= factor <= MAX_CEILING_FACTOR):
        raise ValueError(
            f"replan ceiling {factor!r} is not accepted; use an integer from 1 to "
            f"{MAX_CEILING_FACTOR} (workers and memory up to that many times the plan's)"
        )
    return factor


def default_envelope(
    plan: Plan,
    catalog: Catalog,
    limits: Limits | None = None,
    *,
    factor: int = CEILING_FACTOR,
    min_memory_mb: int | None = None,
) -> Envelope:
    """Up to `factor` × n workers within the account's concurrency (the plan's limits) and the
    global batch; memory variants half, once, twice and each doubling up to `factor` × the
    plan's (on the catalog's grid, at least the workload's minimum): more memory recovers a
    slower compute where more workers cannot (the exchange dominates), half lets a run well
    ahead save. ValueError (one line) for a factor outside 1..MAX_CEILING_FACTOR."""
    check_ceiling_factor(factor)
    cap = concurrency_cap(catalog, limits or Limits(reserve_concurrency=plan.reserve_concurrency))
    ceiling = max(plan.n_workers, min(factor * plan.n_workers, cap, plan.training.global_batch))
    low = max(min_memory_mb or catalog.memory_min_mb, catalog.memory_min_mb)
    sizes = {plan.memory_mb}
    times = 2
    while times <= factor:
        sizes.add(_on_grid_mb(times * plan.memory_mb, catalog))
        times *= 2
    half = _on_grid_mb(plan.memory_mb // 2, catalog)
    if half >= low:
        sizes.add(half)
    return Envelope(
        max_workers=ceiling,
        worker_counts=worker_counts(plan.training.global_batch, ceiling),
        memory_variants_mb=tuple(sorted(sizes)),
    )


def envelope_worst_case_usd(plan: Plan, catalog: Catalog, envelope: Envelope) -> float:
    """The plan's runaway worst case (runaway.worst_case_usd: every worker billed for the whole
    execution timeout, every allowed link invoked) with every re-plan at the ceiling: the most
    workers at the largest memory variant. The bounds stay the plan's: a re-plan never extends
    the execution timeout or the links a worker may take."""
    n, m = envelope.max_workers, max(envelope.memory_variants_mb)
    per_gb_s = catalog.arch(plan.arch).usd_per_gb_s
    # the plan's one-worker billed time, from its own Lambda item (λDNN Eq. 10, C = p·m·n·T)
    billed_s = plan.cost.lambda_compute_usd / (per_gb_s * plan.memory_mb / 1024.0 * plan.n_workers)
    scale = (n * m) / (plan.n_workers * plan.memory_mb)
    ceiling_cost = replace(
        plan.cost,
        lambda_compute_usd=plan.cost.lambda_compute_usd * scale,
        # /tmp per worker shrinks with more workers; counted at the plan's size (an upper bound)
        ephemeral_storage_usd=plan.cost.ephemeral_storage_usd * n / plan.n_workers,
    )
    _, timeout_s = runaway.plan_bounds(plan)
    return runaway.worst_case_usd(
        catalog, ceiling_cost, n_workers=n, ps_type=plan.ps_type, ps_count=plan.ps_count,
        billed_s=billed_s, planned_links=plan.invocations_per_worker, timeout_s=timeout_s,
    )  # fmt: skip
