"""The S3 gradient exchange: its model terms, cost items, plan fields and CLI line."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner import Goal, load_catalog, load_profile
from provisioner.catalog import catalog_from_dict
from provisioner.costs import s3_exchange_usd, s3_storage_usd
from provisioner.plan import Plan
from provisioner.planner import plan_job, predict
from provisioner.s3exchange import (
    STEADY_LATE_SHARE,
    s3_aggregation_s,
    s3_cell_misses,
    s3_communication_s,
    s3_exchange_requests,
    s3_exchange_stored_mb,
    s3_link_checkpoint_s,
    s3_link_requests,
    s3_reduce_mb_s,
    s3_state_read_s,
)
from provisioner.space import Choice, Limits
from provisioner.summary import render_plan
from provisioner.terms import s3_bandwidth_mb_s
from tests.local_catalog import local_catalog, local_catalog_dict
from tests.provisioner.test_alternatives import _check_random
from tests.provisioner.test_planner_exact import SYNC_GRIDS, SYNC_LIMITS, workload

ROOT = Path(__file__).resolve().parents[2]


# --- the pure terms, by hand ----------------------------------------------------------------------


def test_reducer_rate_is_the_ps_rate_at_the_share_never_above_one_core() -> None:
    got = s3_reduce_mb_s(1000.0, np.array([0.5, 1.0, 3.0]))
    assert got.tolist() == [500.0, 1000.0, 1000.0]


def test_communication_is_four_phases_of_one_latency() -> None:
    # n = 4, k = 2, d = 10 MB, B = 50 MB/s, latency 0.03 s:
    # PUT 10 MB, GET 4·5 = 20 MB, PUT 2·5 = 10 MB, GET 10 MB = 50 MB / 50 MB/s + 4·0.03 s
    got = s3_communication_s(np.array([4]), np.array([2]), 10.0, np.array([50.0]), 0.03, 0.03)
    assert got[0] == pytest.approx(1.0 + 0.12)


def test_the_puts_run_at_their_own_rate_and_latency_where_measured_apart() -> None:
    # The same exchange with PUTs at 25 MB/s and 0.05 s: GET 10 + 20 MB at 50 MB/s, PUT 10 + 10
    # MB at 25 MB/s, two latencies of each kind.
    got = s3_communication_s(
        np.array([4]), np.array([2]), 10.0, np.array([50.0]), 0.03, 0.05, np.array([25.0])
    )
    assert got[0] == pytest.approx(30 / 50 + 20 / 25 + 2 * 0.03 + 2 * 0.05)


def test_a_links_checkpoint_is_each_reducers_partition_then_a_listing() -> None:
    # d = 10 MB, k = 2: each reducer PUTs 2·5 MB at the slower of the store's 100 MB/s and the
    # function's 50 MB/s, one PUT latency, then one LIST; on one host the two share the bytes
    got = s3_link_checkpoint_s(10.0, np.array([2]), 100.0, np.array([50.0]), 0.02, 0.03)
    assert got[0] == pytest.approx(0.02 + 10 / 50 + 0.03)
    shared = s3_link_checkpoint_s(10.0, np.array([2]), 100.0, np.array([500.0]), 0.02, 0.03, True)
    assert shared[0] == pytest.approx(0.02 + 20 / 100 + 0.03)


def test_a_relinks_state_read_is_a_listing_and_the_model_at_once() -> None:
    assert s3_state_read_s(10.0, np.array([50.0]), 0.03)[0] == pytest.approx(0.06 + 0.2)


def test_a_relinked_s3_run_prices_its_checkpoints_and_state_reads() -> None:
    """The same S3 configuration in one link and cut into three: the two extra links add two
    restarts, warm starts and state reads, and every link ends with the reducers' checkpoint."""
    profile = load_profile("synthetic-cifar-mobilenetv2")
    catalog = local_catalog()
    choice = Choice(2, 1024, "x86_64", "", 0, "s3", 1)
    one = predict(profile, catalog, choice)
    k = int(one.iterations[0])
    cut = dataclasses.replace(catalog, max_iterations_per_invocation=-(-k // 3))
    three = predict(profile, cut, choice)
    assert int(three.invocations[0]) == 3
    model_mb = profile.model_bytes / 1e6
    s3_mb_s = s3_bandwidth_mb_s(
        1024, catalog.s3_mb_s_per_memory_mb, catalog.s3_mb_s_intercept, catalog.s3_max_mb_s
    )
    checkpoint = float(s3_link_checkpoint_s(
        model_mb, np.array([1]), catalog.ps_s3_mb_s, np.array([s3_mb_s]),
        catalog.checkpoint_latency_s, catalog.s3_request_s, True)[0])  # fmt: skip
    assert float(one.chaining_s[0]) == pytest.approx(checkpoint)
    relink = catalog.restart_s + (catalog.warm_start_s or 0.0)
    extra = float(three.chaining_s[0]) - 3 * checkpoint - 2 * relink
    assert extra > 2 * 2 * catalog.s3_request_s  # two state reads, each more than its requests


def test_aggregation_is_n_partitions_of_d_over_k() -> None:
    # 4 partitions of 10/2 = 5 MB at 100 MB/s
    assert s3_aggregation_s(np.array([4]), np.array([2]), 10.0, np.array([100.0]))[0] == 0.2


def test_requests_per_iteration() -> None:
    puts, gets = s3_exchange_requests(np.array([4, 10]), np.array([2, 3]))
    assert puts.tolist() == [4 * 2 + 2, 10 * 3 + 3]
    assert gets.tolist() == [2 * 4 * 2, 2 * 10 * 3]


def test_request_charges_are_counts_times_prices_times_iterations() -> None:
    # n = 4, k = 2: 10 PUT at $5e-6 + 16 GET at $4e-7 = $5.64e-5 per iteration, × 100
    got = s3_exchange_usd(4e-7, 5e-6, np.array([4]), np.array([2]), np.array([100]))
    assert got[0] == pytest.approx(100 * (10 * 5e-6 + 16 * 4e-7))
    assert s3_exchange_usd(4e-7, 5e-6, np.array([4]), np.array([0]), np.array([100]))[0] == 0.0


def test_storage_is_two_iterations_of_objects_for_the_run() -> None:
    assert s3_exchange_stored_mb(np.array([4]), 10.0)[0] == 2 * 6 * 10.0  # 120 MB
    # 1,000 MB for one 730-hour month at $0.023 per GB-month
    assert s3_storage_usd(0.023, np.array([1000.0]), np.array([730 * 3600.0]))[0] == 0.023


# --- catalogs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lambda-2025", "lambda-2020"])
def test_aws_catalogs_carry_the_sourced_figures(name: str) -> None:
    catalog = load_catalog(name)
    assert catalog.s3_request_s == 0.03
    assert catalog.s3_usd_per_gb_month == 0.023
    data = json.loads((ROOT / "catalog" / f"{name}.json").read_text())
    latency = data["network"]["s3_request_s"]
    assert latency["tag"] == "est" and "tens of milliseconds" in latency["source"]
    assert data["orchestration"]["s3_usd_per_gb_month"]["tag"] == "3rd"


def test_catalogs_without_the_figures_still_load() -> None:
    data = local_catalog_dict()
    del data["network"]["s3_request_s"], data["orchestration"]["s3_usd_per_gb_month"]
    catalog = catalog_from_dict(data)
    assert (catalog.s3_request_s, catalog.s3_usd_per_gb_month) == (0.0, 0.0)
    assert local_catalog().s3_request_s == 0.03  # the fixture copies lambda-2025's


# --- one S3 cell: its cost items ------------------------------------------------------------------

S3_CHOICE = Choice(
    n_workers=4, memory_mb=2048, arch="x86_64", ps_type="", ps_count=0, sync="s3", reducers=2
)


def test_an_s3_cell_has_no_ps_no_endpoints_and_prices_its_exchange() -> None:
    profile, catalog = load_profile("digits-mlp"), load_catalog("lambda-2025")
    c = predict(profile, catalog, S3_CHOICE)
    k = int(c.iterations[0])
    exchange_s = c.communication_per_iteration_s + c.aggregation_per_iteration_s
    model_mb = profile.model_bytes / 1e6
    misses = float(
        s3_cell_misses(
            catalog, 4, 2, model_mb, exchange_s, c.iterations, c.invocations,
            c.iteration_s,
        )[0]
    )  # fmt: skip
    assert misses > 0  # the GETs that find nothing yet are billed too
    requests = k * (10 * catalog.s3_usd_per_put + (16 + misses) * catalog.s3_usd_per_get)
    link_puts, link_gets, link_lists = (x[0] for x in s3_link_requests(4, 2, c.invocations))
    assert link_puts > 0 and link_lists > 0  # a link's start and end are billed too
    requests += (link_puts + link_lists) * catalog.s3_usd_per_put
    requests += link_gets * catalog.s3_usd_per_get
    stored_gb = 2 * 6 * profile.model_bytes / 1e9
    storage = 0.023 * stored_gb * float(c.total_s[0]) / (730 * 3600)
    assert float(c.exchange_usd[0]) == pytest.approx(requests + storage, rel=1e-12)
    assert float(c.ps_usd[0]) == 0.0 and float(c.endpoints_usd[0]) == 0.0
    items = (
        c.lambda_usd, c.requests_usd, c.ephemeral_usd, c.ps_usd, c.sfn_usd, c.s3_usd,
        c.endpoints_usd, c.exchange_usd,
    )  # fmt: skip
    assert float(c.total_usd[0]) == pytest.approx(sum(float(x[0]) for x in items), rel=1e-12)
    # no PS checkpoint (the state is in S3 every iteration) and no set-up (nothing to start)
    assert float(c.checkpoint_s[0]) == 0.0
    assert float(c.total_s[0]) < catalog.run_setup_s + 60


def test_an_s3_plan_fills_its_fields_and_round_trips() -> None:
    profile, catalog = load_profile("digits-mlp"), load_catalog("lambda-2025")
    plan = plan_job(
        profile, catalog, Goal(deadline_s=600.0), Limits(sync="s3"), "t", frontier_points=0
    ).plan
    assert (plan.sync, plan.ps_count, plan.ps_type, plan.interface_endpoints) == ("s3", 0, "", ())
    assert 1 <= plan.reducers <= plan.n_workers
    assert plan.cost.ps_instances_usd == 0.0 and plan.cost.vpc_endpoints_usd == 0.0
    assert plan.cost.s3_exchange_usd > 0 and plan.idle_usd_per_hour == 0.0  # no volume, no secret
    n, k = plan.n_workers, plan.reducers
    p = plan.prediction
    assert (p.exchange_puts_per_iteration, p.exchange_gets_per_iteration) == (n * k + k, 2 * n * k)
    assert p.exchange_get_misses_per_iteration >= 2 * n * k * STEADY_LATE_SHARE
    assert plan.other_sync_usd is None  # forced: the other mode was not searched
    assert Plan.from_json(plan.to_json()) == plan


def test_a_plan_json_from_before_issue_13_still_loads() -> None:
    profile, catalog = load_profile("digits-mlp"), load_catalog("lambda-2025")
    plan = plan_job(profile, catalog, Goal(deadline_s=600.0), Limits(), "t", frontier_points=0).plan
    data = plan.to_dict()
    for key in ("sync", "reducers", "other_sync_usd", "other_sync_s"):
        del data[key]
    for key in ("exchange_per_iteration_s", "exchange_puts_per_iteration"):
        del data["prediction"][key]
    del data["prediction"]["exchange_gets_per_iteration"], data["cost"]["s3_exchange_usd"]
    old = Plan.from_dict(data)
    assert (old.sync, old.reducers, old.other_sync_usd, old.cost.s3_exchange_usd) == (
        "ps",
        0,
        None,
        0.0,
    )


# --- the choice between the modes -----------------------------------------------------------------


def test_demo_workload_names_both_modes_and_picks_the_cheaper() -> None:
    """digits-mlp in 10 minutes on lambda-2025: whichever mode wins, both costs are printed."""
    profile, catalog = load_profile("digits-mlp"), load_catalog("lambda-2025")
    goal = Goal(deadline_s=600.0)
    result = plan_job(profile, catalog, goal, Limits(sync="auto"), "demo", frontier_points=0)
    plan, other = result.plan, result.other_sync
    assert other is not None and other.sync != plan.sync
    assert plan.other_sync_usd == other.cost.total_usd
    assert plan.cost.total_usd <= other.cost.total_usd
    for mode in ("ps", "s3"):  # each is the optimum of its own mode (the exact search's)
        alone = plan_job(profile, catalog, goal, Limits(sync=mode), "demo", frontier_points=0)
        want = plan if mode == plan.sync else other
        assert want.cost.total_usd == alone.plan.cost.total_usd
    table = render_plan(plan)
    sync_row = next(line for line in table.splitlines() if line.strip().startswith("sync "))
    assert plan.sync in sync_row and f"${other.cost.total_usd:.4f}" in sync_row
    assert "cheaper than the best" in sync_row


def test_cli_summary_names_the_winning_mode() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "provisioner", "plan", "--workload", "digits-mlp"]
        + ["--deadline", "10m"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = {line.split("  ")[1].strip(): line for line in out.stdout.splitlines()[1:4]}
    doc_sync = "s3" if "S3, reducers k" in out.stdout else "ps"
    sync_line = next(line for line in out.stdout.splitlines() if line.startswith("  sync "))
    assert sync_line.split()[1] == doc_sync
    assert "gradient exchange" in rows
    assert "best plan of the other gradient exchange" in out.stdout


def test_cli_forces_a_mode_and_refuses_an_unknown_one() -> None:
    base = [sys.executable, "-m", "provisioner", "plan", "--workload", "digits-mlp"]
    out = subprocess.run(
        [*base, "--deadline", "10m", "--sync", "ps", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["plan"]["sync"] == "ps" and doc["other_sync"] is None
    bad = subprocess.run(
        [*base, "--deadline", "10m", "--sync", "nfs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_sync_limit_is_checked() -> None:
    profile, catalog = load_profile("digits-mlp"), load_catalog("lambda-2025")
    with pytest.raises(ValueError, match="sync 'nfs' is not one of ps, s3, auto"):
        plan_job(profile, catalog, Goal(deadline_s=600.0), Limits(sync="nfs"), "t")


def test_more_reducers_are_never_slower() -> None:
    """T is non-increasing in k (the fastest-cell search reads only k = n)."""
    profile, catalog = load_profile("cifar10-resnet18"), load_catalog("lambda-2025")
    times = [
        float(predict(profile, catalog, Choice(16, 3008, "x86_64", "", 0, "s3", k)).total_s[0])
        for k in range(1, 17)
    ]
    assert all(b <= a for a, b in zip(times, times[1:], strict=False))
    assert all(math.isfinite(t) for t in times)


# --- alternatives over both modes: the exact optimum of each other worker count ------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload(), SYNC_LIMITS, st.floats(0.8, 20.0), SYNC_GRIDS)
def test_alternatives_over_both_modes_equal_enumeration(
    fields: dict[str, object], limits: Limits, factor: float, grid: tuple[int, int, int, int]
) -> None:
    """Held-back S3 pairs (k > FIRST_PASS_REDUCERS) of a worker count already listed stay out."""
    _check_random(fields, limits, grid, lambda fast_s, *_: Goal(deadline_s=fast_s * factor))


def test_a_links_starts_and_ends_are_counted_as_the_runtime_sends_them() -> None:
    """8 workers, 3 reducers, 2 links: the first link seeds 3 states, each link's reducers
    checkpoint (3 PUTs); the second link's workers read 3 slices at start (24 GETs; the first
    link's hold the seeded model already) and its reducers their newest state (3); LISTs: 8
    workers a link and the first link's search for a checkpoint, 3 reducers at the end of each
    link."""
    puts, gets, lists = s3_link_requests(np.array([8]), np.array([3]), np.array([2]))
    assert (puts[0], gets[0], lists[0]) == (9.0, 27.0, 30.0)
    no_reducer = s3_link_requests(np.array([8]), np.array([0]), np.array([2]))
    assert [x[0] for x in no_reducer] == [0, 0, 0]


def test_the_links_requests_are_billed_on_top_of_the_iterations() -> None:
    n, k, its = np.array([4]), np.array([2]), np.array([100])
    without = s3_exchange_usd(4e-7, 5e-6, n, k, its)[0]
    with_links = s3_exchange_usd(4e-7, 5e-6, n, k, its, links=np.array([3]))[0]
    puts, gets, lists = s3_link_requests(n, k, np.array([3]))
    assert with_links - without == pytest.approx(5e-6 * (puts[0] + lists[0]) + 4e-7 * gets[0])
