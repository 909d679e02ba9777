"""Every billed item of a run: λDNN's Eq. 10 for the workers and this project's extensions
(requests, /tmp, PS instances, workflow transitions, endpoints, S3 requests and storage)."""

from __future__ import annotations

import numpy as np

from provisioner.s3exchange import s3_exchange_requests, s3_link_requests
from provisioner.terms import Arr


def lambda_compute_usd(usd_per_gb_s: Arr, memory_mb: Arr, n: Arr, billed_s: Arr) -> Arr:
    """λDNN Eq. 10, C = p·(m/1024)·n·T, over the billed time of every worker."""
    return usd_per_gb_s * (np.asarray(memory_mb, dtype=np.float64) / 1024.0) * n * billed_s


def requests_usd(usd_per_request: float, n: Arr, links: Arr) -> Arr:
    """Extension: one request per worker per chain link."""
    return usd_per_request * (np.asarray(n, dtype=np.float64) * links)


# The pace check of a run that re-plans (docs/replan.md): one invocation of the pace function
# after every link's Map, at the memory stacks give it. Its billed time is a policy figure, not a
# measurement: the check reads the boundary's link records, runs the envelope's search (about
# 10 ms of one core on lambda-2025's workloads, bench/replan's plans) and writes its decision;
# a second covers those requests and a warm start. Its wall time is not in the model's gap
# between links (docs/known-gaps.md).
PACE_CHECK_MB = 1024
PACE_CHECK_BILLED_S = 1.0


def pace_checks_usd(usd_per_request: float, usd_per_gb_s: Arr, checks: Arr) -> tuple[Arr, Arr]:
    """Extension: (GB-s, request) charges of `checks` pace-check invocations."""
    checks = np.asarray(checks, dtype=np.float64)
    gb_s = PACE_CHECK_MB / 1024.0 * PACE_CHECK_BILLED_S
    return np.asarray(usd_per_gb_s * gb_s * checks), np.asarray(usd_per_request * checks)


def ephemeral_usd(usd_per_gb_s: float, storage_mb: Arr, free_mb: int, n: Arr, billed_s: Arr) -> Arr:
    """Extension: /tmp above the free 512 MB, per GB-second of every worker."""
    extra_gb = np.maximum(np.asarray(storage_mb, dtype=np.float64) - free_mb, 0.0) / 1024.0
    return usd_per_gb_s * extra_gb * n * billed_s


def ps_usd(usd_per_hour: Arr, ps_count: Arr, total_s: Arr, min_billed_s: float) -> Arr:
    """Extension: the EC2 PS shards run for the whole job, billed per second with a minimum."""
    return usd_per_hour / 3600.0 * ps_count * np.maximum(total_s, min_billed_s)


def step_functions_usd(
    usd_per_transition: float, fixed: int, per_link: int, n: Arr, links: Arr
) -> Arr:
    """Extension: state transitions of the orchestrating workflow (fixed + per worker link)."""
    return usd_per_transition * (fixed + per_link * (np.asarray(n, dtype=np.float64) * links))


def endpoints_usd(usd_per_hour: float, endpoints: int, total_s: Arr) -> Arr:
    """Extension: the VPC interface endpoints the PS network needs, for every started hour.

    PrivateLink bills each endpoint per AZ per hour, a partial hour as a full one; the endpoints
    live as long as the stacks, so this is the run's share, not the idle time until destroy.
    """
    hours = np.ceil(np.maximum(np.asarray(total_s, dtype=np.float64), 1.0) / 3600.0)
    return usd_per_hour * endpoints * hours


def s3_requests_usd(
    get_usd: float, put_usd: float, n: Arr, links: Arr, ps_count: Arr, periodic: Arr
) -> Arr:
    """Extension: shard GETs per link; dataset upload, checkpoints per shard, results.

    After each checkpoint a shard lists the checkpoints (LIST is billed as a PUT) to delete
    its own older ones (DELETE is free), so a checkpoint costs two PUT-class requests; each
    shard checkpoints iteration 0 when it is initialised, at the end of every link and
    `periodic` times in between.
    """
    n = np.asarray(n, dtype=np.float64)
    gets = n * links
    # checkpoints + lists (initial, one per link, periodic), shards, manifest, split, results
    puts = 2.0 * ps_count * (links + 1 + np.asarray(periodic, dtype=np.float64)) + n + 4.0
    return np.asarray(get_usd * gets + put_usd * puts)


def s3_exchange_usd(
    get_usd: float,
    put_usd: float,
    n: Arr,
    reducers: Arr,
    k_iter: Arr,
    misses: Arr | float = 0.0,
    links: Arr | float = 0.0,
) -> Arr:
    """Extension: the exchange's request charges, per iteration × k iterations (0 at k = 0),
    `misses` the GETs per iteration that find nothing yet (s3_exchange_misses), plus the
    requests of its `links` starts and ends (s3_link_requests; LIST billed as a PUT)."""
    puts, gets = s3_exchange_requests(n, reducers)
    per_iteration = put_usd * puts + get_usd * (gets + np.asarray(misses, dtype=np.float64))
    link_puts, link_gets, link_lists = s3_link_requests(n, reducers, links)
    per_run = put_usd * (link_puts + link_lists) + get_usd * link_gets
    return per_iteration * np.asarray(k_iter, dtype=np.float64) + per_run


def s3_storage_usd(usd_per_gb_month: float, stored_mb: Arr, total_s: Arr) -> Arr:
    """Extension: S3 Standard storage for the whole run, billed by the GB-hour (730 h a month)."""
    months = np.asarray(total_s, dtype=np.float64) / (730.0 * 3600.0)
    return usd_per_gb_month * np.asarray(stored_mb, dtype=np.float64) / 1000.0 * months
