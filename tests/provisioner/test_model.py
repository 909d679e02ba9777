"""Model terms against hand-computed values (λDNN's equations and this project's extensions)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from provisioner import costs, local_machine, local_warmup, quota, terms
from provisioner.catalog import Catalog
from provisioner.planner import predict
from provisioner.profile import RateCurve, WorkloadProfile
from provisioner.space import Choice
from tests.provisioner.conftest import make_profile


def test_local_batch_rule_caps_the_global_batch() -> None:
    got = terms.local_batch(np.array([1, 4, 8, 9, 300]), 32, 256)
    assert got.tolist() == [32, 32, 32, 28, 0]  # 9·32 > 256 → ⌊256/9⌋; n > b_g^max → 0


def test_iterations_round_up() -> None:
    assert int(terms.iterations(1000, 3, np.array(64))) == 47  # ⌈3000/64⌉
    assert int(terms.iterations(1000, 2, np.array(50))) == 40


def test_s3_bandwidth_grows_then_caps() -> None:
    got = terms.s3_bandwidth_mb_s(np.array([1000, 3000]), 0.05, 20.0, 115.0)
    assert got.tolist() == [70.0, 115.0]


def test_load_time_splits_the_dataset() -> None:
    assert float(terms.load_time_s(100.0, np.array(4), np.array(50.0))) == 0.5


def test_vcpu_share_is_proportional_then_capped() -> None:
    assert quota.vcpu_share(np.array([1769, 20000]), 1769, 6).tolist() == [1.0, 6.0]


def test_rate_points_are_monotone_proportional_below_flat_beyond() -> None:
    curve = RateCurve(arch="x86_64", vcpu_shares=(0.5, 1.0, 2.0), samples_per_s=(100, 180, 150))
    shares = np.array([0.25, 0.75, 1.5, 3.0])
    got = terms.training_rate_samples_s(curve, shares, shares * 1769)
    assert got.tolist() == [50.0, 140.0, 180.0, 180.0]  # 150 is noise: running maximum


def test_rate_points_may_be_keyed_by_memory() -> None:
    profile = make_profile(
        training_rate={
            "x86_64": {
                "points": [
                    {"memory_mb": 2048, "samples_per_s": 40},
                    {"memory_mb": 1024, "samples_per_s": 25},
                ]
            }
        }
    )
    curve = profile.rate("x86_64")
    assert curve is not None and curve.memory_points_mb == (1024.0, 2048.0)
    mem = np.array([512, 1536, 4096])
    got = terms.training_rate_samples_s(curve, mem / 1769, mem)
    assert got.tolist() == [12.5, 32.5, 40.0]


def test_rate_linear_fit_is_lambda_dnn_form_and_never_negative() -> None:
    curve = RateCurve(arch="x86_64", alpha1_samples_s_per_mb=0.1, beta1_samples_s=-50.0)
    got = terms.training_rate_samples_s(curve, np.zeros(2), np.array([1000, 100]))
    assert got.tolist() == [50.0, 0.0]


def test_ps_bandwidth_shares_baseline_across_workers_and_shards() -> None:
    one = terms.ps_bandwidth_mb_s(np.array([1, 10]), 84.0, np.array(93.75), np.array(1), 625.0)
    assert one.tolist() == [84.0, 9.375]  # function cap, then B_ps / n
    two = terms.ps_bandwidth_mb_s(np.array(10), 84.0, np.array(93.75), np.array(2), 625.0)
    assert float(two) == 18.75
    capped = terms.ps_bandwidth_mb_s(np.array(1), 1e6, np.array(1250.0), np.array(1), 625.0)
    assert float(capped) == 625.0  # one flow at most 5 Gbps


def test_communication_aggregation_checkpoint() -> None:
    assert float(terms.communication_time_s(4.0, np.array(10.0), 0.001)) == pytest.approx(0.802)
    assert float(terms.aggregation_time_s(np.array(10), 4.0, np.array(2), 400.0)) == 0.05
    assert float(terms.checkpoint_time_s(4.0, np.array(2), 100.0, 0.0)) == 0.04
    # one PUT per shard: its latency on top of the slice
    assert float(terms.checkpoint_time_s(4.0, np.array(2), 100.0, 0.01)) == pytest.approx(0.05)


def test_shards_on_one_host_write_the_whole_model_through_its_bandwidth() -> None:
    """On the local platform every shard writes through the one S3 server on the same cores:
    two shards take what one does, not half (separate hosts on AWS: half)."""
    shards = np.array([1, 2, 4])
    apart = terms.checkpoint_time_s(4.0, shards, 100.0, 0.01)
    together = terms.checkpoint_time_s(4.0, shards, 100.0, 0.01, shared_host=True)
    assert apart == pytest.approx([0.09, 0.05, 0.03])
    assert together == pytest.approx([0.09, 0.09, 0.09])


def test_chaining_counts() -> None:
    per = terms.iterations_per_invocation(
        870.0, np.array([70.0, 70.0, 900.0]), np.array(2.0), np.array([1000, 100, 10])
    )
    assert per.tolist() == [400, 100, 0]
    assert terms.invocations(np.array([1000, 100]), np.array([400, 100])).tolist() == [3, 1]


def test_ephemeral_storage_holds_shard_and_checkpoint() -> None:
    got = terms.ephemeral_storage_mb(1024**3, np.array([2, 8]), 0, 512)
    assert got.tolist() == [576, 512]  # 512 MiB shard + 64 headroom; small shard → minimum


def test_cost_terms() -> None:
    lam = costs.lambda_compute_usd(
        np.array(0.0000166667), np.array(1024), np.array(2), np.array(100.0)
    )
    assert float(lam) == pytest.approx(0.00333334)
    assert float(costs.ps_usd(np.array(0.36), np.array(2), np.array(30.0), 60.0)) == (
        pytest.approx(0.012)
    )  # 60 s minimum


def without_quota_or_burst(catalog: Catalog) -> Catalog:
    """The catalog as λDNN models it: compute back to back, the PS at its baseline throughout."""
    return dataclasses.replace(
        catalog,
        cpu_throttle_period_s=0.0,
        ps_types=tuple(dataclasses.replace(p, burst_s=0.0) for p in catalog.ps_types),
    )


def test_full_prediction_by_hand(catalog_2020: object) -> None:
    """One configuration of the 2020 catalog worked through term by term, with chaining.

    λDNN's base terms: no CPU-quota period and no PS burst (test_burst_and_quota_by_hand adds
    them to the same configuration).
    """
    profile = make_profile(
        model_bytes=10_000_000,
        dataset_bytes=100_000_000,
        dataset_samples=10_000,
        epochs=20,
        profiled_local_batch=50,
        max_global_batch=1000,
        startup_s=5.0,
        ps_aggregation_mb_s_per_core=500.0,
        training_rate={
            "x86_64": {"linear": {"alpha1_samples_s_per_mb": 0.05, "beta1_samples_s": 0.0}}
        },
    )
    c = predict(
        profile,
        without_quota_or_burst(catalog_2020),  # type: ignore[arg-type]
        Choice(n_workers=4, memory_mb=1024, arch="x86_64", ps_type="m5.large", ps_count=1),
    )
    k = 1000  # ⌈10,000·20 / (4·50)⌉
    load = 100 / (4 * (0.05 * 1024 + 20))  # d_t / (n·B_s(m))
    comp = 50 / (0.05 * 1024)  # b_l / R(m)
    comm = 2 * 10 / (93.75 / 4) + 2 * 0.0005  # 2·d_m / (B_ps / n) + 2 RTT
    agg = 4 * 10 / 500
    ckpt = 0.03 + 2 * 10 / 100  # one PUT: its latency (s3_request_s) + the slice
    step = comp + (comm + agg)
    every = math.ceil(max(60, ckpt / 0.02) / step)  # a checkpoint per minute of training
    it = step + ckpt / every
    pull = comm / 2  # a re-invoked worker's first pull of the trained parameters
    per_inv = math.floor((870 - (5 + load + pull + ckpt)) / it)
    links = math.ceil(k / per_inv)
    chaining = links * ckpt + (links - 1) * (0.5 + 5 + load + pull)  # the last link checkpoints
    total = 0.5 + 5 + load + k * it + chaining  # the first link's dispatch (restart_s) too
    assert (per_inv, links, every) == (450, 3, 32)
    assert float(c.checkpoint_every[0]) == every
    assert float(c.total_s[0]) == pytest.approx(total, rel=1e-12)
    billed = total - links * 0.5  # no dispatch gap bills
    lam = 0.0000166667 * 1.0 * 4 * billed
    ps = 0.096 / 3600 * max(total, 60)
    sfn = 0.000025 * (12 + 4 * 4 * links)
    periodic = k // every
    s3 = 0.0000004 * 4 * links + 0.000005 * (2 * 1 * (links + 1 + periodic) + 4 + 4)  # PUT + LIST
    req = 0.0000002 * 4 * links
    endpoints = 0.01 * 7 * math.ceil(total / 3600)  # 7 interface endpoints, started hours
    assert float(c.lambda_usd[0]) == pytest.approx(lam, rel=1e-12)
    assert float(c.ps_usd[0]) == pytest.approx(ps, rel=1e-12)
    assert float(c.endpoints_usd[0]) == pytest.approx(endpoints, rel=1e-12)
    assert float(c.total_usd[0]) == pytest.approx(lam + req + ps + sfn + s3 + endpoints, rel=1e-12)
    assert float(c.ephemeral_usd[0]) == 0.0  # 2020: /tmp fixed at 512 MB


def test_checkpoint_interval_bounds_the_loss_unless_checkpoints_are_slow() -> None:
    """A minute of training between checkpoints, stretched so they take at most 2% of it."""
    got = terms.checkpoint_interval_s(np.array([0.01, 1.2, 3.0]), 60.0, 0.02)
    assert got.tolist() == [60.0, 60.0, 150.0]
    every = terms.checkpoint_every_iterations(np.array([0.002, 7.0, 120.0, np.inf]), 60.0)
    assert every.tolist() == [30_000, 9, 1, 1]
    share = terms.periodic_checkpoint_s(
        np.array([0.9]), terms.checkpoint_every_iterations(np.array([7.0]), 60.0)
    )
    assert float(share[0]) == pytest.approx(0.1)  # 0.9 s every 9 iterations


def test_the_runs_set_up_adds_to_time_and_to_what_bills_by_the_hour_not_to_lambda(
    catalog_2025: Catalog,
) -> None:
    """Opening the run's endpoints and starting the PS come before any worker: the PS and the
    endpoints bill during them, Lambda does not."""
    choice = Choice(n_workers=4, memory_mb=2048, arch="x86_64", ps_type="c5.large", ps_count=1)
    without = dataclasses.replace(catalog_2025, endpoint_ready_s=0.0, ps_start_s=0.0)
    a, b = predict(make_profile(), without, choice), predict(make_profile(), catalog_2025, choice)
    setup = catalog_2025.endpoint_ready_s + catalog_2025.ps_start_s
    assert setup == 210.0
    assert float(b.total_s[0]) == pytest.approx(float(a.total_s[0]) + setup, rel=1e-12)
    assert float(b.billed_s[0]) == pytest.approx(float(a.billed_s[0]), rel=1e-12)
    ps_rate = catalog_2025.ps_type("c5.large").usd_per_hour / 3600
    assert float(b.ps_usd[0]) - float(a.ps_usd[0]) == pytest.approx(ps_rate * setup, rel=1e-9)
    # No endpoints to open (the emulator), no wait for them.
    local = dataclasses.replace(catalog_2025, interface_endpoints=())
    assert local.run_setup_s == catalog_2025.ps_start_s


def test_the_first_link_waits_for_the_platforms_launch_and_dispatch(
    catalog_2025: Catalog,
) -> None:
    """The first link pays the dispatch every link pays (restart_s) and the platform's start of a
    fresh environment (launch_s): both in the time; Lambda bills the init, not the dispatch."""
    choice = Choice(n_workers=4, memory_mb=2048, arch="x86_64", ps_type="c5.large", ps_count=1)
    launching = dataclasses.replace(catalog_2025, launch_s=0.4)
    a, b = predict(make_profile(), catalog_2025, choice), predict(make_profile(), launching, choice)
    assert float(a.launch_s[0]) == catalog_2025.restart_s  # no launch figure: the dispatch only
    assert float(b.launch_s[0]) == pytest.approx(0.4 + catalog_2025.restart_s)
    assert float(b.total_s[0]) == pytest.approx(float(a.total_s[0]) + 0.4, rel=1e-12)
    assert float(b.billed_s[0]) == pytest.approx(float(a.billed_s[0]) + 0.4, rel=1e-12)
    links = int(a.invocations[0])
    no_gap = float(a.total_s[0]) - catalog_2025.run_setup_s - links * catalog_2025.restart_s
    assert float(a.billed_s[0]) == pytest.approx(no_gap, rel=1e-12)


def test_fresh_environments_take_turns_on_shared_cores_as_start_ups_do() -> None:
    """On a platform whose functions share C cores, n environments starting at once share them:
    launch_s · max(1, n/C) before the dispatch (AWS: each its own, launch_s)."""
    from tests.local_catalog import local_catalog

    catalog = dataclasses.replace(local_catalog(), total_vcpu=1.5, init_cores=2.0, launch_s=0.1)
    launch = {
        n: float(predict(make_profile(), catalog, Choice(n, 1024, "x86_64", "loopback", 1))
                 .launch_s[0])
        for n in (1, 2, 8)
    }  # fmt: skip
    assert launch[1] == launch[2] == pytest.approx(0.1 + catalog.restart_s)
    assert launch[8] == pytest.approx(0.1 * 8 / 2.0 + catalog.restart_s)
    aws = dataclasses.replace(catalog, total_vcpu=None, init_cores=None)
    got = predict(make_profile(), aws, Choice(8, 1024, "x86_64", "loopback", 1)).launch_s[0]
    assert float(got) == pytest.approx(0.1 + catalog.restart_s)


def test_too_slow_to_fit_one_invocation_is_infeasible(catalog_2025: object) -> None:
    profile = make_profile(
        training_rate={"x86_64": {"points": [{"vcpu_share": 1.0, "samples_per_s": 0.01}]}}
    )
    c = predict(
        profile,
        catalog_2025,  # type: ignore[arg-type]
        Choice(n_workers=1, memory_mb=1024, arch="x86_64", ps_type="c5.large", ps_count=1),
    )
    assert not bool(c.feasible[0]) and math.isinf(float(c.total_usd[0]))


def test_iteration_cap_chains_more_links_and_zero_means_no_cap(catalog_2025: object) -> None:
    """The emulator's --iterations-per-invocation is a rule of the run the prediction obeys."""
    import dataclasses

    choice = Choice(n_workers=1, memory_mb=1769, arch="x86_64", ps_type="c5.large", ps_count=1)
    profile = make_profile(epochs=1)
    free = predict(profile, catalog_2025, choice)  # type: ignore[arg-type]
    k, fit = int(free.iterations[0]), int(free.iterations_per_invocation[0])
    assert fit == k and int(free.invocations[0]) == 1  # it all fits one 900 s invocation
    cap = k // 3 + 1  # three links: cap, cap, and the rest
    capped_catalog = dataclasses.replace(catalog_2025, max_iterations_per_invocation=cap)
    capped = predict(profile, capped_catalog, choice)
    assert int(capped.iterations_per_invocation[0]) == cap
    assert int(capped.invocations[0]) == 3
    # one link pays its final checkpoint only; three pay three and two restarts
    assert float(free.chaining_s[0]) == float(free.checkpoint_s[0]) > 0.0
    assert float(capped.chaining_s[0]) > 3 * float(capped.checkpoint_s[0])
    assert float(capped.total_s[0]) > float(free.total_s[0])
    big = dataclasses.replace(catalog_2025, max_iterations_per_invocation=10 * k)
    assert float(predict(profile, big, choice).total_s[0]) == float(free.total_s[0])


