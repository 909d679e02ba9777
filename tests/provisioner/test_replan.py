"""Re-planning at a link boundary, driven by progress figures the test sets (no clock is read).

The workload is compute-bound (a 0.4 MB model) on a small catalog whose iteration cap chains the
run in ten links of 32 iterations, so a boundary falls every tenth of the run. A run "at pace s"
measured its compute and exchange s times the plan's; its elapsed time is what the plan predicts
for the links done at that pace.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from provisioner import Goal, Limits, plan_job
from provisioner.catalog import Catalog
from provisioner.envelope import default_envelope
from provisioner.plan import Plan
from provisioner.profile import WorkloadProfile
from provisioner.replan import KEEP, SWITCH, decide, figures_after
from provisioner.replan_pace import AHEAD, BEHIND, ON_TRACK, Progress
from provisioner.replan_search import fastest_within
from provisioner.replan_spec import Envelope
from tests.provisioner.conftest import make_profile, small_catalog

DEADLINE_S = 160.0
RATES = [(0.5, 100), (1.0, 180), (2.0, 340)]


def replan_profile(rates: list[tuple[float, float]], **extra: object) -> WorkloadProfile:
    """The re-planning tests' workload: a small model whose rate rises with its share."""
    return make_profile(
        model_bytes=400_000,
        epochs=4,
        max_global_batch=256,
        training_rate={
            "x86_64": {"points": [{"vcpu_share": s, "samples_per_s": r} for s, r in rates]}
        },
        **extra,
    )


@pytest.fixture(scope="module")
def case() -> tuple[WorkloadProfile, Catalog, Plan, Envelope]:
    profile = replan_profile(RATES)
    catalog = dataclasses.replace(
        small_catalog(memory_max_mb=4096), max_iterations_per_invocation=32
    )
    plan = plan_job(
        profile, catalog, Goal(deadline_s=DEADLINE_S), Limits(), "t", frontier_points=0,
        alternatives=0,
    ).plan  # fmt: skip
    envelope = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    return profile, catalog, plan, envelope


def link_overheads_s(plan: Plan, catalog: Catalog) -> tuple[float, float]:
    """(start-up + load, checkpoint) of one link as the plan predicts them."""
    p, links = plan.prediction, plan.invocations_per_worker
    overhead = p.startup_s + p.load_s
    checkpoint = (p.chaining_s - (links - 1) * (catalog.restart_s + overhead)) / links
    return overhead, checkpoint


def at_pace(plan: Plan, catalog: Catalog, links: int, pace: float) -> Progress:
    """The progress after `links` links whose compute and exchange took `pace` × the plan's."""
    p = plan.prediction
    overhead, checkpoint = link_overheads_s(plan, catalog)
    iteration = p.compute_per_iteration_s + p.exchange_per_iteration_s
    periodic = p.iteration_s - iteration
    per_link = plan.iterations_per_invocation
    link_s = catalog.restart_s + overhead + per_link * (pace * iteration + periodic) + checkpoint
    return Progress(
        iterations_done=links * per_link,
        elapsed_s=p.setup_s + p.launch_s - catalog.restart_s + links * link_s,
        links_done=links,
        compute_per_iteration_s=pace * p.compute_per_iteration_s,
        exchange_per_iteration_s=pace * p.exchange_per_iteration_s,
        startup_per_link_s=p.startup_s,
        load_per_link_s=p.load_s,
        checkpoint_per_link_s=checkpoint,
        gap_per_link_s=catalog.restart_s,
    )


def test_the_case_chains_ten_links_and_doubles_its_workers_at_most(case) -> None:
    _, _, plan, envelope = case
    assert plan.invocations_per_worker == 10 and plan.iterations_per_invocation == 32
    assert envelope.max_workers == 2 * plan.n_workers
    assert all(plan.training.global_batch % n == 0 for n in envelope.worker_counts)
    assert plan.memory_mb in envelope.memory_variants_mb


