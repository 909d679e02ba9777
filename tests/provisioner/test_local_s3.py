"""The local S3 exchange's floor from its requests' CPU (provisioner/local_s3.py), by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from provisioner import local_machine
from provisioner.catalog import load_catalog
from provisioner.local_s3 import (
    s3_cpu_floor_s,
    s3_iteration_requests,
    s3_reducer_requests,
    s3_reducer_waves,
)


def test_requests_of_one_iteration() -> None:
    # n = 4, k = 2 on 2 cores: PUT 4·2 + 2 = 10, GET found 2·4·2 = 16, empty 0.25·4/2 = 0.5
    # a wait, 0.5·16 = 8, DELETE 2
    assert s3_iteration_requests(4, 2, 2.0) == pytest.approx(36.0)
    # the reducer: PUT 2 partitions + 1 state, GET 4 partitions + 2 slices, 1 DELETE,
    # empty 0.5·(4 + 2) = 3
    assert s3_reducer_requests(4, 2, 2.0) == pytest.approx(13.0)
    # more workers a core, more empty GETs a wait, up to SHARED_MISSES_MAX
    assert s3_iteration_requests(2, 2, 2.0) == pytest.approx(6 + 8 + 0.25 * 8 + 2)
    assert s3_iteration_requests(12, 1, 2.0) == pytest.approx(13 + 24 + 0.9 * 24 + 1)


def test_floor_is_the_machine_or_the_reducers_chain_whichever_is_longer() -> None:
    # machine: 36·(1 + 1) ms / 2 cores = 36 ms; reducer: 13·1 ms / 0.25 = 52 ms of its
    # quota and 5 waves (PUT, GET of 4 partitions in one window, PUT, GET, DELETE) of 1 ms
    assert s3_reducer_waves(4) == 5.0 and s3_reducer_waves(5) == 6.0
    assert s3_cpu_floor_s(4, 2, 0.25, 0.001, 0.001, 2.0) == pytest.approx(0.057)
    # at a full core the reducer needs 13 + 5 ms: the machine's 36 ms holds
    assert s3_cpu_floor_s(4, 2, 1.0, 0.001, 0.001, 2.0) == pytest.approx(0.036)
    # one Python thread never gets more than a core: n = k = 1 on 8 cores makes
    # 2 + 1 + 2 + (0.25/8)·2 requests, as many ms at 2 vCPU as at 1, not half
    assert s3_cpu_floor_s(1, 1, 2.0, 0.001, 0.0, 8.0) == pytest.approx(0.005 + 0.0000625)


def test_no_floor_where_nothing_was_measured_or_cores_are_unlimited() -> None:
    assert s3_cpu_floor_s(4, 2, 0.25, None, None, 2.0) == 0.0
    assert s3_cpu_floor_s(4, 2, 0.25, 0.001, 0.001, None) == 0.0


def test_floor_never_rises_with_memory() -> None:
    shares = np.linspace(0.1, 2.0, 40)
    floors = s3_cpu_floor_s(7, 2, shares, 0.0014, 0.0012, 2.0)
    assert np.all(np.diff(floors) <= 0.0)


def test_aws_catalog_has_no_floor() -> None:
    aws = load_catalog("lambda-2025")
    assert aws.s3_request_cpu_s is None and aws.s3_server_cpu_s is None
    assert local_machine.s3_request_floor_s(4, 2, 448, aws) == 0.0


def test_the_catalogs_cores_and_share_feed_the_floor() -> None:
    aws = load_catalog("lambda-2025")
    local = dataclasses.replace(
        aws, total_vcpu=1.5, compute_cores=2.0, s3_request_cpu_s=0.001, s3_server_cpu_s=0.001
    )
    # 1769 MB per vCPU: 884.5 MB is 0.5 vCPU; the reducer 13 ms / 0.5 + 5 = 31 ms; machine 36
    assert local_machine.s3_request_floor_s(4, 2, 884.5, local) == pytest.approx(0.036)
    assert local_machine.s3_request_floor_s(4, 2, 353.8, local) == pytest.approx(0.070)


def test_one_worker_waits_for_its_quota_and_the_server_in_turn() -> None:
    """digits-mlp, n = k = 1 at 0.326 vCPU: 5.25 requests (0.125 empty GETs in each of two
    waits) of 2.75 ms of the worker's CPU at its quota, 5 waves of 1.75 ms of the server's
    (measured 61 ms an iteration)."""
    floor = s3_cpu_floor_s(1, 1, 0.326, 0.00275, 0.00175, 2.0)
    assert floor == pytest.approx(5.25 * 0.00275 / 0.326 + 5 * 0.00175)


def test_a_request_bound_exchange_is_its_floor_not_its_floor_held_again() -> None:
    """Where the requests' CPU bounds the S3 exchange (a tiny model at a small share), the
    iteration's communication is that floor: the floor already holds the client's CPU at the
    quota, and the catalog's exchange CPU fraction (a PS exchange's) is not held on top of it
    (digits n = 8, k = 3 at 0.19 vCPU: 0.28 s an iteration measured, the floor 0.28 s, held
    twice 0.37 s)."""
    from provisioner import load_profile
    from provisioner.planner import predict
    from provisioner.space import Choice
    from tests.local_catalog import local_catalog

    local = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, compute_cores=2.0, s3_request_cpu_s=0.0023,
        s3_server_cpu_s=0.0021, exchange_cpu_fraction=0.43, cpu_throttle_period_s=0.02,
        s3_request_s=0.005, s3_mb_s_per_memory_mb=0.0, s3_mb_s_intercept=880.0,
        s3_max_mb_s=880.0,
    )  # fmt: skip
    memory_mb = 332
    got = predict(load_profile("digits-mlp"), local, Choice(8, memory_mb, "x86_64", "", 0, "s3", 3))
    floor = local_machine.s3_request_floor_s(8, 3, memory_mb, local)
    assert floor > 0.2  # the requests bound this exchange
    assert float(got.communication_per_iteration_s[0]) == pytest.approx(floor, rel=0.01)


def test_the_shared_path_stretches_the_bytes_and_leaves_the_requests_latency() -> None:
    """On shared cores the S3 exchange's transfers take turns as the PS exchange's do (n/C),
    its four requests' latencies do not: their CPU is the floor's. Where every function has its
    own cores (AWS) nothing is stretched."""
    from tests.local_catalog import local_catalog

    local = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, s3_request_s=0.005, s3_put_request_s=0.006
    )
    latency = 2 * (0.005 + 0.006)
    got = local_machine.shared_s3_path_s(np.array([latency + 0.010, latency / 2]), 6, local)
    assert list(got) == pytest.approx([latency + 0.010 * 6 / 1.5, latency / 2])
    aws = dataclasses.replace(local, total_vcpu=None)
    assert float(local_machine.shared_s3_path_s(latency + 0.01, 6, aws)) == pytest.approx(
        latency + 0.01
    )


def test_an_s3_loop_floor_counts_its_requests_cpu_not_a_ps_clients() -> None:
    """On shared cores the loop's floor holds every process's CPU of an iteration: an S3
    exchange's is its requests' on the client and the server (3 workers, one reducer: 7 PUTs
    and GETs that find their object, a miss every other of the 6 waits, one DELETE), not the
    PS client's share of its wall (exchange_cpu_fraction)."""
    from provisioner import load_profile
    from provisioner.local_s3 import s3_iteration_requests
    from provisioner.model import n_terms
    from tests.local_catalog import local_catalog

    local = dataclasses.replace(
        local_catalog(), total_vcpu=1.5, compute_cores=2.0, s3_request_cpu_s=0.002,
        s3_server_cpu_s=0.003, exchange_cpu_fraction=0.9,
    )  # fmt: skip
    profile = load_profile("digits-mlp")
    one = np.array([1.0])
    nt = n_terms(
        profile, local, np.array([3]), one, np.array([0]), core_rate_samples_s=one * 1e9,
        burst_shard_mb_s=one, burst_s=one * 0, reducers=np.array([1]),
    )  # fmt: skip
    requests = float(s3_iteration_requests(3, 1, 2.0))
    assert requests == pytest.approx(4 + 6 + 0.375 * 6 + 1)  # 0.25 · 3/2 empty GETs a wait
    got = local_machine.shared_loop_floor_s(profile, local, nt, np.array([0.5]), np.zeros(1), 0.0)
    assert float(got[0]) == pytest.approx(requests * 0.005 / 2.0, rel=1e-3)
