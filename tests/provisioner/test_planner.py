"""Planner behaviour: goals, tie-breaks, limits, infeasibility, alternatives and frontier."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from provisioner import Goal, Infeasible, Limits, load_catalog, load_profile, plan_job
from provisioner.catalog import Catalog
from provisioner.parse import format_duration_s, format_usd
from provisioner.plan import Plan
from provisioner.search import Pool, exhaustive, fastest_cell, goal_order, solve_deadline
from provisioner.space import build_space, dominated_ps_types
from tests.provisioner.conftest import make_profile

RESNET = load_profile("cifar10-resnet18")
DIGITS = load_profile("digits-mlp")


def _plan(profile: object = RESNET, catalog: str = "lambda-2025", **goal: float) -> object:
    return plan_job(
        profile,
        load_catalog(catalog),
        Goal(**goal),
        Limits(),
        "t",  # type: ignore[arg-type]
        frontier_points=0,
    )


def test_deadline_goal_meets_the_deadline_and_tighter_costs_more(catalog_2025: Catalog) -> None:
    loose = plan_job(RESNET, catalog_2025, Goal(deadline_s=7200), Limits(), "t", frontier_points=0)
    tight = plan_job(RESNET, catalog_2025, Goal(deadline_s=1000), Limits(), "t", frontier_points=0)
    assert tight.plan.prediction.total_s <= 1000 < loose.plan.prediction.total_s
    assert tight.plan.cost.total_usd > loose.plan.cost.total_usd


def test_slack_plans_for_the_deadline_less_the_reserve(catalog_2025: Catalog) -> None:
    """deadline=1500 s with 20% slack is the plan for 1200 s, and the goal says what was asked."""

    def plan(**goal: float) -> Plan:
        return plan_job(RESNET, catalog_2025, Goal(**goal), Limits(), "t", frontier_points=0).plan

    held, direct = plan(deadline_s=1500, slack=0.2), plan(deadline_s=1200)
    full = plan(deadline_s=1500)
    assert held.prediction.total_s <= 1200 < full.prediction.total_s
    assert (held.prediction, held.cost) == (direct.prediction, direct.cost)
    assert held.goal == Goal(deadline_s=1500, slack=0.2)
    assert "less 20% slack" in held.notes[0]
    # the fastest plan for cifar10-resnet18 takes 11m15s on its profile
    with pytest.raises(Infeasible, match="deadline 13m20s less 20% slack = 10m40s"):
        plan(deadline_s=800, slack=0.2)
    with pytest.raises(ValueError, match="slack 0.95 is out of range"):
        plan(deadline_s=1000, slack=0.95)


def test_without_a_slack_the_catalog_default_is_held_back(catalog_2025: Catalog) -> None:
    """A platform whose runs land above their predictions (the local catalog's default_slack)
    plans deadline × (1 − default) when the user gives no slack; a given slack, 0 included,
    wins; a budget alone holds nothing back and is no error."""
    noisy = dataclasses.replace(catalog_2025, default_slack=0.2)

    def plan(catalog: Catalog, **goal: float | None) -> Plan:
        return plan_job(RESNET, catalog, Goal(**goal), Limits(), "t", frontier_points=0).plan

    held = plan(noisy, deadline_s=1500)
    assert held.goal == Goal(deadline_s=1500, slack=0.2)
    assert (held.prediction, held.cost) == (plan(catalog_2025, deadline_s=1200).prediction,
                                            plan(catalog_2025, deadline_s=1200).cost)  # fmt: skip
    assert "less 20% slack" in held.notes[0]
    mine = plan(noisy, deadline_s=1500, slack=0.0)
    assert mine.goal.slack == 0.0 and 1200 < mine.prediction.total_s <= 1500
    assert plan(catalog_2025, deadline_s=1500).goal.slack == 0.0  # AWS: nothing measured
    budget = plan(noisy, budget_usd=5.0)
    assert budget.goal == Goal(budget_usd=5.0, slack=0.0)


def test_budget_goal_stays_within_budget_and_more_money_is_faster(catalog_2025: Catalog) -> None:
    cheap = plan_job(RESNET, catalog_2025, Goal(budget_usd=1.5), Limits(), "t", frontier_points=0)
    rich = plan_job(RESNET, catalog_2025, Goal(budget_usd=3.0), Limits(), "t", frontier_points=0)
    assert cheap.plan.cost.total_usd <= 1.5
    assert rich.plan.cost.total_usd <= 3.0
    assert rich.plan.prediction.total_s < cheap.plan.prediction.total_s


def test_both_goals_pick_the_deadline_optimum_when_it_fits(catalog_2025: Catalog) -> None:
    d = plan_job(RESNET, catalog_2025, Goal(deadline_s=1500), Limits(), "t", frontier_points=0)
    both = plan_job(
        RESNET,
        catalog_2025,
        Goal(deadline_s=1500, budget_usd=100),
        Limits(),
        "t",
        frontier_points=0,
    )
    assert both.plan.cost == d.plan.cost
    with pytest.raises(Infeasible, match="no plan meets deadline 25m00s and budget \\$0.0100"):
        plan_job(RESNET, catalog_2025, Goal(deadline_s=1500, budget_usd=0.01), Limits(), "t")


def test_full_one_mb_grid_matches_exhaustive_with_few_workers(catalog_2025: Catalog) -> None:
    """The real 1 MB grid (8,193 memories) with n ≤ 4: long cost windows, many bounded blocks."""
    limits = Limits(max_concurrency=4, arch="x86_64", ps_types=("c5.large", "c6gn.large"))
    space = build_space(RESNET, catalog_2025, limits)
    fast_s, _ = fastest_cell(RESNET, catalog_2025, space)
    for deadline in (fast_s * 1.02, fast_s * 1.5, fast_s * 3, math.inf):
        want = exhaustive(RESNET, catalog_2025, limits, Goal(deadline_s=deadline))
        got = solve_deadline(RESNET, catalog_2025, space, deadline)
        assert want is not None and got is not None
        i, pool = got
        assert (float(pool.total_usd[i]), float(pool.total_s[i])) == (want[2], want[1])


def test_ties_go_to_the_faster_then_smaller_configuration() -> None:
    pool = Pool(
        r=np.array([0, 1, 0, 2]),
        ni=np.array([3, 0, 1, 1]),
        j=np.array([0, 0, 5, 2]),
        total_s=np.array([10.0, 9.0, 9.0, 9.0]),
        total_usd=np.array([1.0, 1.0, 1.0, 2.0]),
    )
    order = goal_order(pool, cost_first=True)
    assert order.tolist() == [1, 2, 0, 3]  # cost, then time, then n-index, then memory
    assert goal_order(pool, cost_first=False).tolist() == [1, 2, 3, 0]  # time, then cost


def test_infeasible_message_names_fastest_time_and_cheapest_cost(catalog_2025: Catalog) -> None:
    space = build_space(RESNET, catalog_2025, Limits())
    fast_s, fast = fastest_cell(RESNET, catalog_2025, space)
    cheap = solve_deadline(RESNET, catalog_2025, space, math.inf)
    assert cheap is not None
    with pytest.raises(Infeasible) as err:
        plan_job(RESNET, catalog_2025, Goal(deadline_s=600), Limits(), "t")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("no plan meets deadline 10m00s for cifar10-resnet18 on lambda-2025")
    assert f"fastest achievable {format_duration_s(fast_s)} (n={fast.n_workers}," in text
    assert f"cheapest achievable {format_usd(float(cheap[1].total_usd[cheap[0]]))}" in text


def test_limits_bound_memory_concurrency_arch_and_ps(catalog_2025: Catalog) -> None:
    limits = Limits(max_memory_mb=3008, max_concurrency=10, arch="x86_64", ps_types=("c5.large",))
    plan = plan_job(
        RESNET, catalog_2025, Goal(deadline_s=6 * 3600), limits, "t", frontier_points=0
    ).plan
    assert plan.memory_mb <= 3008 and plan.n_workers <= 10
    assert plan.arch == "x86_64" and plan.ps_type == "c5.large"
    arm = plan_job(
        RESNET,
        catalog_2025,
        Goal(deadline_s=6 * 3600),
        Limits(arch="arm64"),
        "t",
        frontier_points=0,
    ).plan
    assert arm.arch == "arm64"


def test_reserved_concurrency_keeps_unreserved_headroom(catalog_2025: Catalog) -> None:
    profile = make_profile(max_global_batch=100_000, epochs=200)
    space = build_space(
        profile, catalog_2025, Limits(max_concurrency=150, reserve_concurrency=True)
    )
    assert int(space.n.max()) == 50  # 150 − 100 unreserved
    with pytest.raises(Infeasible, match="no worker count fits"):
        build_space(profile, catalog_2025, Limits(max_concurrency=100, reserve_concurrency=True))


def test_bad_limits_are_one_line_errors(catalog_2025: Catalog) -> None:
    with pytest.raises(ValueError) as err:
        build_space(RESNET, catalog_2025, Limits(max_memory_mb=64))
    assert str(err.value) == (
        "max memory 64 MB is below the catalog minimum (128..10240 MB accepted)"
    )
    with pytest.raises(ValueError) as err:
        build_space(RESNET, catalog_2025, Limits(ps_types=("p4d.24xlarge",)))
    assert str(err.value).startswith(
        "PS type 'p4d.24xlarge' is not in catalog lambda-2025 (accepted: m5.large, c5.large,"
    )
    with pytest.raises(ValueError) as err:
        build_space(RESNET, catalog_2025, Limits(arch="sparc"))
    assert str(err.value) == "arch 'sparc' is not one of x86_64, arm64, mixed, any"
    with pytest.raises(Infeasible, match="no memory size fits: workload cifar10-resnet18 needs"):
        build_space(RESNET, catalog_2025, Limits(max_memory_mb=1024))
    with pytest.raises(Infeasible, match="no architecture fits"):
        build_space(DIGITS, catalog_2025, Limits(arch="arm64"))  # profiled on x86_64 only


def test_old_catalog_is_x86_single_m5_large(catalog_2020: Catalog) -> None:
    plan = plan_job(
        load_profile("paper-cifar10-mobilenetv2"),
        catalog_2020,
        Goal(deadline_s=3600),
        Limits(),
        "t",
        frontier_points=0,
    ).plan
    assert plan.arch == "x86_64" and (plan.ps_type, plan.ps_count) == ("m5.large", 1)
    assert plan.memory_mb % 64 == 0 and plan.memory_mb <= 3008
    assert plan.ephemeral_storage_mb == 512


def test_dominated_ps_types_are_only_pruned_when_no_better(catalog_2025: Catalog) -> None:
    drop = dominated_ps_types(catalog_2025.ps_types)
    assert "m5.large" in drop  # c5.large: same baseline, cheaper
    assert "c5.large" not in drop and "c5n.2xlarge" not in drop
    same = dataclasses.replace(catalog_2025.ps_type("c5.large"), name="zz.large")
    assert dominated_ps_types((catalog_2025.ps_type("c5.large"), same)) == {"zz.large"}


def test_plan_fields_are_consistent(catalog_2025: Catalog) -> None:
    result = plan_job(RESNET, catalog_2025, Goal(deadline_s=3600), Limits(), "job-1")
    p = result.plan
    assert p.invocation_timeout_s == 900 and p.ephemeral_storage_mb >= 512
    assert p.training.global_batch == p.n_workers * p.training.local_batch
    per_inv = p.iterations_per_invocation
    assert p.invocations_per_worker == math.ceil(p.training.iterations / per_inv)
    assert p.vcpu_share == pytest.approx(p.memory_mb / 1769, abs=1e-4)
    pr = p.prediction
    parts = pr.startup_s + pr.load_s + pr.compute_s + pr.communication_s + pr.ps_aggregation_s
    parts += pr.checkpoint_s + pr.setup_s + pr.launch_s  # periodic PS checkpoints, set-up, launch
    assert pr.setup_s == catalog_2025.run_setup_s == 120 + 90  # endpoints, then the PS
    assert pr.total_s == pytest.approx(parts + pr.chaining_s, rel=1e-9)
    c = p.cost
    items = (
        c.lambda_compute_usd
        + c.lambda_requests_usd
        + c.ephemeral_storage_usd
        + c.ps_instances_usd
        + c.step_functions_usd
        + c.s3_requests_usd
        + c.vpc_endpoints_usd
    )
    assert c.vpc_endpoints_usd > 0  # the PS network's interface endpoints are paid for
    assert c.total_usd == pytest.approx(items, rel=1e-12)
    assert result.alternatives and all(
        (a.cost.total_usd, a.prediction.total_s) >= (c.total_usd, pr.total_s)
        for a in result.alternatives
    )
    # Every frontier point is Pareto: time up, cost strictly down; none beats the plan under
    # its own deadline.
    front = result.frontier
    assert len(front) >= 2
    assert all(
        a.total_s < b.total_s and a.total_usd > b.total_usd
        for a, b in zip(front, front[1:], strict=False)
    )
    assert all(f.total_usd >= c.total_usd for f in front if f.total_s <= 3600)


def test_goal_must_have_a_deadline_or_budget(catalog_2025: Catalog) -> None:
    with pytest.raises(ValueError, match="goal: give a deadline, a budget or both"):
        plan_job(RESNET, catalog_2025, Goal(), Limits(), "t")


def test_a_workload_that_cannot_run_says_so(catalog_2025: Catalog) -> None:
    profile = make_profile(
        training_rate={"x86_64": {"points": [{"vcpu_share": 1.0, "samples_per_s": 0.001}]}}
    )
    with pytest.raises(Infeasible) as err:
        plan_job(profile, catalog_2025, Goal(deadline_s=3600), Limits(), "t")
    assert str(err.value).startswith("no configuration of test-workload can run on lambda-2025")


def test_worker_count_is_capped_by_1000_and_the_global_batch(catalog_2025: Catalog) -> None:
    big = build_space(
        make_profile(max_global_batch=100_000), catalog_2025, Limits(max_concurrency=5000)
    )
    assert int(big.n.max()) == 1000
    assert int(build_space(DIGITS, catalog_2025, Limits()).n.max()) == 256  # b_g^max


def test_checkpoints_come_every_minute_of_training_not_once_per_invocation() -> None:
    """A PS crash redoes at most about a minute of training (the catalog's policy), not a
    whole 15-minute invocation: ResNet-18 in an hour checkpoints every ~23 iterations, not 318."""
    catalog = load_catalog("lambda-2025")
    plan = plan_job(
        load_profile("cifar10-resnet18"), catalog, Goal(deadline_s=3600), Limits(), job="t"
    ).plan
    every = plan.training.checkpoint_every_iterations
    step_s = plan.prediction.iteration_s - plan.prediction.checkpoint_s / plan.training.iterations
    assert (every - 1) * step_s < catalog.checkpoint_max_loss_s <= every * step_s
    per_invocation = math.ceil(plan.training.iterations / plan.invocations_per_worker)
    assert every < per_invocation
    # Priced: periodic checkpoints take their time, within the catalog's overhead share.
    share = plan.prediction.checkpoint_s / plan.prediction.total_s
    assert 0 < share <= catalog.checkpoint_max_overhead


def test_predict_run_uses_the_runs_k_limit_margin_and_cap() -> None:
    """A bench's shorter run, a 30.5 s limit and a 20-iteration cap are what get predicted."""
    from provisioner.planner import RunRules, predict_run, run_catalog
    from provisioner.space import Choice
    from tests.local_catalog import local_catalog
    from tests.provisioner.conftest import make_profile

    catalog = local_catalog()
    rules = RunRules(
        invocation_limit_s=30.5,
        safety_margin_s=1.0,
        max_iterations_per_invocation=20,
        iterations=50,
    )
    ruled = run_catalog(catalog, rules)
    assert ruled.invocation_timeout_s - ruled.safety_margin_s == 29.5  # usable time is exact
    choice = Choice(n_workers=2, memory_mb=1769, arch="x86_64", ps_type="loopback", ps_count=1)
    plan = predict_run(make_profile(startup_s=0.5), catalog, choice, rules, job="bench")
    assert plan.catalog == "local" and plan.training.iterations == 50
    assert plan.iterations_per_invocation == 20 and plan.invocations_per_worker == 3
    assert plan.prediction.chaining_s > 0
    whole = predict_run(make_profile(), catalog, choice, RunRules(900.0, 30.0), job="bench")
    assert whole.training.iterations == -(-20_000 * 5 // (2 * 32))  # the workload's own k


@pytest.mark.parametrize("deadline_s", [1200, 3600, 7200])
def test_one_architecture_per_plan_unless_mixing_is_allowed(deadline_s: float) -> None:
    """A plan with x86_64 workers and an arm64 PS (or the reverse) makes `cdk deploy` build the
    image for both, which an x86 host cannot without QEMU: only `arch=mixed` allows it."""
    profile, catalog = load_profile("cifar10-resnet18"), load_catalog("lambda-2025")
    plan = plan_job(profile, catalog, Goal(deadline_s=deadline_s), Limits(), "j").plan
    assert plan.arch == plan.ps_arch
    mixed = plan_job(profile, catalog, Goal(deadline_s=deadline_s), Limits(arch="mixed"), "j")
    assert mixed.plan.cost.total_usd <= plan.cost.total_usd  # a larger space, never dearer


def test_a_deadline_only_a_mixed_plan_meets_says_how_to_allow_it() -> None:
    profile, catalog = load_profile("cifar10-resnet18"), load_catalog("lambda-2025")
    with pytest.raises(Infeasible, match=r"share one architecture \(arch=mixed lets them differ"):
        plan_job(profile, catalog, Goal(deadline_s=930), Limits(), "j")
    mixed = plan_job(profile, catalog, Goal(deadline_s=930), Limits(arch="mixed"), "j").plan
    assert (mixed.arch, mixed.ps_arch) == ("arm64", "x86_64")
