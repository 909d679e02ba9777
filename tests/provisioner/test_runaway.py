"""Runaway bounds: derived from the plan, carried in plan.json, priced as a worst case."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job, runaway


def _plan(workload: str = "digits-mlp", deadline_s: float = 7200) -> Plan:
    goal = Goal(deadline_s=deadline_s)
    return plan_job(load_profile(workload), load_catalog("lambda-2025"), goal, Limits(), "j").plan


def test_link_cap_and_timeout_follow_the_plan() -> None:
    assert [runaway.max_links(links) for links in (1, 2, 10)] == [5, 8, 32]
    # Three times the predicted training, plus the six helper steps at their 900 s limit:
    # open the endpoints, wait for the PS twice, prepare, finalize, close the endpoints.
    assert runaway.execution_timeout_s(100.0) == 300 + 6 * (900 + 120)
    assert runaway.execution_timeout_s(100.2) == 301 + 6 * (900 + 120)  # rounded up


@pytest.mark.parametrize(("workload", "deadline_s"), [("digits-mlp", 7200),
                                                      ("cifar10-resnet18", 7200)])  # fmt: skip
def test_every_plan_carries_its_bounds_and_their_price(workload: str, deadline_s: float) -> None:
    plan = _plan(workload, deadline_s)
    assert plan.max_links_per_worker == runaway.max_links(plan.invocations_per_worker)
    assert plan.execution_timeout_s == runaway.execution_timeout_s(plan.prediction.total_s)
    assert plan.execution_timeout_s > plan.prediction.total_s
    # Running into the bounds costs more than the run itself, and every worker billed for the
    # whole timeout is part of it.
    lambda_at_timeout = (
        plan.cost.lambda_compute_usd * plan.execution_timeout_s / (plan.prediction.total_s)
    )
    assert plan.worst_case_usd > plan.cost.total_usd
    assert plan.worst_case_usd >= 0.9 * lambda_at_timeout
    assert Plan.from_json(plan.to_json()) == plan


def test_a_plan_written_before_the_bounds_gets_them_derived() -> None:
    plan = _plan()
    old = dataclasses.replace(plan, max_links_per_worker=0, execution_timeout_s=0)
    assert runaway.plan_bounds(old) == runaway.plan_bounds(plan)
    assert runaway.plan_bounds(plan) == (plan.max_links_per_worker, plan.execution_timeout_s)


def test_the_bounds_line_names_every_bound() -> None:
    plan = _plan()
    line = runaway.bounds_line(plan)
    assert line.startswith(
        "links must advance (one stall is retried); at most 5 links per worker; execution timeout "
    )
    assert line.endswith(f"worst case ${plan.worst_case_usd:.4f}")
