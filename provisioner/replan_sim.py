"""A run played on the model, a platform `slowdown` times slower than the catalog in compute and
exchange (on shared cores: in cores per MB), checked at every link boundary: what re-planning
would do, before any emulator run.

The truth of a segment (the plan as it is, or a re-plan's) is the model at the slower figures;
its boundaries fall after each of its links but the last, and each check reads the truth's own
figures as a run's link results would give them. A switch ends the segment at its boundary (its
cost counted pro rata its iterations: an estimate) and pays the switch's time and PS; the next
segment's progress is counted from the switch, as `decide` expects after one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from provisioner import local_machine
from provisioner.catalog import Catalog
from provisioner.plan import Goal, Plan
from provisioner.planner import build_plan
from provisioner.profile import WorkloadProfile
from provisioner.replan import SWITCH, switch_s, switch_usd
from provisioner.replan_figures import (
    Factors,
    corrected_catalog,
    corrected_profile,
    remaining_profile,
)
from provisioner.replan_pace import Progress
from provisioner.replan_search import plan_choice
from provisioner.replan_spec import Envelope, ReplanSpec
from provisioner.replan_step import check, figures_of
from provisioner.space import Limits


@dataclass(frozen=True)
class SimRun:
    """The played run: its finish and cost, whether it met the deadline, its re-plan stories."""

    finish_s: float
    cost_usd: float
    met: bool | None  # None without a deadline
    stories: tuple[str, ...]


def _truth(
    profile: WorkloadProfile, catalog: Catalog, plan0: Plan, seg: Plan, slow: Factors, first: bool
) -> Plan:
    """The segment `seg` as it runs on the slower platform (the first pays the run's set-up)."""
    left = seg.training.iterations
    cat = corrected_catalog(catalog, slow)
    if first:
        cat = replace(cat, endpoint_ready_s=catalog.endpoint_ready_s, ps_start_s=catalog.ps_start_s,
                      ps_min_billed_s=catalog.ps_min_billed_s)  # fmt: skip
    prof = corrected_profile(remaining_profile(profile, plan0, left), slow)
    return build_plan(prof, cat, plan_choice(seg), Goal(), Limits(arch=seg.arch, sync=seg.sync),
                      seg.job)  # fmt: skip


def _boundary(truth: Plan, catalog: Catalog, links: int, since_s: float) -> Progress:
    """The truth's progress after `links` links (`since_s`: time already in this segment)."""
    p, n_links = truth.prediction, truth.invocations_per_worker
    overhead = p.startup_s + p.load_s
    checkpoint = (p.chaining_s - (n_links - 1) * (catalog.restart_s + overhead)) / n_links
    per = truth.iterations_per_invocation
    link_s = catalog.restart_s + overhead + per * p.iteration_s + checkpoint
    return Progress(
        iterations_done=links * per,
        elapsed_s=since_s + p.setup_s + p.launch_s - catalog.restart_s + links * link_s,
        links_done=links,
        compute_per_iteration_s=p.compute_per_iteration_s,
        exchange_per_iteration_s=p.exchange_per_iteration_s,
        startup_per_link_s=p.startup_s,
        load_per_link_s=p.load_s,
        checkpoint_per_link_s=checkpoint,
        gap_per_link_s=catalog.restart_s,
    )


def _slower(catalog: Catalog, slowdown: float) -> Factors:
    """The slower platform: on shared cores (the local machine) `slowdown` × fewer cores per MB,
    as a run at cpu scale 1 / slowdown has (its steps and its exchange's CPU alike); on AWS the
    compute and the exchange `slowdown` × slower."""
    if local_machine.applies(catalog):
        return Factors(cpu=slowdown)
    return Factors(compute=slowdown, exchange=slowdown)


def simulate(
    plan: Plan, profile: WorkloadProfile, catalog: Catalog, envelope: Envelope, slowdown: float,
    *, replan: bool = True, scale_down: bool = False,
) -> SimRun:  # fmt: skip
    """Play `plan` on a platform `slowdown` × slower in compute and exchange, re-planning at its
    boundaries (or not: `replan` False runs the plan as it is)."""
    if plan.replan is None:
        plan = replace(plan, replan=ReplanSpec(envelope, 0.0, scale_down))
    else:
        plan = replace(plan, replan=replace(plan.replan, envelope=envelope, scale_down=scale_down))
    slow = _slower(catalog, slowdown)
    seg, factors, first = plan, None, True
    spent_s, spent_usd, since_s, stories = 0.0, 0.0, 0.0, []
    while True:
        truth = _truth(profile, catalog, plan, seg, slow, first)
        switched = False
        for links in range(1, truth.invocations_per_worker if replan else 1):
            progress = _boundary(truth, corrected_catalog(catalog, slow), links, since_s)
            d, after = check(seg, profile, catalog, factors, progress, plan)
            if d.action != SWITCH or d.plan is None:
                continue
            share = progress.iterations_done / truth.training.iterations
            sw_s = switch_s(figures_of(profile, catalog, after)[1], 0.0)
            spent_s += progress.elapsed_s - since_s + sw_s
            spent_usd += share * truth.cost.total_usd + switch_usd(seg, catalog, sw_s)
            stories.append(d.story)
            seg, factors, first, since_s, switched = d.plan, after, False, sw_s, True
            break
        if not switched:
            finish = spent_s + truth.prediction.total_s
            cost = spent_usd + truth.cost.total_usd
            deadline = plan.goal.deadline_s
            met = None if deadline is None else finish <= deadline
            return SimRun(finish_s=finish, cost_usd=cost, met=met, stories=tuple(stories))