def test_warm_links_start_in_the_platforms_warm_start_time(catalog_2025: object) -> None:
    """A platform that re-invokes on the previous link's warm environment (the emulator) pays
    its warm start per extra link instead of the workload's cold start and shard reload."""
    import dataclasses

    profile = make_profile(epochs=1)
    choice = Choice(n_workers=1, memory_mb=1769, arch="x86_64", ps_type="c5.large", ps_count=1)
    k = int(predict(profile, catalog_2025, choice).iterations[0])  # type: ignore[arg-type]
    cold_catalog = dataclasses.replace(catalog_2025, max_iterations_per_invocation=k // 3 + 1)  # type: ignore[type-var]
    warm_catalog = dataclasses.replace(cold_catalog, warm_start_s=0.01)
    cold, warm = predict(profile, cold_catalog, choice), predict(profile, warm_catalog, choice)
    assert int(cold.invocations[0]) == int(warm.invocations[0]) == 3
    checkpoints = 3 * float(cold.checkpoint_s[0])  # every link's, the last one's too
    restart = cold_catalog.restart_s
    pull = (float(warm.chaining_s[0]) - checkpoints) / 2 - restart - 0.01
    assert pull > 0.0  # a relink's first pull of the trained parameters
    cold_start = profile.startup_s + float(cold.load_s[0])
    assert float(cold.chaining_s[0]) == pytest.approx(
        checkpoints + 2 * (restart + cold_start + pull)
    )
    assert float(warm.total_s[0]) < float(cold.total_s[0])


def test_cold_starts_share_the_cores_of_a_shared_platform() -> None:
    """n cold starts at once on C shared cores take startup · max(1, n/C); on AWS each its own."""
    from provisioner.local_machine import cold_start_s

    assert cold_start_s(1.2, np.array([1, 2, 4]), None).tolist() == [1.2, 1.2, 1.2]
    assert cold_start_s(1.2, np.array([1, 2, 3, 6]), 1.5) == pytest.approx([1.2, 1.6, 2.4, 4.8])


def test_cold_starts_share_the_cores_measured_at_their_n() -> None:
    """Where the catalog measured the cores per n, n cold starts get the cores interpolated at
    n (flat beyond the points): 1.0× alone at n = 2 on 2 cores, n/1.74 at 4, n/1.9 at 8."""
    from provisioner.local_machine import cold_start_s, init_cores_at
    from tests.local_catalog import local_catalog

    points = ((2.0, 2.0), (4.0, 1.74), (8.0, 1.9))
    cores = init_cores_at(np.array([1, 2, 4, 6, 8, 16]), 1.7, points)
    assert np.asarray(cores) == pytest.approx([2.0, 2.0, 1.74, 1.82, 1.9, 1.9])
    assert init_cores_at(np.array([4]), 1.7, ()) == 1.7  # no points: the one figure
    assert init_cores_at(np.array([4]), None, ()) is None  # AWS: unlimited
    got = cold_start_s(2.5, np.array([1, 2, 4, 8, 16]), cores[[0, 1, 2, 4, 5]])
    assert got == pytest.approx([2.5, 2.5, 2.5 * 4 / 1.74, 2.5 * 8 / 1.9, 2.5 * 16 / 1.9])
    profile = make_profile()
    catalog = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, init_cores=1.7, init_cores_by_n=points
    )
    for n, expected in ((1, 1.0), (2, 1.0), (4, 4 / 1.74), (8, 8 / 1.9)):
        got_s = predict(profile, catalog, Choice(n, 1024, "x86_64", "loopback", 1)).startup_s
        assert got_s == pytest.approx(profile.startup_s * expected)


