"""The catalog's loop, load and S3 request figures read again now: a round's anchor of
bench.predict.

The shard's CPU per exchange moved by 3× on one machine hours apart, the load's CPU part by a
third and an S3 request's client CPU from 2.31 to 1.5-1.8 ms within an hour, as the workloads'
speeds drift; so every round of bench.predict reads them again just before its rows
(measure_loop_now, measure_load_now, measure_requests_now, each as `make calibrate` reads the
figure) and predicts on the catalog with them (loop_anchored, load_anchored, requests_anchored).
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.calibration.catalog import Provenance, figure
from emulator.calibration.ps_probe import PS_SIZES_MB, loop_figures, loop_method, measure_loop
from emulator.calibration.runner_probe import LOAD_RUNNERS, load_method, measure_load
from emulator.calibration.s3_probe import CPU_REQUESTS, measure_request_cpu
from emulator.child_env import child_env
from emulator.procs import Supervisor
from emulator.s3server import S3Endpoint

# the catalog's network figures a loop reading gives, and their units
LOOP_UNITS = {
    "function_ps_rtt_s": "s",
    "exchange_cpu_fraction": "CPU s per wall s",
    "ps_request_cpu_s": "CPU s per push+pull",
}
LOOP_FIGURES = tuple(LOOP_UNITS)
# the catalog's network figures a request reading gives (the client's, the server's)
REQUEST_FIGURES = ("s3_request_cpu_s", "s3_server_cpu_s")


def loop_anchored(
    doc: dict[str, Any], figures: dict[str, float], read: str, where: Provenance
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with the network's loop `figures` (loop_figures) set
    as `read` (e.g. "round 3's anchor of bench.predict, read just before the round") `where`."""
    held = {f: (round(v, 6), LOOP_UNITS[f]) for f, v in figures.items()}
    return measured_in(doc, "network", held, f"{read}: {loop_method()}", where)


def measured_in(
    doc: dict[str, Any],
    section: str,
    figures: dict[str, tuple[float, str]],
    source: str,
    where: Provenance,
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with each of `figures` (field: value and unit) set
    in `section` as measured by `source` `where`: a round's anchor of some of its figures."""
    out = copy.deepcopy(doc)
    for field, (value, unit) in figures.items():
        out[section][field] = figure(value, unit, source, where, "measured")
    return out


def measure_loop_now(endpoint: S3Endpoint, work: Path, mb_s: float) -> dict[str, float]:
    """loop_figures of a measure_loop taken now, against the S3 server at `endpoint` (a shard
    needs one), its children stopped on return: a round's anchor of the catalog's loop."""
    with Supervisor().guard() as supervisor:
        env = child_env(endpoint, secrets.token_hex(16), tmp_dir=work)
        reading = measure_loop(supervisor, env, work, PS_SIZES_MB[0])
    return loop_figures(reading, PS_SIZES_MB[0], mb_s)


def measure_load_now(endpoint: S3Endpoint, work: Path) -> float:
    """measure_load taken now against the S3 server at `endpoint`, its
    runners stopped and its CPU group gone on return: a round's anchor of load_cpu_s."""
    with contextlib.ExitStack() as stack:
        supervisor = stack.enter_context(Supervisor().guard())
        env = child_env(endpoint, secrets.token_hex(16), tmp_dir=work)
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-anchor-load-{os.getpid()}"))
        placement = limiter.place("load", 1.0)  # a no-op where no CPU group can be held
        return measure_load(supervisor, env, endpoint, work, LOAD_RUNNERS, placement)


def measure_requests_now(endpoint: S3Endpoint) -> dict[str, float]:
    """measure_request_cpu taken now against the S3 server at `endpoint`: a round's anchor of
    the S3 request's CPU, each side where it could be read."""
    reading = measure_request_cpu(endpoint)
    figures = {"s3_request_cpu_s": reading.client_s, "s3_server_cpu_s": reading.server_s}
    return {f: v for f, v in figures.items() if v is not None}


def requests_anchored(
    doc: dict[str, Any], figures: dict[str, float], read: str, where: Provenance
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with the S3 request's CPU `figures`
    (measure_requests_now) set as `read` `where`."""
    held = {f: (round(v, 6), "CPU s per request") for f, v in figures.items()}
    method = (
        f"{CPU_REQUESTS} requests of the worker's own S3 exchange (s3_probe.measure_request_cpu)"
    )
    return measured_in(doc, "network", held, f"{read}: {method}", where)


def load_anchored(
    doc: dict[str, Any], load_cpu_s: float, read: str, where: Provenance
) -> dict[str, Any]:
    """A copy of the catalog document `doc` with lambda.load_cpu_s set to `load_cpu_s` as
    `read` (e.g. "round 3's anchor of bench.predict, read just before the round") `where`."""
    held = {"load_cpu_s": (round(load_cpu_s, 4), "s")}
    return measured_in(doc, "lambda", held, f"{read}: {load_method()}", where)