def test_at_the_predicted_pace_the_run_is_on_track_and_keeps_its_plan(case) -> None:
    profile, catalog, plan, envelope = case
    progress = at_pace(plan, catalog, 3, 1.0)
    d = decide(plan, profile, catalog, progress, envelope, scale_down=True)
    assert d.pace.status == ON_TRACK and d.action == KEEP and d.plan is None
    assert d.pace.pace_ratio == pytest.approx(1.0)
    # the projection at the plan's own pace lands on the plan's own total
    assert d.pace.projected_finish_s == pytest.approx(plan.prediction.total_s, rel=1e-9)
    assert d.keep_s + progress.elapsed_s == pytest.approx(plan.prediction.total_s, rel=1e-3)
    assert d.meets_deadline
    assert d.story.startswith("link 3: pace 1.00× the plan's; keep ")


def test_one_and_a_half_times_slower_replans_to_meet_the_deadline(case) -> None:
    profile, catalog, plan, envelope = case
    progress = at_pace(plan, catalog, 2, 1.5)
    d = decide(plan, profile, catalog, progress, envelope)
    assert d.pace.status == BEHIND and d.pace.projected_finish_s > DEADLINE_S
    assert d.action == SWITCH and d.plan is not None and d.meets_deadline
    new = d.plan
    assert progress.elapsed_s + d.new_s <= DEADLINE_S
    assert d.new_s < d.keep_s
    # within the envelope, more workers or more memory, the same global batch
    assert new.n_workers in envelope.worker_counts
    assert new.memory_mb in envelope.memory_variants_mb
    assert (new.n_workers, new.memory_mb) > (plan.n_workers, plan.memory_mb)
    assert new.n_workers * new.training.local_batch == plan.training.global_batch
    assert new.training.global_batch == plan.training.global_batch
    assert new.training.iterations == plan.training.iterations - progress.iterations_done
    assert d.resume_iteration == progress.iterations_done
    assert (new.arch, new.sync, new.ps_type, new.ps_count) == (
        plan.arch, plan.sync, plan.ps_type, plan.ps_count)  # fmt: skip
    # the story: the link, the pace, from what to what, the cost impact and the finish
    assert d.story.startswith(
        f"link 2: pace 1.50× the plan's; {plan.n_workers} × {plan.memory_mb} MB → "
        f"{new.n_workers} × {new.memory_mb} MB, +$"
    )
    assert d.story.endswith(f"of {DEADLINE_S:.1f} s")


def test_a_re_plan_that_would_run_past_the_runs_link_bound_is_not_taken(case) -> None:
    """The switch 1.5× slower takes the new plan's links; with fewer links left under the
    run's bound than it needs, the state machine would fail the run before it ends: keep."""
    profile, catalog, plan, envelope = case
    progress = at_pace(plan, catalog, 2, 1.5)
    switch = decide(plan, profile, catalog, progress, envelope)
    assert switch.action == SWITCH and switch.plan is not None
    links = switch.plan.invocations_per_worker
    fits = decide(plan, profile, catalog, progress, envelope, links_left=links)
    assert fits.action == SWITCH and fits.plan == switch.plan
    short = decide(plan, profile, catalog, progress, envelope, links_left=links - 1)
    assert short.action == KEEP and short.plan is None


def test_behind_beyond_the_envelope_says_so_and_takes_the_fastest(case) -> None:
    profile, catalog, plan, envelope = case
    d = decide(plan, profile, catalog, at_pace(plan, catalog, 2, 4.0), envelope)
    assert d.pace.status == BEHIND
    assert d.action == SWITCH and not d.meets_deadline and d.plan is not None
    assert d.new_s < d.keep_s
    assert (d.plan.n_workers, d.plan.memory_mb) == (
        envelope.max_workers, max(envelope.memory_variants_mb))  # fmt: skip


def test_the_fastest_within_the_envelope_is_at_its_ceiling_for_compute_bound_work(case) -> None:
    profile, catalog, plan, envelope = case
    choice = fastest_within(profile, catalog, plan, envelope)
    assert choice is not None
    assert (choice.n_workers, choice.memory_mb) == (
        envelope.max_workers, max(envelope.memory_variants_mb))  # fmt: skip


