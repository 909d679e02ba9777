"""Re-planning attached to a plan (provisioner/replan_attach.py): a deadline goal's one-stage
plan gets its envelope and worst case, made on the pace-checked catalog with every check
priced; off, a budget and a pipelined plan get none and are the plan made without it."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner import costs
from provisioner.catalog import Catalog
from provisioner.envelope import default_envelope, envelope_worst_case_usd
from provisioner.plan import Goal, Plan
from provisioner.planner import plan_job, predict
from provisioner.replan_attach import (
    catalog_of_plan,
    check_replan_mode,
    plan_envelope,
    plan_with_replan,
)
from provisioner.replan_pace import pace_checked_catalog
from provisioner.space import Choice, Limits
from provisioner.summary import render_plan
from tests.provisioner.conftest import make_profile, small_catalog
from tests.provisioner.test_pipeline_planner import LIMITS as PIPE_LIMITS
from tests.provisioner.test_pipeline_planner import catalog as pipe_catalog
from tests.provisioner.test_pipeline_planner import too_big

DEADLINE_S = 160.0
RATES = [(0.5, 100), (1.0, 180), (2.0, 340)]


def profile():  # type: ignore[no-untyped-def]
    return make_profile(
        model_bytes=400_000, epochs=4, max_global_batch=256,
        training_rate={
            "x86_64": {"points": [{"vcpu_share": s, "samples_per_s": r} for s, r in RATES]}
        },
    )  # fmt: skip


def catalog() -> Catalog:
    return small_catalog(memory_max_mb=4096)


def plan(replan: str, goal: Goal | None = None, limits: Limits | None = None) -> Plan:
    return plan_with_replan(
        profile(), catalog(), goal or Goal(deadline_s=DEADLINE_S), limits or Limits(), "t",
        replan=replan, alternatives=0, frontier_points=0,
    ).plan  # fmt: skip


def test_on_makes_the_plan_on_the_pace_checked_catalog_with_its_envelope() -> None:
    checked = pace_checked_catalog(catalog(), DEADLINE_S)
    on = plan("on")
    made = plan_job(profile(), checked, Goal(deadline_s=DEADLINE_S), Limits(), "t",
                    alternatives=0, frontier_points=0).plan  # fmt: skip
    assert on.replan is not None and not on.replan.scale_down
    env = default_envelope(made, checked, Limits(), min_memory_mb=profile().min_memory_mb)
    assert on.replan.envelope == env
    assert on.replan.worst_case_usd == envelope_worst_case_usd(made, checked, env)
    assert on.replan.worst_case_usd > on.worst_case_usd  # the ceiling costs more than the plan
    assert dataclasses.replace(on, replan=None, notes=made.notes) == made
    assert on.notes[-1].startswith("links cut to at most 16.0s of training (deadline / 10)")
    # a link trains at most a tenth of the deadline, so the checks come that often
    assert on.iterations_per_invocation * on.prediction.iteration_s <= DEADLINE_S / 10


def test_scale_down_is_on_with_scale_down_allowed() -> None:
    down, on = plan("scale-down"), plan("on")
    assert down.replan is not None and down.replan.scale_down
    assert dataclasses.replace(down, replan=on.replan) == on


def test_off_is_byte_identical_to_the_plan_made_without_it() -> None:
    for goal in (Goal(deadline_s=DEADLINE_S), Goal(budget_usd=1.0)):
        alone = plan_job(profile(), catalog(), goal, Limits(), "t", alternatives=0,
                         frontier_points=0)  # fmt: skip
        off = plan_with_replan(profile(), catalog(), goal, Limits(), "t", replan="off",
                               alternatives=0, frontier_points=0)  # fmt: skip
        assert off.to_json() == alone.to_json()
        assert off.plan.replan is None and "replan" not in off.plan.to_dict()


def test_a_budget_goal_gets_none_and_the_plan_made_without_it() -> None:
    goal = Goal(budget_usd=1.0)
    on, off = plan("on", goal), plan("off", goal)
    assert on.replan is None and on.to_json() == off.to_json()


def test_a_pipelined_plan_gets_none_and_is_byte_identical() -> None:
    goal = Goal(deadline_s=4 * 3600.0)
    alone = plan_job(too_big(), pipe_catalog(), goal, PIPE_LIMITS, "big")
    on = plan_with_replan(too_big(), pipe_catalog(), goal, PIPE_LIMITS, "big", replan="on")
    assert on.plan.pipeline is not None and on.plan.replan is None
    assert on.to_json() == alone.to_json()


def test_an_s3_plan_keeps_its_reducers_across_a_switch() -> None:
    s3 = plan("on", limits=Limits(sync="s3"))
    assert s3.sync == "s3" and s3.replan is not None
    # a plan with more reducers than the smaller counts: those counts are left out
    wide = dataclasses.replace(s3, reducers=4)
    env = plan_envelope(wide, catalog(), Limits(sync="s3"), profile().min_memory_mb)
    full = default_envelope(wide, catalog(), Limits(sync="s3"))
    assert any(n < 4 for n in full.worker_counts)
    assert env.worker_counts == tuple(n for n in full.worker_counts if n >= 4)
    assert all(n >= s3.reducers for n in s3.replan.envelope.worker_counts)
    assert s3.n_workers in s3.replan.envelope.worker_counts


def test_an_s3_plan_whose_own_count_is_below_its_reducers_keeps_it() -> None:
    s3 = plan("on", limits=Limits(sync="s3"))
    odd = dataclasses.replace(s3, reducers=s3.n_workers + 1)
    env = plan_envelope(odd, catalog(), Limits(sync="s3"), profile().min_memory_mb)
    assert s3.n_workers in env.worker_counts


def test_no_memory_variant_above_the_users_cap() -> None:
    free = plan("on")
    assert free.replan is not None and max(free.replan.envelope.memory_variants_mb) > (
        free.memory_mb
    )
    capped = plan("on", limits=Limits(max_memory_mb=free.memory_mb))
    assert capped.replan is not None
    assert max(capped.replan.envelope.memory_variants_mb) <= free.memory_mb


def test_each_pace_check_is_priced_as_one_invocation() -> None:
    checked = pace_checked_catalog(catalog(), DEADLINE_S)
    on = plan("on")
    choice = Choice(on.n_workers, on.memory_mb, on.arch, on.ps_type, on.ps_count, on.sync,
                    on.reducers)  # fmt: skip
    # the same configuration with the same links, no pace function invoked
    capped = dataclasses.replace(
        checked, max_link_s=0.0, max_iterations_per_invocation=on.iterations_per_invocation
    )
    paced, same = predict(profile(), checked, choice), predict(profile(), capped, choice)
    checks = on.invocations_per_worker
    assert int(same.invocations[0]) == int(paced.invocations[0]) == checks > 1
    gb_s = costs.PACE_CHECK_MB / 1024.0 * costs.PACE_CHECK_BILLED_S * checks
    price = checked.arch(on.arch).usd_per_gb_s
    assert float(paced.requests_usd[0] - same.requests_usd[0]) == pytest.approx(
        checks * checked.usd_per_request)  # fmt: skip
    assert float(paced.lambda_usd[0] - same.lambda_usd[0]) == pytest.approx(gb_s * price)
    assert float(paced.total_s[0]) == pytest.approx(float(same.total_s[0]))
    assert on.cost.total_usd == pytest.approx(float(paced.total_usd[0]))


def test_where_the_checks_leave_no_plan_it_runs_as_planned_and_says_so(monkeypatch) -> None:
    import provisioner.replan_attach as attach

    # links that train no whole iteration: no pace-checked plan meets the deadline
    monkeypatch.setattr(attach, "pace_checked_catalog",
                        lambda c, d: dataclasses.replace(c, max_link_s=1e-9))  # fmt: skip
    on, off = plan("on"), plan("off")
    assert on.replan is None
    assert dataclasses.replace(on, notes=off.notes) == off
    assert on.notes[-1] == ("re-planning off: with links cut for pace checks no plan meets the "
                            "deadline; the plan runs as it is")  # fmt: skip


def test_the_summary_states_the_envelope_and_the_worst_case() -> None:
    on, off = plan("on"), plan("off")
    assert on.replan is not None
    env = on.replan.envelope
    text = render_plan(on)
    counts = ", ".join(map(str, env.worker_counts))
    assert f"up to {env.max_workers} workers ({counts})" in text
    assert ", ".join(map(str, env.memory_variants_mb)) + " MB" in text
    assert "if every re-plan goes to the ceiling" in text
    assert "re-planning" not in render_plan(off)


@pytest.mark.parametrize("mode", ["", "ON", "maybe", "scale_down"])
def test_a_mode_that_is_not_one_is_refused_naming_it(mode: str) -> None:
    with pytest.raises(ValueError, match=f"replan {mode!r} is not accepted; use on"):
        check_replan_mode(mode)


def test_the_catalog_a_plan_was_made_on_is_the_pace_checked_one_when_it_replans() -> None:
    on, off = plan("on"), plan("off")
    assert catalog_of_plan(on, catalog()) == pace_checked_catalog(catalog(), DEADLINE_S)
    assert catalog_of_plan(off, catalog()) == catalog()


def test_a_larger_ceiling_reaches_more_workers_and_each_doubling_of_memory() -> None:
    two, four = plan("on"), plan_with_replan(
        profile(), catalog(), Goal(deadline_s=DEADLINE_S), Limits(), "t", replan="on",
        alternatives=0, frontier_points=0, ceiling=4,
    ).plan  # fmt: skip
    assert two.replan is not None and four.replan is not None
    assert (two.n_workers, two.memory_mb) == (four.n_workers, four.memory_mb)  # the same plan
    m, n = two.memory_mb, two.n_workers
    assert two.replan.envelope.max_workers <= 2 * n < four.replan.envelope.max_workers <= 4 * n
    more = set(four.replan.envelope.memory_variants_mb) - set(
        two.replan.envelope.memory_variants_mb
    )
    assert more == {min(4 * m, catalog().memory_max_mb)}  # on the grid, within the catalog
    assert four.replan.worst_case_usd > two.replan.worst_case_usd
    with pytest.raises(ValueError, match="replan ceiling 0 is not accepted; use an integer"):
        plan_with_replan(profile(), catalog(), Goal(deadline_s=DEADLINE_S), Limits(), "t",
                         replan="on", ceiling=0)  # fmt: skip