def test_a_crowd_stretches_the_import_not_the_workloads_own_start_up() -> None:
    """Where the catalog measured the import alone, n cold starts at once stretch that part by
    max(1, n/C) and add the rest of the workload's start-up (its build, its first pull) once:
    two workloads that import the same module crowd alike, whatever their own start-ups."""
    from provisioner.local_machine import cold_start_s
    from tests.local_catalog import local_catalog

    n = np.array([1, 2, 4, 8])
    assert cold_start_s(1.2, n, 2.0, 1.0) == pytest.approx([1.2, 1.2, 1.2 + 1.0, 1.2 + 3.0])
    assert cold_start_s(1.2, n, None, 1.0) == pytest.approx([1.2] * 4)  # AWS: its own cores
    # an import longer than the whole start-up stretches the start-up, no more
    assert cold_start_s(0.8, n, 2.0, 1.0) == pytest.approx(cold_start_s(0.8, n, 2.0))
    catalog = dataclasses.replace(local_catalog(), init_cores=2.0, init_import_s=1.0)
    profile = make_profile()
    got = [predict(profile, catalog, Choice(k, 1024, "x86_64", "loopback", 1)).startup_s
           for k in (1, 8)]  # fmt: skip
    assert got[0] == pytest.approx(profile.startup_s)
    assert got[1] - got[0] == pytest.approx(1.0 * (8 / 2.0 - 1.0))


