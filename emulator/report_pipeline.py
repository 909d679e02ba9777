"""A pipelined run's local prediction: the plan's own stages priced on this machine's catalog.

The report's "predicted here" column of a pipelined plan is the pipelined model's
(provisioner/pipeline_model.py run_figures, as a Plan by pipeline_plans.pipelined_plan), not a
one-stage plan of the same worker count: each stage keeps its blocks, the micro-batches M,
the replicas r and the sync route, at the memory its worker really ran with (its cores here as
memory), under the run's invocation limit, margin, iteration cap and iterations.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from emulator.records import WorkerState
from emulator.report_stages import link_terms_s
from functions.terms import straggler_index
from provisioner.catalog import Catalog
from provisioner.pipeline_model import (
    RunShape,
    SyncRoute,
    run_figures,
    stage_figures,
)
from provisioner.pipeline_plan import Stage
from provisioner.pipeline_plans import pipelined_plan
from provisioner.pipeline_search import PipelineCandidate, StageChoice
from provisioner.plan import Plan
from provisioner.planner import Infeasible, RunRules, run_catalog
from provisioner.profile import WorkloadProfile
from provisioner.space import Limits


def local_route(plan: Plan, ps_type: str) -> SyncRoute:
    """The plan's sync route with its PS shards on the local catalog's PS type `ps_type`."""
    if plan.sync == "s3":
        return SyncRoute("s3", reducers=plan.reducers)
    return SyncRoute("ps", ps_type=ps_type, ps_count=plan.ps_count)


def stage_choice(
    profile: WorkloadProfile,
    catalog: Catalog,
    plan: Plan,
    stage: Stage,
    route: SyncRoute,
    memory_mb: int,
) -> StageChoice:
    """One stage of the plan at `memory_mb` on `catalog`: its slot (compute and boundary of one
    micro-batch), its sync per iteration and its memory need, as the search prices them
    (pipeline_model.stage_figures)."""
    assert plan.pipeline is not None
    f = stage_figures(
        profile, catalog, plan.arch, route, plan.n_workers, plan.pipeline.micro_batches,
        plan.training.local_batch, stage.first_block, stage.stop_block, memory_mb,
    )  # fmt: skip
    return StageChoice(
        stage.first_block, stage.stop_block, memory_mb, f.compute_s + f.boundary_s, f.sync_s,
        f.compute_s, f.boundary_s, f.need_mb,
    )  # fmt: skip


def predict_local_pipelined(
    profile: WorkloadProfile,
    catalog: Catalog,
    plan: Plan,
    rules: RunRules,
    stage_memory_mb: list[int],
    ps_type: str,
) -> Plan:
    """The pipelined plan's run predicted on `catalog` with stage s at `stage_memory_mb[s]`
    (Infeasible where the model says it cannot run so)."""
    assert plan.pipeline is not None
    pipe, r, b_l = plan.pipeline, plan.n_workers, plan.training.local_batch
    if pipe.stages[-1].stop_block != len(profile.blocks):
        raise ValueError(
            f"the pipelined model needs the plan's {pipe.stages[-1].stop_block} blocks in the "
            f"profile, and profile {profile.name!r} declares {len(profile.blocks)}; accepted: "
            "its profile with blocks (--workload, profiles/README.md)"
        )
    k = plan.training.iterations if rules.iterations is None else rules.iterations
    # one epoch of k iterations of r·b_l samples (the dataset's bytes, hence load, unchanged)
    profile = replace(profile, epochs=1, dataset_samples=k * r * max(b_l, 1))
    catalog = run_catalog(catalog, rules)
    route = local_route(plan, ps_type)
    stages = tuple(
        stage_choice(profile, catalog, plan, stage, route, mem)
        for stage, mem in zip(pipe.stages, stage_memory_mb, strict=True)
    )
    price = catalog.arch(plan.arch).usd_per_gb_s
    ps_price = catalog.ps_type(route.ps_type).usd_per_hour if route.ps_type else 0.0
    shape = RunShape(len(stages), r, pipe.micro_batches, k, price, route, ps_price)
    max_slot = max(s.slot_s for s in stages)
    max_sync = max(s.sync_s for s in stages)
    figures = run_figures(
        profile, catalog, shape, max_slot, max_sync, sum(s.memory_mb for s in stages)
    )
    if not np.isfinite(figures.total_s):
        raise Infeasible(
            f"the pipelined plan's {len(stages)} stages cannot run on catalog {catalog.name}"
        )
    candidate = PipelineCandidate(plan.arch, route, r, pipe.micro_batches, b_l, stages, figures)
    return pipelined_plan(
        profile, catalog, candidate, plan.goal, Limits(), plan.job, (), pipe.reason
    )


# What the top table's compute and communication mean for a pipelined plan, said beside it.
TERMS_NOTE = (
    "; pipelined terms: predicted compute is the slowest stage's M + S − 1 slots of compute "
    "(the bubble included), communication the rest of the iteration (boundaries, slowest "
    "sync); measured communication is the straggler's sync plus its boundary waits and transfers"
)


def straggler_boundary_s(workers: list[WorkerState], per_worker: list[dict[str, float]]) -> float:
    """The boundary seconds (waits and transfers, report_stages.link_terms_s) of the worker
    whose communication the top table reads: the straggler (functions.terms.straggler_index)."""
    if not workers:
        return 0.0
    links = workers[straggler_index(per_worker)].links
    return sum(link_terms_s(link)["boundary"] for link in links)
