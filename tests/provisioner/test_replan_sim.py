"""The run played on the model: re-planning meets the deadline a fixed plan misses at 1.5× and
2× slower than the catalog; at the catalog's speed it changes nothing."""

from __future__ import annotations

import pytest

from provisioner.replan_sim import simulate
from tests.provisioner import test_replan
from tests.provisioner.test_replan import DEADLINE_S


@pytest.fixture(scope="module")
def case():  # the boundary tests' workload, catalog, plan and envelope
    return test_replan.case.__wrapped__()


def test_at_the_catalogs_speed_re_planning_changes_nothing(case) -> None:
    profile, catalog, plan, envelope = case
    fixed = simulate(plan, profile, catalog, envelope, 1.0, replan=False)
    replanned = simulate(plan, profile, catalog, envelope, 1.0)
    assert fixed.finish_s == pytest.approx(plan.prediction.total_s, rel=1e-9)
    assert fixed.cost_usd == pytest.approx(plan.cost.total_usd, rel=1e-9)
    assert replanned == fixed and fixed.met and not replanned.stories


@pytest.mark.parametrize("slowdown", [1.5, 2.0])
def test_slower_the_fixed_plan_misses_and_re_planning_meets(case, slowdown) -> None:
    profile, catalog, plan, envelope = case
    fixed = simulate(plan, profile, catalog, envelope, slowdown, replan=False)
    replanned = simulate(plan, profile, catalog, envelope, slowdown)
    assert not fixed.met and fixed.finish_s > DEADLINE_S
    assert replanned.met and replanned.finish_s <= DEADLINE_S
    assert replanned.cost_usd > fixed.cost_usd  # keeping the promise costs something
    assert replanned.stories and replanned.stories[0].startswith("link 1: pace ")


def test_three_times_slower_the_envelope_cannot_save_the_deadline_but_gains(case) -> None:
    profile, catalog, plan, envelope = case
    fixed = simulate(plan, profile, catalog, envelope, 3.0, replan=False)
    replanned = simulate(plan, profile, catalog, envelope, 3.0)
    assert not fixed.met and not replanned.met
    assert replanned.finish_s < fixed.finish_s
