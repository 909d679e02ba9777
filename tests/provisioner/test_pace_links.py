"""Links cut for pace checks: a plan made on pace_checked_catalog has links no longer than a
tenth of its deadline, and pays for the extra links in its predicted time and cost."""

from __future__ import annotations

import pytest

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.replan_pace import pace_checked_catalog

DEADLINE_S = 3600.0


def _plan(catalog_name: str, checked: bool):  # type: ignore[no-untyped-def]
    catalog = load_catalog(catalog_name)
    if checked:
        catalog = pace_checked_catalog(catalog, DEADLINE_S)
    profile = load_profile("paper-cifar10-mobilenetv2")
    return plan_job(profile, catalog, Goal(deadline_s=DEADLINE_S), Limits(sync="auto"), "j",
                    alternatives=0, frontier_points=0).plan  # fmt: skip


def test_links_last_at_most_a_tenth_of_the_deadline_and_cost_their_start_ups() -> None:
    free, checked = _plan("lambda-2025", False), _plan("lambda-2025", True)
    assert checked.invocations_per_worker >= 10 > free.invocations_per_worker
    per_link_s = checked.prediction.iteration_s * checked.iterations_per_invocation
    assert per_link_s <= DEADLINE_S / 10
    assert checked.prediction.chaining_s > free.prediction.chaining_s
    assert checked.cost.total_usd >= free.cost.total_usd  # the free plan is cheapest there
    assert checked.prediction.total_s <= DEADLINE_S


@pytest.mark.parametrize(("deadline_s", "checks"), [(0.0, 10), (float("nan"), 10), (60.0, 0)])
def test_a_check_count_or_deadline_that_cannot_be_is_refused(
    deadline_s: float, checks: int
) -> None:
    with pytest.raises(ValueError, match="pace checks: deadline"):
        pace_checked_catalog(load_catalog("lambda-2025"), deadline_s, checks)