def test_cold_starts_share_the_machine_cores_not_the_workers_quota() -> None:
    """The init phase runs outside the quota: on a catalog with init_cores, n cold starts
    share those cores (2 here), not total_vcpu (1.5)."""
    from tests.local_catalog import local_catalog

    profile = make_profile()
    quota_only = dataclasses.replace(local_catalog(), total_vcpu=1.5, init_cores=None)
    machine = dataclasses.replace(quota_only, init_cores=2.0)
    for catalog, cores in ((quota_only, 1.5), (machine, 2.0)):
        for n in (1, 4, 8):
            got = predict(profile, catalog, Choice(n, 1024, "x86_64", "loopback", 1)).startup_s
            assert got == pytest.approx(profile.startup_s * max(1.0, n / cores))


def test_a_share_between_whole_vcpus_trains_at_its_whole_threads() -> None:
    """The worker runs max(1, ⌊s⌋) torch threads, so 1.5 vCPU trains as 1 and 2.5 as 2; points
    keyed by memory (λDNN's runtime, every core busy) are read as they are."""
    assert terms.threaded_share(np.array([0.5, 1.0, 1.5, 2.0, 2.5])).tolist() == [
        0.5, 1.0, 1.0, 2.0, 2.0,
    ]  # fmt: skip
    curve = RateCurve(arch="x86_64", vcpu_shares=(0.5, 1.0, 2.0), samples_per_s=(50, 100, 180))
    got = terms.training_rate_samples_s(curve, np.array([1.5, 1.99, 2.0]), np.zeros(3))
    assert got.tolist() == [100.0, 100.0, 180.0]
    by_memory = RateCurve(arch="x86_64", memory_points_mb=(1769, 3538), samples_per_s=(100, 180))
    assert terms.training_rate_samples_s(by_memory, np.array([1.5]), np.array([2653.5]))[0] == 140


def test_the_loads_cpu_part_runs_at_the_share_one_thread_and_the_shared_cores_give() -> None:
    n = np.array([1, 1, 1, 8])
    share = np.array([0.5, 1.0, 3.0, 1.0])
    assert terms.load_overhead_s(0.3, share, n, None).tolist() == [0.6, 0.3, 0.3, 0.3]
    # on 1.5 shared cores 8 loads at once run at 0.1875 each
    assert terms.load_overhead_s(0.3, share, n, 1.5) == pytest.approx([0.6, 0.3, 0.3, 1.6])
    assert terms.load_overhead_s(None, share, n, 1.5).tolist() == [0.0] * 4  # not measured


