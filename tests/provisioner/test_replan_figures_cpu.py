"""A measured slowdown split into the CPU's and the network's (provisioner/replan_figures.py).

On shared cores (a catalog with total_vcpu: the local platform) a run on fewer cores per MB than
the catalog says is slower in its steps and in its exchange's CPU together; the fit reads that
as the CPU's (`Factors.cpu`), so a larger memory variant is predicted to buy it back, and only
what the CPU leaves of the exchange is the network's. On AWS catalogs (own cores) the compute's
factor scales the rate and `cpu` stays 1. The "truth" of each run here is the model itself at
known factors, so the fit has an exact answer to find.
"""

from __future__ import annotations

import dataclasses

import pytest

from provisioner import Goal, Limits, plan_job
from provisioner.catalog import Catalog
from provisioner.envelope import default_envelope
from provisioner.plan import Plan
from provisioner.planner import build_plan, predict
from provisioner.profile import WorkloadProfile
from provisioner.replan_figures import (
    Factors,
    compose,
    corrected_catalog,
    corrected_profile,
    fitted_factors,
    remaining_profile,
)
from provisioner.replan_pace import Progress
from provisioner.replan_search import plan_choice
from provisioner.replan_sim import simulate
from provisioner.replan_step import factors_from_dict, factors_to_dict
from provisioner.space import Choice
from tests.provisioner.conftest import small_catalog
from tests.provisioner.test_replan import at_pace, replan_profile

DEADLINE_S = 160.0
RATES = [(0.25, 40), (0.5, 100), (1.0, 180), (2.0, 340)]
# the loop's exchange CPU beyond its step, falling with the share (a CPU-bound loopback exchange)
LOOP_EXTRA = [(0.25, 0.004), (0.5, 0.002), (1.0, 0.001), (2.0, 0.001)]


def _case(total_vcpu: float | None) -> tuple[WorkloadProfile, Catalog, Plan]:
    profile = replan_profile(
        RATES, loop_extra_cpu_s=[{"vcpu_share": s, "cpu_s": c} for s, c in LOOP_EXTRA]
    )
    catalog = dataclasses.replace(
        small_catalog(memory_max_mb=4096, total_vcpu=total_vcpu),
        max_iterations_per_invocation=32,
    )
    plan = plan_job(profile, catalog, Goal(deadline_s=DEADLINE_S), Limits(), "t",
                    frontier_points=0, alternatives=0).plan  # fmt: skip
    return profile, catalog, plan


@pytest.fixture(scope="module")
def shared():  # the local platform: 32 shared cores (more than the envelope can take)
    return _case(32.0)


@pytest.fixture(scope="module")
def own():  # AWS: every function its own cores
    return _case(None)


def _measured(profile: WorkloadProfile, catalog: Catalog, plan: Plan, truth: Factors) -> Progress:
    """Two links' progress of the plan's configuration on the model at `truth`."""
    left = plan.training.iterations
    p = predict(corrected_profile(remaining_profile(profile, plan, left), truth),
                corrected_catalog(catalog, truth), plan_choice(plan))  # fmt: skip
    progress = at_pace(plan, catalog, 2, 1.0)
    exchange = float(p.communication_per_iteration_s[0] + p.aggregation_per_iteration_s[0])
    return dataclasses.replace(
        progress,
        compute_per_iteration_s=float(p.compute_per_iteration_s[0]),
        exchange_per_iteration_s=exchange,
        load_per_link_s=float(p.load_s[0]),
    )


def _iteration_s(profile: WorkloadProfile, catalog: Catalog, plan: Plan, memory_mb: int) -> float:
    rest = remaining_profile(profile, plan, plan.training.iterations)
    c = plan_choice(plan)
    choice = Choice(c.n_workers, memory_mb, c.arch, c.ps_type, c.ps_count, c.sync, c.reducers)
    return build_plan(rest, catalog, choice, Goal(), Limits(), "t").prediction.iteration_s


