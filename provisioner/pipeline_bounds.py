"""Floors and bounds of the pipelined search (provisioner/pipeline_search.py): figures no plan of
a (r, arch, route, M, S) combination, or no completion of a partial label, can beat. Each is a
lower bound on a plan's cost or time, argued where it is built; the search drops what a bound
puts past the best plan so far, and so stays exact.
"""

from __future__ import annotations

import numpy as np

from provisioner.catalog import Catalog
from provisioner.costs import ps_usd
from provisioner.pipeline_model import RunShape, SyncRoute, run_costs
from provisioner.pipeline_tables import Keep, StageTables, cut_floors, range_floors
from provisioner.profile import WorkloadProfile
from provisioner.terms import ephemeral_storage_mb

# Floors are compared against the bar after this relative shave, so that float rounding in a
# floor computed in another order than the plan's own figures can never drop a plan equal to
# the bar (the floors are far from tight: start-up, load and every other cost item are left out).
FLOOR_RTOL = 1e-9


def cut_floor(stage: StageTables, count: int, stages: int, slots: int) -> tuple[float, float]:
    """Without sync (≥ 0, whatever the route): (least Σ_s m_s·iteration in MB·s, least
    iteration in s) over every cut into `stages` stages and their memories: the iteration at
    least the slowest stage's slots·slot and so at least the least such maximum over the cuts
    (range_floors, cut_floors)."""
    syncs = np.zeros((stage.first.size, 1))
    secs = slots * stage.least_slot_s  # range_floors' seconds at sync 0, in O(ranges)
    it_s = float(cut_floors(secs, stage.first, stage.stop, count, stages, add=False)[stages][0])
    mb_s = range_floors(stage, syncs, slots, it_s)[0]
    return float(
        cut_floors(mb_s, stage.first, stage.stop, count, stages, add=True)[stages][0]
    ), it_s


def ps_usd_floor(catalog: Catalog, route: SyncRoute, stages: int, time_s: float) -> float:
    """The PS shards' cost of a run lasting at least `time_s` (costs.ps_usd): S·c instances
    billed the run's time, at least the minimum."""
    if route.sync != "ps":
        return 0.0
    price = catalog.ps_type(route.ps_type).usd_per_hour
    usd = ps_usd(np.array([price]), np.array([stages * route.ps_count]), np.array([time_s]),
                 catalog.ps_min_billed_s)  # fmt: skip
    return float(usd[0])


def other_usd_floor(
    profile: WorkloadProfile, catalog: Catalog, shape: RunShape, time_s: float
) -> float:
    """Every cost item but Lambda compute of a run of `shape` lasting at least `time_s`
    (pipeline_model.run_costs): each item grows with the run's time and billed time (billed ≥
    k·iteration ≥ time_s, the run's time ≥ its billed time), with its links (≥ 1) and with its
    periodic checkpoints (≥ 0); the exchanges' and the boundaries' requests do not depend on
    the stages at all. Lambda compute is left at 0 (memory 0): the caller bounds it."""
    eph = int(
        ephemeral_storage_mb(profile.dataset_bytes, np.array([shape.replicas]),
                             profile.model_bytes, catalog.ephemeral_min_mb)[0]
    )  # fmt: skip
    items = run_costs(catalog, shape, 0, time_s, time_s, 1, shape.iterations + 1, eph)
    return float(sum(items))


def keeper(
    deadline_s: float | None,
    budget_usd: float | None,
    bar: float,
    k: int,
    r: int,
    price: float,
    slots: int,
) -> Keep:
    """The bound a partial label (max slot, max sync, Σ memory so far) must meet, given floors
    on what its remaining stages add (least Σ memory, least Σ m·(slots·slot + sync), least
    slots·slot + sync): its k iterations alone within the deadline (or, for a budget, within
    the bar on time), and its Lambda compute within the bar on cost (or the budget). Placed
    stages are billed at least the label's iteration; the remaining ones at least both it and
    their own (range_floors), so at least the larger of the two floors."""
    usd_per_mb_s = price * r * k / 1024.0 * (1.0 - FLOOR_RTOL)
    k_floor = k * (1.0 - FLOOR_RTOL)

    def keep(slot: float, sync: float, mem: float, rest_mem: float, rest_mb_s: float,
             rest_s: float) -> bool:  # fmt: skip
        it = slots * slot + sync
        floor_s = k_floor * (it if it > rest_s else rest_s)
        later = rest_mem * it
        usd = usd_per_mb_s * (mem * it + (later if later > rest_mb_s else rest_mb_s))
        if deadline_s is not None:
            if floor_s > deadline_s or usd > bar:
                return False
        elif floor_s > bar:
            return False
        return budget_usd is None or usd <= budget_usd

    return keep