def test_warm_up_is_paid_once_per_cold_process(catalog_2025: object) -> None:
    """A fresh process's slower first steps: per link where links start cold (AWS), once where
    they reuse the warm environment (the emulator); it counts in compute and in the total."""
    import dataclasses

    choice = Choice(n_workers=1, memory_mb=1769, arch="x86_64", ps_type="c5.large", ps_count=1)
    plain = make_profile(epochs=1)
    warm_up = dataclasses.replace(plain, warmup_iterations=3.0)
    k = int(predict(plain, catalog_2025, choice).iterations[0])  # type: ignore[arg-type]
    cold_cat = dataclasses.replace(catalog_2025, max_iterations_per_invocation=k // 3 + 1)  # type: ignore[type-var]
    warm_cat = dataclasses.replace(cold_cat, warm_start_s=0.01)
    for cat, cold_processes in ((cold_cat, 3), (warm_cat, 1)):
        base, slow = predict(plain, cat, choice), predict(warm_up, cat, choice)
        step = float(base.compute_per_iteration_s[0])  # at 1,769 MB: the one-vCPU step
        assert float(slow.warmup_s[0]) == pytest.approx(3.0 * step * cold_processes)
        assert float(slow.total_s[0]) == pytest.approx(
            float(base.total_s[0]) + float(slow.warmup_s[0])
        )
    assert float(predict(plain, cold_cat, choice).warmup_s[0]) == 0.0


def test_the_loops_extra_cpu_is_read_at_the_share_on_shared_cores_only() -> None:
    points = ((0.25, 0.0004), (1.0, 0.0002))
    got = local_machine.loop_extra_cpu_s(points, np.array([0.1, 0.25, 0.625, 1.0, 2.0]), 1.5)
    assert got == pytest.approx([0.0004, 0.0004, 0.0003, 0.0002, 0.0002])  # flat beyond the ends
    assert local_machine.loop_extra_cpu_s(points, np.array([0.5]), None).tolist() == [0.0]  # AWS
    assert local_machine.loop_extra_cpu_s((), np.array([0.5]), 1.5).tolist() == [
        0.0
    ]  # not measured
    # never more at a larger share (more memory is never slower): a higher point is clipped
    rising = ((0.25, 0.0004), (1.0, 0.0002), (2.0, 0.0005))
    got = local_machine.loop_extra_cpu_s(rising, np.array([1.0, 1.5, 2.0]), 1.5)
    assert got == pytest.approx([0.0002, 0.0002, 0.0002])


def test_the_loops_extra_cpu_slows_a_throttled_step_on_the_local_platform_only() -> None:
    """A loop that spends more CPU beyond its step than the catalog's exchange share says is
    held by the quota like compute: the local step grows by about that CPU over the share,
    mostly in the exchange (the quota runs out in each phase in proportion to its CPU, so the
    step's compute takes a share of the longer wait, never more than the step grew); a
    measured extra below the catalog's figure changes nothing, and AWS ignores it."""
    from tests.local_catalog import local_catalog

    base = make_profile()
    choice = Choice(1, 590, "x86_64", "loopback", 1)  # a third of a vCPU
    catalog = dataclasses.replace(local_catalog(), total_vcpu=1.5)  # shared cores
    plain = predict(base, catalog, choice)
    heavy = predict(dataclasses.replace(base, loop_extra_cpu=((0.25, 0.002), (1.0, 0.002))),
                    catalog, choice)  # fmt: skip
    light = predict(dataclasses.replace(base, loop_extra_cpu=((0.25, 0.0), (1.0, 0.0))),
                    catalog, choice)  # fmt: skip
    compute_grown = float(heavy.compute_per_iteration_s[0] - plain.compute_per_iteration_s[0])
    comm_grown = float(
        heavy.communication_per_iteration_s[0] - plain.communication_per_iteration_s[0]
    )
    assert 0.0 <= compute_grown < comm_grown
    # 2 ms of CPU held like compute: at least 2 ms × the step's slowdown at this share (the
    # profile's x/c = R(1)/R(s)), and not wildly more (the quota's refill waits grow with it)
    slowdown = float(plain.compute_per_iteration_s[0]) / (32 / 180)
    grown = float(heavy.iteration_s[0] - plain.iteration_s[0])
    assert 0.002 * slowdown <= grown <= 2 * 0.002 * slowdown
    assert float(light.iteration_s[0]) == pytest.approx(float(plain.iteration_s[0]))
    aws = dataclasses.replace(catalog, total_vcpu=None, init_cores=None)  # own cores each
    a = predict(base, aws, choice)
    b = predict(dataclasses.replace(base, loop_extra_cpu=((0.25, 0.002),)), aws, choice)
    assert float(a.iteration_s[0]) == float(b.iteration_s[0])


def test_a_measured_loop_figure_keeps_more_memory_never_slower() -> None:
    """A loop figure that rises with the share (noise, or two torch threads' extra work) must
    not make more memory slower: the step stays non-increasing in memory, as the exact search
    assumes (digits-mlp's committed profile, its loop points replaced by a steeply rising
    pair, on a shared-core local catalog)."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    profile = dataclasses.replace(
        load_profile("digits-mlp"),
        loop_extra_cpu=((0.25, 0.0), (1.5, 0.01)),
    )
    catalog = dataclasses.replace(local_catalog(), total_vcpu=1.5, max_vcpu=1.5)
    steps = [
        float(predict(profile, catalog, Choice(2, m, "x86_64", "loopback", 1)).iteration_s[0])
        for m in range(profile.min_memory_mb, 2654, 37)
    ]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:], strict=False))


def test_a_step_costs_its_crowded_cpu_once_workers_outnumber_the_cores() -> None:
    n = np.array([1, 2, 3, 4, 8])
    # measured 1.8× with 4 workers on 2 cores: 1 up to the cores, linear to 4, flat beyond
    assert local_machine.crowded_step_factor(n, 1.8, 4, 2.0) == pytest.approx([1, 1, 1.4, 1.8, 1.8])
    assert (
        local_machine.crowded_step_factor(n, 1.8, 4, None).tolist() == [1.0] * 5
    )  # AWS: own cores
    assert local_machine.crowded_step_factor(n, None, 1, 2.0).tolist() == [1.0] * 5  # not measured


def test_shared_cores_hold_an_iteration_to_the_cpu_of_all_workers_and_shards() -> None:
    # 8 workers at 2 ms of CPU each and 6 ms in the shards, on 2 cores: 11 ms an iteration
    got = local_machine.shared_cpu_iteration_s(
        np.array([8]), np.array([0.002]), np.array([0.006]), 2.0
    )
    assert got == pytest.approx([0.011])
    assert local_machine.shared_cpu_iteration_s(np.array([8]), np.array([0.002]), 0.006, None) == [
        0.0
    ]


def _loop_on_shared_cores(
    *,
    ps_request_cpu_s: float,
    crowded: float | None,
    n: int = 8,
    shards: int = 2,
    aws: bool = False,
) -> float:
    """One iteration (s) of the digits MLP at n workers × 1024 MB on a 2-core local platform."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    digits = load_profile("digits-mlp")
    # its loop's exchange as timed up to 1 vCPU: the exchange, not the CPU bound, then decides
    # the iteration without the shards' CPU (the 2-vCPU point, lower, would let the bound decide)
    profile = dataclasses.replace(
        digits, crowded_step_ratio=crowded, crowded_processes=4,
        loop_overhead=tuple(p for p in digits.loop_overhead if p[0] <= 1.0),
    )  # fmt: skip
    # no PUT latency: a checkpoint of the MLP's bytes alone, whose periodic share of an
    # iteration (moving with the step) stays below what the differences read here resolve
    catalog = dataclasses.replace(
        local_catalog(), total_vcpu=None if aws else 1.5, compute_cores=None if aws else 2.0,
        init_cores=None, ps_request_cpu_s=ps_request_cpu_s, s3_request_s=0.0,
    )  # fmt: skip
    choice = Choice(n, 1024, "x86_64", "loopback", shards)
    return float(predict(profile, catalog, choice).iteration_s[0])


def test_the_shards_cpu_per_request_sets_the_iteration_where_it_binds() -> None:
    """Once the CPU bound decides the iteration, each second a shard spends on one worker's
    push and pull adds n·shards/C seconds (8 workers, 2 shards, 2 cores: 8×); below it, the
    step is the one without; AWS (own cores) ignores it."""
    plain = _loop_on_shared_cores(ps_request_cpu_s=0.0, crowded=None)
    busy = _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=None)
    busier = _loop_on_shared_cores(ps_request_cpu_s=0.02, crowded=None)
    assert busy > plain
    # (rel: the periodic PS checkpoint's share of an iteration moves with the step)
    assert busier - busy == pytest.approx(8 * 2 * 0.01 / 2.0, rel=1e-4)
    assert _loop_on_shared_cores(ps_request_cpu_s=1e-9, crowded=None) == pytest.approx(plain)
    aws = _loop_on_shared_cores(ps_request_cpu_s=0.0, crowded=None, aws=True)
    assert _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=None, aws=True) == aws