@pytest.mark.parametrize("cores_fewer", [1.5, 2.0, 3.0])
def test_on_shared_cores_a_slower_run_is_read_as_fewer_cores_per_mb(shared, cores_fewer) -> None:
    profile, catalog, plan = shared
    progress = _measured(profile, catalog, plan, Factors(cpu=cores_fewer))
    rest = remaining_profile(profile, plan, plan.training.iterations)
    f = fitted_factors(plan, rest, catalog, progress)
    assert f.cpu == pytest.approx(cores_fewer, rel=0.05)
    assert f.compute == pytest.approx(1.0, rel=0.1)  # not the rate's
    assert f.exchange == pytest.approx(1.0, rel=0.1)  # nor the network's (within the fit's 2 %)
    fit = build_plan(corrected_profile(rest, f), corrected_catalog(catalog, f), plan_choice(plan),
                     Goal(), Limits(), "t").prediction  # fmt: skip
    assert fit.compute_per_iteration_s == pytest.approx(progress.compute_per_iteration_s, rel=0.02)
    assert fit.exchange_per_iteration_s == pytest.approx(
        progress.exchange_per_iteration_s, rel=0.02
    )


def test_on_shared_cores_more_memory_is_predicted_to_buy_the_cpu_back(shared) -> None:
    profile, catalog, plan = shared
    progress = _measured(profile, catalog, plan, Factors(cpu=2.0))
    rest = remaining_profile(profile, plan, plan.training.iterations)
    f = fitted_factors(plan, rest, catalog, progress)
    prof, cat = corrected_profile(profile, f), corrected_catalog(catalog, f)
    at_plan = _iteration_s(prof, cat, plan, plan.memory_mb)
    doubled = _iteration_s(prof, cat, plan, 2 * plan.memory_mb)
    assert doubled < 0.7 * at_plan
    # read as the network's (the old correction), the doubled memory would buy nothing of it
    as_network = Factors(compute=f.cpu, exchange=f.cpu)
    prof_n, cat_n = corrected_profile(profile, as_network), corrected_catalog(catalog, as_network)
    assert _iteration_s(prof_n, cat_n, plan, 2 * plan.memory_mb) > doubled


def test_on_shared_cores_the_network_is_what_the_cpu_leaves_of_the_exchange(shared) -> None:
    profile, catalog, plan = shared
    truth = Factors(cpu=2.0, exchange=3.0)
    progress = _measured(profile, catalog, plan, truth)
    rest = remaining_profile(profile, plan, plan.training.iterations)
    f = fitted_factors(plan, rest, catalog, progress)
    assert (f.cpu, f.exchange) == (pytest.approx(2.0, rel=0.05), pytest.approx(3.0, rel=0.1))


def test_a_faster_run_on_shared_cores_is_the_rates(shared) -> None:
    profile, catalog, plan = shared
    progress = at_pace(plan, catalog, 2, 0.7)
    rest = remaining_profile(profile, plan, plan.training.iterations)
    f = fitted_factors(plan, rest, catalog, progress)
    assert f.cpu == pytest.approx(1.0, abs=0.01) and f.compute < 0.8


def test_on_own_cores_the_compute_scales_the_rate_and_the_cpu_stays_one(own) -> None:
    profile, catalog, plan = own
    progress = at_pace(plan, catalog, 2, 2.0)
    rest = remaining_profile(profile, plan, plan.training.iterations)
    f = fitted_factors(plan, rest, catalog, progress)
    assert f.cpu == 1.0
    assert f.compute > 1.5 and f.exchange > 1.5
    assert corrected_catalog(catalog, Factors(cpu=3.0)) == corrected_catalog(catalog, Factors())


def test_the_cpu_factor_composes_and_round_trips(shared) -> None:
    _, catalog, _ = shared
    a, b = Factors(cpu=1.5, exchange=2.0), Factors(cpu=2.0, compute=1.1)
    assert compose(a, b).cpu == pytest.approx(3.0)
    twice = corrected_catalog(corrected_catalog(catalog, a), b)
    once = corrected_catalog(catalog, compose(a, b))
    assert twice.mb_per_vcpu == pytest.approx(once.mb_per_vcpu)
    assert twice.total_vcpu == pytest.approx(once.total_vcpu)
    assert once.mb_per_vcpu == pytest.approx(3.0 * catalog.mb_per_vcpu)
    assert once.total_vcpu == pytest.approx(catalog.total_vcpu / 3.0)
    assert factors_from_dict(factors_to_dict(compose(a, b))) == compose(a, b)
    assert factors_from_dict({"compute": 1.2}) == Factors(compute=1.2)  # an older pace's dict


@pytest.mark.parametrize("slowdown", [1.5, 2.0])
def test_on_shared_cores_the_fixed_plan_misses_and_re_planning_meets(shared, slowdown) -> None:
    profile, catalog, plan = shared
    env = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    fixed = simulate(plan, profile, catalog, env, slowdown, replan=False)
    moved = simulate(plan, profile, catalog, env, slowdown)
    assert fixed.met is False
    assert moved.met is True and moved.stories
