"""The prediction's 90% interval: the catalog figure, the planner meeting the deadline against
its upper end, plan.json carrying it (and older plans without it loading)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job
from provisioner.catalog import Catalog, catalog_from_dict
from provisioner.interval import PredictionInterval, interval_words
from provisioner.plan import check_plan_sense, load_plan
from provisioner.search import exhaustive
from provisioner.space import Infeasible
from provisioner.summary import render_plan
from tests.local_catalog import local_catalog_dict

SPREAD = PredictionInterval(low=0.87, high=1.14, source="test")


def _with_interval(value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(local_catalog_dict())
    doc["orchestration"]["prediction_interval"] = {
        "value": value, "unit": "measured/predicted total", "source": "test runs",
        "date": "-", "tag": "measured",
    }  # fmt: skip
    return doc


def test_the_catalog_reads_the_interval_and_without_one_it_is_the_point() -> None:
    cat = catalog_from_dict(_with_interval({"low": 0.87, "high": 1.14, "level": 0.9}))
    assert cat.prediction_interval == PredictionInterval(0.87, 1.14, "test runs")
    assert cat.prediction_interval.measured and cat.prediction_interval.of(10.0) == (
        pytest.approx(8.7),
        pytest.approx(11.4),
    )
    for name in ("lambda-2020", "lambda-2025"):  # no spread measured in Lambda
        point = load_catalog(name).prediction_interval
        assert (point.low, point.high, point.measured) == (1.0, 1.0, False)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"low": 1.1, "high": 1.2}, "is out of range"),  # low above the prediction
        ({"low": 0.9, "high": 0.95}, "is out of range"),  # high below it
        ({"low": 0, "high": 1.2}, "is out of range"),
        ({"low": 0.9, "high": 12}, "is out of range"),  # past what a slack of 90% allows
        ({"low": 0.9, "high": float("nan")}, "is out of range"),
        ({"low": True, "high": 1.2}, "is out of range"),
        ({"low": 0.9}, "is out of range"),
        ({"low": 0.9, "high": 1.2, "level": 0.5}, "level 0.5 is not 0.9"),
        ({"low": 0.9, "high": 1.2, "p": 1}, "is not understood"),
        (1.2, "is not understood"),
    ],
)
def test_a_bad_interval_is_one_line_naming_it_and_what_is_accepted(value: Any, says: str) -> None:
    with pytest.raises(ValueError) as err:
        catalog_from_dict(_with_interval(value))
    text = str(err.value)
    assert text.startswith("catalog local: orchestration.prediction_interval: ") and says in text
    assert "0 < low ≤ 1 ≤ high < 10" in text and "\n" not in text


def _noisy(catalog: Catalog) -> Catalog:
    return dataclasses.replace(catalog, prediction_interval=SPREAD)


def test_the_plan_meets_the_deadline_at_the_intervals_upper_end(catalog_2025: Catalog) -> None:
    """A deadline the point prediction meets but its upper end does not: the planner takes a
    faster (dearer) plan whose upper end meets it, as if planning for deadline / high."""
    profile, limits = load_profile("cifar10-resnet18"), Limits()
    point = plan_job(profile, catalog_2025, Goal(deadline_s=1500), limits, "t").plan
    assert point.prediction.total_s * SPREAD.high > 1500  # the point fits, its top does not
    held = plan_job(profile, _noisy(catalog_2025), Goal(deadline_s=1500), limits, "t").plan
    p = held.prediction
    assert p.total_high_s == pytest.approx(p.total_s * 1.14) and p.total_high_s <= 1500
    assert p.total_low_s == pytest.approx(p.total_s * 0.87)
    assert held.cost.total_usd > point.cost.total_usd
    direct = plan_job(profile, catalog_2025, Goal(deadline_s=1500 / 1.14), limits, "t").plan
    assert (held.n_workers, held.memory_mb, held.cost.total_usd) == (
        direct.n_workers, direct.memory_mb, direct.cost.total_usd,
    )  # fmt: skip
    assert held.goal == Goal(deadline_s=1500, slack=0.0, interval_high=1.14)
    assert "at the 90% interval's upper end (1.14× the prediction)" in held.notes[0]
    assert "90%: " in render_plan(held) and "90% interval not measured" in render_plan(point)


def test_a_users_slack_is_held_back_on_top_of_the_interval(catalog_2025: Catalog) -> None:
    profile, noisy = load_profile("cifar10-resnet18"), _noisy(catalog_2025)
    both = plan_job(profile, noisy, Goal(deadline_s=1500, slack=0.1), Limits(), "t").plan
    assert both.goal.planning_deadline_s == pytest.approx(1500 * 0.9 / 1.14)
    assert both.prediction.total_high_s <= 1500 * 0.9  # type: ignore[operator]
    with pytest.raises(Infeasible, match=r"less 10% slack, at the 90% interval's upper end"):
        plan_job(profile, noisy, Goal(deadline_s=300, slack=0.1), Limits(), "t")
    budget = plan_job(profile, noisy, Goal(budget_usd=5.0), Limits(), "t").plan
    assert budget.goal.interval_high == 1.0  # no deadline to hold back from


def test_the_exhaustive_reference_holds_the_same_upper_end(catalog_2025: Catalog) -> None:
    """Exactness: the planner's optimum is the enumeration's under the interval too."""
    profile, noisy = load_profile("digits-mlp"), _noisy(catalog_2025)
    limits = Limits(max_memory_mb=1024, max_concurrency=6)
    compared = 0
    for deadline_s in (60.0, 240.0, 260.0, 600.0):
        goal = Goal(deadline_s=deadline_s)
        want = exhaustive(profile, noisy, limits, goal)
        try:
            got = plan_job(profile, noisy, goal, limits, "t", frontier_points=0, alternatives=0)
        except Infeasible:
            assert want is None
            continue
        assert want is not None and got.plan.cost.total_usd == want[2]
        assert got.plan.prediction.total_s == want[1] <= deadline_s / 1.14
        compared += 1
    assert compared >= 2


def test_plan_json_carries_the_interval_and_older_plans_still_load(
    catalog_2025: Catalog, tmp_path: Path
) -> None:
    result = plan_job(
        load_profile("cifar10-resnet18"), _noisy(catalog_2025), Goal(deadline_s=3600),
        Limits(), "job-1",
    )  # fmt: skip
    text = result.to_json()
    assert Plan.from_json(text) == result.plan
    doc = json.loads(text)
    assert doc["plan"]["goal"]["interval_high"] == 1.14
    assert {"total_low_s", "total_high_s"} <= set(doc["plan"]["prediction"])
    for key in ("total_low_s", "total_high_s"):  # a plan written before the interval
        del doc["plan"]["prediction"][key]
    del doc["plan"]["goal"]["interval_high"]
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    old = load_plan(tmp_path / "plan.json")
    assert old.prediction.total_low_s is None and old.goal.interval_high == 1.0
    assert "90% interval not recorded" in render_plan(old)


def test_a_plans_interval_must_hold_its_total(catalog_2025: Catalog) -> None:
    plan = plan_job(load_profile("digits-mlp"), catalog_2025, Goal(deadline_s=600), Limits(),
                    "t").plan  # fmt: skip
    total = plan.prediction.total_s
    bad = dataclasses.replace(plan.prediction, total_low_s=total * 1.1, total_high_s=total * 1.2)
    with pytest.raises(ValueError, match=r"do not hold the total .*; use 0 < low ≤ total ≤ high"):
        check_plan_sense(dataclasses.replace(plan, prediction=bad), None)


def test_the_interval_in_words() -> None:
    assert interval_words(12.3, 10.1, 15.2) == "predicted 12.3s (90%: 10.1s–15.2s)"
    assert interval_words(12.3, 12.3, 12.3) == (
        "predicted 12.3s (90% interval not measured on this platform)"
    )
    assert interval_words(12.3, None, None) == "predicted 12.3s (90% interval not recorded)"