def test_a_crowded_step_adds_its_extra_cpu_of_every_worker_over_the_cores() -> None:
    """Where the CPU bound decides, a crowd ratio of 2 makes each worker's step cost twice its
    CPU alone, in place of the parallel slowdown (the crowd was measured with every core busy:
    it holds that slowdown already): n · (2 − 1/speed) · (b_l / R(1)) / C more; at one worker
    per core it changes nothing."""
    from provisioner import load_profile

    profile = load_profile("digits-mlp")
    curve = profile.rate("x86_64")
    assert curve is not None
    core_step_s = 16 / float(terms.training_rate_samples_s(curve, np.array(1.0), np.array(1769)))
    speed = float(local_machine.parallel_speed(np.array(8), profile.parallel_speed_ratio,
                                       profile.parallel_processes, 1.5))  # fmt: skip
    once = _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=1.0)
    twice = _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=2.0)
    assert speed < 1  # digits-mlp's profile: two at once run slower than one alone
    assert twice - once == pytest.approx(8 * (2.0 - 1.0 / speed) * core_step_s / 2.0, rel=1e-4)
    alone = _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=1.0, n=2, shards=1)
    assert _loop_on_shared_cores(ps_request_cpu_s=0.01, crowded=2.0, n=2, shards=1) == alone