def test_well_ahead_keeps_the_plan_unless_scale_down_is_on(case) -> None:
    profile, catalog, plan, envelope = case
    progress = at_pace(plan, catalog, 2, 0.5)
    off = decide(plan, profile, catalog, progress, envelope)
    assert off.pace.status == AHEAD and off.action == KEEP and off.meets_deadline
    on = decide(plan, profile, catalog, progress, envelope, scale_down=True)
    assert on.action == SWITCH and on.plan is not None and on.meets_deadline
    assert on.new_usd < on.keep_usd  # cheaper once the switch is paid
    assert progress.elapsed_s + on.new_s <= DEADLINE_S
    assert on.plan.n_workers * on.plan.training.local_batch == plan.training.global_batch
    assert "-$" in on.story


def test_a_pace_behind_the_plan_but_within_the_deadline_keeps_it(case) -> None:
    profile, catalog, plan, envelope = case
    loose = dataclasses.replace(plan, goal=dataclasses.replace(plan.goal, deadline_s=1000.0))
    d = decide(loose, profile, catalog, at_pace(plan, catalog, 2, 1.5), envelope)
    assert d.pace.status == ON_TRACK and d.action == KEEP and d.meets_deadline


def test_an_s3_exchange_plan_replans_on_the_s3_exchange(case) -> None:
    profile, catalog, _, _ = case
    plan = plan_job(
        profile, catalog, Goal(deadline_s=300.0), Limits(sync="s3"), "t", frontier_points=0,
        alternatives=0,
    ).plan  # fmt: skip
    envelope = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    assert plan.sync == "s3"
    progress = at_pace(plan, catalog, 2, 1.5)
    d = decide(plan, profile, catalog, progress, envelope)
    assert d.pace.status == BEHIND and d.action == SWITCH and d.meets_deadline
    assert d.plan is not None and d.plan.sync == "s3" and d.plan.ps_count == 0
    assert 1 <= d.plan.reducers <= d.plan.n_workers
    assert d.plan.n_workers * d.plan.training.local_batch == plan.training.global_batch
    assert progress.elapsed_s + d.new_s <= 300.0


def test_a_budget_plan_has_no_deadline_to_fall_behind(case) -> None:
    profile, catalog, plan, envelope = case
    budget = dataclasses.replace(plan, goal=Goal(budget_usd=1.0))
    d = decide(budget, profile, catalog, at_pace(plan, catalog, 2, 3.0), envelope)
    assert d.pace.status == ON_TRACK and d.action == KEEP
    assert " of " not in d.story  # no deadline to finish within


def test_after_a_switch_the_new_plan_at_its_own_pace_is_on_track_for_the_same_deadline(
    case,
) -> None:
    profile, catalog, plan, envelope = case
    progress = at_pace(plan, catalog, 2, 1.5)
    first = decide(plan, profile, catalog, progress, envelope)
    assert first.action == SWITCH and first.plan is not None
    new = first.plan
    # the new plan's deadline is what was left of the run's, its reserve the one left + the switch
    assert new.goal.deadline_s == pytest.approx(DEADLINE_S - progress.elapsed_s)
    assert new.goal.planning_deadline_s == pytest.approx(
        first.pace.target_s - progress.elapsed_s - (first.new_s - new.prediction.total_s)
    )
    # the next check: the figures the new plan was made from, the progress since the switch
    seg_profile, seg_catalog = figures_after(profile, catalog, first)
    seg_envelope = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    later = at_pace(new, seg_catalog, 3, 1.0)
    second = decide(new, seg_profile, seg_catalog, later, seg_envelope)
    assert second.pace.pace_ratio == pytest.approx(1.0)
    assert second.pace.status == ON_TRACK and second.action == KEEP and second.meets_deadline
    # the rest of the new plan at its own pace lands on its own predicted total
    assert later.elapsed_s + second.keep_s == pytest.approx(new.prediction.total_s, rel=1e-3)


def test_a_pipelined_plan_is_refused_in_one_line(case) -> None:
    profile, catalog, plan, envelope = case
    piped = dataclasses.replace(plan, pipeline=SimpleNamespace(stages=(0, 1)))
    with pytest.raises(ValueError, match=r"^plan 't' is pipelined \(2 stages\); re-planning"):
        decide(piped, profile, catalog, at_pace(plan, catalog, 2, 1.5), envelope)
