"""The re-plan's parts: progress from link results, corrected figures, the remaining work, the
envelope and its worst case."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from provisioner import Goal, Limits, plan_job
from provisioner.envelope import default_envelope, envelope_worst_case_usd, worker_counts
from provisioner.planner import build_plan
from provisioner.replan_figures import (
    Factors,
    compose,
    corrected_catalog,
    corrected_profile,
    factors,
    fitted_factors,
    remaining_profile,
)
from provisioner.replan_pace import BEHIND, check_pace, measured_link_s, progress_from_links
from provisioner.replan_search import envelope_limits, plan_choice
from provisioner.terms import iterations, local_batch
from tests.provisioner.conftest import make_profile, small_catalog
from tests.provisioner.test_replan import at_pace


@pytest.fixture(scope="module")
def planned():
    profile = make_profile(model_bytes=400_000, epochs=4, max_global_batch=256)
    catalog = dataclasses.replace(
        small_catalog(memory_max_mb=4096), max_iterations_per_invocation=32
    )
    plan = plan_job(
        profile, catalog, Goal(deadline_s=160.0), Limits(), "t", frontier_points=0, alternatives=0
    ).plan
    return profile, catalog, plan


def _link(iterations_run: int, compute_s: float, comm_s: float, wall_s: float) -> dict:
    timings = {"compute_s": compute_s, "communication_s": comm_s, "load_s": 0.2,
               "startup_s": 3.0, "checkpoint_s": 0.1, "total_s": wall_s - 0.5}  # fmt: skip
    return {"iterations_run": iterations_run, "timings": timings, "wall_s": wall_s}


def test_progress_reads_the_stragglers_terms_and_the_slowest_link_overheads() -> None:
    fast = [_link(10, 2.0, 1.0, 10.0), _link(10, 2.0, 1.0, 10.0)]
    slow = [_link(10, 3.0, 0.5, 10.0), _link(10, 4.0, 0.5, 11.0)]
    p = progress_from_links([fast, slow], elapsed_s=42.0)
    assert (p.iterations_done, p.links_done, p.elapsed_s) == (20, 2, 42.0)
    assert p.compute_per_iteration_s == pytest.approx(7.0 / 20)  # the straggler's compute
    assert p.exchange_per_iteration_s == pytest.approx(1.0 / 20)  # and its own exchange
    assert (p.startup_per_link_s, p.load_per_link_s, p.checkpoint_per_link_s) == (3.0, 0.2, 0.1)
    assert p.gap_per_link_s == pytest.approx(0.5)  # wall less the handler's time


def test_a_warm_links_start_up_is_read_from_the_links_after_the_first() -> None:
    cold = _link(10, 2.0, 1.0, 10.0)
    cold["timings"]["import_s"] = 2.5  # of its 3.0 s start-up
    assert progress_from_links([[cold]], 5.0).warm_startup_per_link_s == pytest.approx(0.5)
    warm = _link(10, 2.0, 1.0, 10.0)
    warm["timings"]["startup_s"] = 0.7
    p = progress_from_links([[cold, warm]], 9.0)
    assert p.warm_startup_per_link_s == pytest.approx(0.7)
    assert p.startup_per_link_s == pytest.approx(1.85)  # the mean, cold one included


def test_a_cold_first_link_is_not_paid_again_by_every_link_left(planned) -> None:
    """On the plan's pace, a first link 20 s slower to start (its import) is behind only if
    every link left were taken to start as slowly."""
    _, catalog, plan = planned
    on_plan = at_pace(plan, catalog, 1, 1.0)
    cold = dataclasses.replace(on_plan, startup_per_link_s=on_plan.startup_per_link_s + 20.0)
    assert check_pace(plan, catalog, cold, 0.0).status == BEHIND
    warm = dataclasses.replace(cold, warm_startup_per_link_s=on_plan.startup_per_link_s)
    assert check_pace(plan, catalog, warm, 0.0).status != BEHIND


def test_progress_without_iterations_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="0 iterations done"):
        progress_from_links([[_link(0, 0.0, 0.0, 1.0)]], elapsed_s=1.0)
    with pytest.raises(ValueError, match="at least one link result"):
        progress_from_links([[]], elapsed_s=1.0)


def test_factors_are_measured_over_predicted_and_one_where_unmeasured(planned) -> None:
    _, catalog, plan = planned
    progress = dataclasses.replace(at_pace(plan, catalog, 2, 1.5), startup_per_link_s=0.0)
    f = factors(plan, progress)
    assert (f.compute, f.exchange) == (pytest.approx(1.5), pytest.approx(1.5))
    assert f.startup == 1.0 and f.load == pytest.approx(1.0)


@pytest.mark.parametrize("slow", [0.5, 1.5, 3.0])
def test_corrected_figures_predict_the_measured_terms_for_the_same_configuration(
    planned, slow
) -> None:
    profile, catalog, plan = planned
    progress = at_pace(plan, catalog, 2, slow)
    left = plan.training.iterations - progress.iterations_done
    remaining = remaining_profile(profile, plan, left)
    f = fitted_factors(plan, remaining, catalog, progress)
    rest = build_plan(
        corrected_profile(remaining, f),
        corrected_catalog(catalog, f), plan_choice(plan), Goal(), Limits(), "t",
    )  # fmt: skip
    p = rest.prediction
    assert p.compute_per_iteration_s == pytest.approx(progress.compute_per_iteration_s, rel=0.02)
    assert p.exchange_per_iteration_s == pytest.approx(progress.exchange_per_iteration_s, rel=0.02)
    assert rest.training.iterations == left
    assert p.setup_s == 0.0  # the run's set-up is behind it


def test_the_remaining_work_keeps_the_global_batch_at_every_count_of_the_envelope(planned) -> None:
    profile, catalog, plan = planned
    b_g, left = plan.training.global_batch, 123
    rest = remaining_profile(profile, plan, left)
    counts = np.array(default_envelope(plan, catalog).worker_counts)
    b_l = local_batch(counts, rest.profiled_local_batch, rest.max_global_batch)
    assert np.all(counts * b_l == b_g)
    assert np.all(iterations(rest.dataset_samples, rest.epochs, counts * b_l) == left)
    assert rest.dataset_bytes == profile.dataset_bytes  # the workers still load the whole dataset


def test_worker_counts_divide_the_global_batch() -> None:
    assert worker_counts(256, 16) == (1, 2, 4, 8, 16)
    assert worker_counts(252, 20) == (1, 2, 3, 4, 6, 7, 9, 12, 14, 18)


def test_default_envelope_doubles_workers_within_concurrency_and_the_batch(planned) -> None:
    profile, catalog, plan = planned
    env = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    assert env.max_workers == 2 * plan.n_workers
    assert env.memory_variants_mb == (plan.memory_mb // 2, plan.memory_mb, 2 * plan.memory_mb)
    capped = default_envelope(plan, catalog, Limits(max_concurrency=plan.n_workers + 1))
    assert capped.max_workers == plan.n_workers + 1
    assert capped.worker_counts[-1] <= plan.n_workers + 1
    # a 4 GB plan cannot double past the catalog's largest size
    big = dataclasses.replace(plan, memory_mb=4096)
    assert max(default_envelope(big, catalog).memory_variants_mb) == catalog.memory_max_mb


def test_the_worst_case_grows_with_the_ceiling(planned) -> None:
    _, catalog, plan = planned
    env = default_envelope(plan, catalog)
    same = dataclasses.replace(
        env, max_workers=plan.n_workers, memory_variants_mb=(plan.memory_mb,)
    )
    assert envelope_worst_case_usd(plan, catalog, same) == pytest.approx(plan.worst_case_usd)
    assert envelope_worst_case_usd(plan, catalog, env) > 2 * plan.worst_case_usd


def test_a_replan_keeps_the_image_the_exchange_and_the_ps(planned) -> None:
    _, catalog, plan = planned
    limits = envelope_limits(plan, default_envelope(plan, catalog))
    assert (limits.arch, limits.sync, limits.ps_types) == (plan.arch, plan.sync, (plan.ps_type,))


def test_corrections_compose(planned) -> None:
    profile, catalog, _ = planned
    a = Factors(compute=1.5, exchange=2.0, startup=1.2, load=0.8, gap_s=0.7)
    b = Factors(compute=1.1, exchange=0.5, startup=1.0, load=2.0, gap_s=None)
    twice = corrected_catalog(corrected_catalog(catalog, a), b)
    once = corrected_catalog(catalog, compose(a, b))
    for field in dataclasses.fields(catalog):
        x, y = getattr(twice, field.name), getattr(once, field.name)
        assert x == (pytest.approx(y) if isinstance(y, float) else y) or field.name == "ps_types"
    for x, y in zip(twice.ps_types, once.ps_types, strict=True):
        assert x.baseline_gbps == pytest.approx(y.baseline_gbps)
    p2 = corrected_profile(corrected_profile(profile, a), b)
    p1 = corrected_profile(profile, compose(a, b))
    assert p2.rates[0].samples_per_s == pytest.approx(p1.rates[0].samples_per_s)
    assert p2.startup_s == pytest.approx(p1.startup_s)


def test_a_links_first_wait_for_a_newcomers_start_up_is_not_read_as_pace() -> None:
    """The first link after a switch to more workers: the warm straggler's first pull waited
    3 s for the newcomers' cold start. The exchange per iteration leaves that wait out (the
    newcomers' start-up is the link's), so one slow start does not read as a slow pace."""
    link = _link(10, 2.0, 3.5, 10.0)
    link["timings"]["first_wait_s"] = 3.0
    p = progress_from_links([[link]], elapsed_s=12.0)
    assert p.exchange_per_iteration_s == pytest.approx(0.5 / 10)
    assert progress_from_links([[_link(10, 2.0, 3.5, 10.0)]], 12.0).exchange_per_iteration_s == (
        pytest.approx(3.5 / 10)
    )


def test_a_warm_links_load_is_its_cache_and_before_one_ran_the_platform_says() -> None:
    """The first link loads its shards from S3 (4.6 s on a slow platform), a warm link from its
    /tmp (0.01 s): the links left pay the warm one's; after the first link alone, none where
    re-links land warm (the emulator's catalog), the first's where they may not (AWS)."""
    cold, warm = _link(35, 0.5, 0.5, 8.0), _link(300, 3.0, 3.0, 8.0)
    cold["timings"]["load_s"], warm["timings"]["load_s"] = 4.6, 0.01
    both = progress_from_links([[cold, warm]], 16.0)
    assert (both.load_per_link_s, both.warm_load_per_link_s) == (4.6, 0.01)
    first = progress_from_links([[cold]], 8.0)
    assert first.warm_load_per_link_s is None
    fixed_s = first.warm_startup_per_link_s + first.checkpoint_per_link_s + first.gap_per_link_s
    assert measured_link_s(first, relinks_warm=True) == pytest.approx(fixed_s)
    assert measured_link_s(first, relinks_warm=False) == pytest.approx(fixed_s + 4.6)
    assert measured_link_s(both, relinks_warm=False) == pytest.approx(
        both.warm_startup_per_link_s + 0.01 + both.checkpoint_per_link_s + both.gap_per_link_s
    )