def test_the_shared_loop_floor_keeps_more_memory_never_slower() -> None:
    """The CPU bound holds the step's shape in memory (the exact search relies on it)."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    profile = dataclasses.replace(
        load_profile("digits-mlp"), crowded_step_ratio=1.9, crowded_processes=4
    )
    catalog = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, max_vcpu=1.5, compute_cores=2.0, ps_request_cpu_s=3e-4
    )
    for n, shards in ((2, 2), (4, 1), (8, 2)):
        steps = [
            float(
                predict(profile, catalog, Choice(n, m, "x86_64", "loopback", shards)).iteration_s[0]
            )
            for m in range(profile.min_memory_mb, 2654, 53)
        ]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:], strict=False)), n


def test_first_steps_at_once_share_the_cores_and_fault_more_in_a_crowd() -> None:
    """n ≤ C: the warm-up alone. Beyond, each worker's excess grows by the crowd's extra per
    doubling of n/C (measured at `processes`) and n of them share C cores; AWS (own cores)
    keeps the excess alone at any n."""
    alone, crowd = 0.5, 1.1  # s of CPU: MobileNetV2's first step in the kernel, 1 and 4 on 2
    at = [
        float(local_warmup.crowded_warmup_s(np.array(n), np.array(alone), np.array(crowd), 4, 2.0))
        for n in (1, 2, 4, 8)
    ]
    assert at[0] == at[1] == pytest.approx(alone)
    assert at[2] == pytest.approx(2 * crowd)  # 4 on 2 cores: the crowd's, twice as long
    assert at[3] == pytest.approx(4 * (alone + 2 * (crowd - alone)))  # two doublings
    # nothing measured in a crowd: the excess alone, shared
    no_crowd = local_warmup.crowded_warmup_s(np.array([1, 8]), np.array(alone), None, 1, 2.0)
    assert list(no_crowd) == pytest.approx([alone, 4 * alone])
    # a crowd that came out cheaper than alone adds nothing beyond the sharing
    assert float(
        local_warmup.crowded_warmup_s(np.array(8), np.array(alone), np.array(0.1), 4, 2.0)
    ) == (pytest.approx(4 * alone))
    aws = local_warmup.crowded_warmup_s(np.array([1, 8]), np.array(alone), np.array(crowd), 4, None)
    assert list(aws) == pytest.approx([alone, alone])


def test_a_first_steps_excess_runs_at_the_cores_a_worker_gets_under_its_quota() -> None:
    """The excess is CPU: its wall is the excess over min(1, share, C/n) cores. 5 workers at
    0.3 vCPU on 2 cores: each quota holds its worker to 0.3 of a core (1/0.3 = 3.33×), not the
    sharing's n/C = 2.5×; 8 at 0.9 vCPU: the sharing, 4×; one at 2 vCPU: one core (a first step's
    faults are one thread's); AWS (own cores): the excess as it is."""
    alone = 0.3  # s of CPU
    at = local_warmup.crowded_warmup_s(
        np.array([5, 8, 1, 1, 4]), np.array(alone), None, 1, 2.0,
        np.array([0.3, 0.9, 2.0, 0.5, 1.0]),
    )  # fmt: skip
    assert list(at) == pytest.approx([1.0, 1.2, 0.3, 0.6, 0.6])
    unheld = local_warmup.crowded_warmup_s(np.array([5, 8]), np.array(alone), None, 1, 2.0)
    assert list(unheld) == pytest.approx([0.75, 1.2])  # no share given: the sharing alone
    aws = local_warmup.crowded_warmup_s(
        np.array([5, 1]), np.array(alone), None, 1, None, np.array([0.3, 0.5])
    )
    assert list(aws) == pytest.approx([alone, alone])


def test_the_local_warmup_never_grows_with_memory_and_aws_keeps_its_own() -> None:
    """In the plan, the local warm-up is the one-vCPU excess over the quota's share where that
    holds the worker (twice as long at 0.5 vCPU as at 1 at n = 1), non-increasing in memory (the
    search's T(m) keeps its shape); the AWS warm-up does not depend on memory."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    profile = dataclasses.replace(
        load_profile("digits-mlp"), warmup_iterations=2.0, crowded_warmup_iterations=None
    )
    local = dataclasses.replace(local_catalog(), total_vcpu=1.5, compute_cores=2.0)
    aws = dataclasses.replace(local, total_vcpu=None, compute_cores=None, init_cores=None)

    def warmup_s(catalog: Catalog, n: int, memory_mb: int) -> float:
        choice = Choice(n, memory_mb, "x86_64", "loopback", 1)
        return float(predict(profile, catalog, choice).warmup_s[0])

    mb = local.mb_per_vcpu
    half, one = warmup_s(local, 1, round(mb / 2)), warmup_s(local, 1, round(mb))
    assert half == pytest.approx(2 * one, rel=1e-3)  # memory in whole MB
    for n in (1, 3, 8):
        walls = [warmup_s(local, n, m) for m in range(profile.min_memory_mb, 3000, 97)]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(walls, walls[1:], strict=False)), n
        assert warmup_s(aws, n, 512) == pytest.approx(warmup_s(aws, n, 2048))


def test_the_crowded_warmup_is_the_plans_warmup_on_shared_cores_only() -> None:
    """On the local platform a profile's crowded warm-up adds to the warm-up (compute, once per
    cold process) at n > C only; the AWS prediction is unchanged."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    base = dataclasses.replace(
        load_profile("digits-mlp"), warmup_iterations=1.0, crowded_step_ratio=1.1,
        crowded_processes=4, crowded_warmup_iterations=None,
    )  # fmt: skip
    crowded = dataclasses.replace(base, crowded_warmup_iterations=3.0)
    local = dataclasses.replace(local_catalog(), total_vcpu=1.5, compute_cores=2.0)
    aws = dataclasses.replace(local, total_vcpu=None, compute_cores=None, init_cores=None)

    def warmup_s(profile: WorkloadProfile, catalog: Catalog, n: int) -> float:
        return float(predict(profile, catalog, Choice(n, 1024, "x86_64", "loopback", 1))
                     .warmup_s[0])  # fmt: skip

    assert warmup_s(crowded, local, 2) == pytest.approx(warmup_s(base, local, 2))
    assert warmup_s(crowded, local, 8) > warmup_s(base, local, 8)
    assert warmup_s(crowded, aws, 8) == pytest.approx(warmup_s(base, aws, 8))


def test_the_exchange_alone_takes_at_least_the_profiles_loop_at_one_vcpu() -> None:
    """On shared cores a PS exchange takes at least the profile's loop overhead at 1 vCPU (the
    points interpolated there, or a larger share's point where that is less), stretched by n/C
    as the exchange is; AWS, or a profile without the loop, keeps the catalog's exchange."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    points = ((0.5, 9e-4), (2.0, 1e-3))
    assert local_machine.loop_exchange_s(points, 1.5) == pytest.approx(9e-4 + 1e-4 / 3)
    # from 1 vCPU up every point times the same exchange: the least counts
    assert local_machine.loop_exchange_s(((0.5, 9e-4), (1.0, 8e-4), (2.0, 3e-4)), 1.5) == 3e-4
    assert local_machine.loop_exchange_s(((0.5, 9e-4), (2.0, 3e-4)), 1.5) == 3e-4
    assert (
        local_machine.loop_exchange_s(points, None) == local_machine.loop_exchange_s((), 1.5) == 0.0
    )
    # without the ranks' wait for the slowest step (its own test): the floor alone
    bare = dataclasses.replace(load_profile("digits-mlp"), lockstep_wait_fraction=None)
    slow = dataclasses.replace(bare, loop_overhead=((1.0, 0.05),))  # far above the catalog's
    local = dataclasses.replace(local_catalog(), total_vcpu=1.5, compute_cores=2.0)
    aws = dataclasses.replace(local, total_vcpu=None, compute_cores=None, init_cores=None)

    def communication_s(profile: WorkloadProfile, catalog: Catalog, n: int) -> float:
        return float(predict(profile, catalog, Choice(n, 1024, "x86_64", "loopback", 1))
                     .communication_per_iteration_s[0])  # fmt: skip

    assert communication_s(slow, local, 1) == pytest.approx(0.05)
    assert communication_s(slow, local, 3) == pytest.approx(0.05 * 3 / 1.5)
    assert communication_s(bare, local, 1) < 0.05
    assert communication_s(slow, aws, 1) == communication_s(bare, aws, 1)


def test_ranks_wait_for_the_slowest_step_on_shared_cores_at_two_workers_or_more() -> None:
    """The profile's lockstep wait adds its fraction of the step to the exchange from n = 2 on,
    on shared cores only; the compute part is what it was, and more memory is never slower."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    assert local_machine.lockstep_wait_s(np.array([0.2, 0.1]), np.array([1, 2]), 0.05, 2.0) == (
        pytest.approx([0.0, 0.005])
    )
    assert not np.any(local_machine.lockstep_wait_s(np.array([0.2]), np.array([4]), 0.05, None))
    assert not np.any(local_machine.lockstep_wait_s(np.array([0.2]), np.array([4]), None, 2.0))
    bare = load_profile("synthetic-cifar-cnn")
    waits = dataclasses.replace(bare, lockstep_wait_fraction=0.05)
    local = dataclasses.replace(local_catalog(), total_vcpu=2.0, compute_cores=2.0)
    aws = dataclasses.replace(local, total_vcpu=None, compute_cores=None, init_cores=None)

    def cell(profile: WorkloadProfile, catalog: Catalog, n: int, mb: int = 1769) -> object:
        return predict(profile, catalog, Choice(n, mb, "x86_64", "loopback", 1))

    for n in (1, 2, 4):
        plain, waited = cell(bare, local, n), cell(waits, local, n)
        extra = waited.communication_per_iteration_s[0] - plain.communication_per_iteration_s[0]
        if n == 1:
            assert extra == 0.0
        else:
            assert 0 < extra <= 0.05 * plain.iteration_s[0]
            assert waited.iteration_s[0] >= plain.iteration_s[0]
    both = cell(bare, aws, 2), cell(waits, aws, 2)
    assert both[0].iteration_s[0] == both[1].iteration_s[0]
    steps = [float(cell(waits, local, 2, m).iteration_s[0]) for m in range(1024, 3009, 64)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps, steps[1:], strict=False))


def test_a_crowd_past_the_fresh_memory_line_pays_the_cold_faults_on_shared_cores_only() -> None:
    """Below the line the crowd's first steps cost what they cost alone; past it each MB of the
    first steps' memory past the line costs (cold − warm) s/MB of kernel CPU, shared out over
    the n workers, never more than all of the steps' memory; AWS and a profile without its
    memory figures see none of it."""
    from provisioner import load_profile
    from tests.local_catalog import local_catalog

    profile = dataclasses.replace(
        load_profile("synthetic-cifar-mobilenetv2"), resident_mb=250.0, first_step_mb=650.0,
        dataset_bytes=100 * 2**20,
    )  # fmt: skip
    local = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, compute_cores=2.0, fresh_memory_warm_mb=5500.0,
        fault_warm_s_per_mb=0.0007, fault_cold_s_per_mb=0.0031,
    )  # fmt: skip
    batch = profile.profiled_local_batch

    def excess(n: int, local_batch: int = batch) -> float:
        return float(local_warmup.fresh_memory_excess_cpu_s(n, local_batch, profile, local))

    assert excess(4) == 0.0  # 4 × 900 MB + the dataset: below the line
    held = 8 * (250 + 650) + 100
    assert excess(8) == pytest.approx((held - 5500) * 0.0024 / 8)
    assert excess(8, batch // 2) < excess(8)  # half the batch, half the step's memory
    assert excess(40) == pytest.approx(650 * 0.0024)  # at most all of the step's memory
    for missing in (
        dataclasses.replace(profile, first_step_mb=None),
        dataclasses.replace(profile, resident_mb=None),
    ):
        assert float(local_warmup.fresh_memory_excess_cpu_s(8, batch, missing, local)) == 0.0
    plain = dataclasses.replace(local, fresh_memory_warm_mb=None)
    assert float(local_warmup.fresh_memory_excess_cpu_s(8, batch, profile, plain)) == 0.0

    aws = dataclasses.replace(local, total_vcpu=None, compute_cores=None, init_cores=None)

    def warmup_s(catalog: Catalog, n: int) -> float:
        choice = Choice(n, 2048, "x86_64", "loopback", 1)
        return float(predict(profile, catalog, choice).warmup_s[0])

    assert warmup_s(local, 8) > warmup_s(plain, 8)
    assert warmup_s(local, 2) == pytest.approx(warmup_s(plain, 2))
    assert warmup_s(aws, 8) == pytest.approx(
        warmup_s(dataclasses.replace(aws, fresh_memory_warm_mb=None), 8)
    )
