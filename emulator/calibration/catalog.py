"""The local catalog document (lambda-2025's schema) built from this machine's measurements.

1 local core = 1 Lambda vCPU, one PS type `loopback`, no endpoints, prices copied from
lambda-2025 so the planner's objective is unchanged. Every figure says how it was obtained, on
which machine, when (`Provenance`).
"""

from __future__ import annotations

import copy
import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.calibration import cpu_probe
from emulator.calibration.fits import mb_s_to_gbps, memory_max_mb
from emulator.calibration.measurements import Measurements
from emulator.calibration.memory_probe import CHUNK_MB, JUMP_RATIO
from emulator.calibration.ps_probe import (
    LOOP_READINGS,
    PS_CLIENTS,
    PS_SIZES_MB,
    PS_SIZES_QUICK_MB,
    loop_method,
)
from emulator.calibration.runner_probe import CONCURRENCY_LIMIT, LOAD_RUNNERS, load_method
from emulator.calibration.s3_probe import CPU_IDLE_S, CPU_REQUESTS
from emulator.options import default_safety_margin_s
from provisioner.catalog import CATALOG_DIR, catalog_from_dict
from provisioner.files import write_text_atomically

REFERENCE_CATALOG = CATALOG_DIR / "lambda-2025.json"
INVOCATION_TIMEOUT_S = 900
PS_MAX_SHARDS = 4
# Lambda figures kept from lambda-2025: /tmp sizes and prices (the objective stays the same)
COPIED_LAMBDA_FIGURES = (
    "ephemeral_min_mb",
    "ephemeral_max_mb",
    "ephemeral_free_mb",
    "ephemeral_usd_per_gb_s",
    "usd_per_request",
)
# Share of a deadline local plans hold back by default (policy, from measurements): the slowest
# run of a bench/predict grid of 21 runs on a 2-vCPU VM took 1.19× its prediction, so a plan at
# the deadline needs 1 − 1/1.19 = 16% held back to be met; rounded up for the workloads and runs
# that grid did not see.
DEFAULT_SLACK = 0.2


@dataclass(frozen=True)
class Provenance:
    """Where and when the figures were taken."""

    machine: str
    date: str


def here_today() -> Provenance:
    """This machine (cpu.this_machine) and today's date: where figures measured now were
    taken."""
    return Provenance(cpu.this_machine(), datetime.date.today().isoformat())


def _scheduler_tick(m: Measurements, w: Provenance) -> dict[str, Any]:
    """The kernel's tick, 1/CONFIG_HZ: where a worker's wait for the cores is timed (a burst
    shorter than a tick mostly runs to its end and waits at its next wake-up)."""
    why = ("1/CONFIG_HZ: the scheduler preempts a running burst at a tick, so a worker's wait "
           "for the cores lands in its step in proportion to the step over the tick "
           "(provisioner.local_machine.waits_in_compute)")  # fmt: skip
    if m.kernel_hz is None:
        return figure(1.0 / cpu_probe.DEFAULT_HZ, "s",
                      f"{why}; {m.kernel_hz_note}: Linux's default {cpu_probe.DEFAULT_HZ} Hz "
                      "assumed", w, "policy")  # fmt: skip
    return figure(1.0 / m.kernel_hz, "s", f"{why}; CONFIG_HZ={m.kernel_hz} in "
                  f"{m.kernel_hz_note}", w, "measured")  # fmt: skip


def figure(value: Any, unit: str, source: str, where: Provenance, tag: str) -> dict[str, Any]:
    """One catalog figure: its value and unit, how it was obtained (`source`), where, and its
    tag (measured, policy, copied)."""
    return {
        "value": value,
        "unit": unit,
        "source": source,
        "machine": where.machine,
        "date": where.date,
        "tag": tag,
    }


def _copied(original: dict[str, Any], where: Provenance) -> dict[str, Any]:
    """A lambda-2025 figure kept as it is (prices: the planner's objective is unchanged)."""
    out = copy.deepcopy(original)
    out.update(
        source=f"copied from lambda-2025: {original.get('source', '')}",
        tag="copied",
        machine=where.machine,
        date=where.date,
    )
    return out


def _lambda_section(m: Measurements, ref: dict[str, Any], w: Provenance) -> dict[str, Any]:
    def measured(value: Any, unit: str, method: str) -> dict[str, Any]:
        return figure(value, unit, method, w, "measured")

    def policy(value: Any, unit: str, why: str) -> dict[str, Any]:
        return figure(value, unit, why, w, "policy")

    if m.cpu_share_ratio is None:
        share = policy(1.0, "achieved/asked", f"not measured ({m.cpu_share_note}): assumed exact")
    else:
        share = measured(round(m.cpu_share_ratio, 4), "achieved/asked", m.cpu_share_note)
    cores_method = (
        f"os.sched_getaffinity: {m.cores} cores × emulator/cpu.py WORKER_CORE_FRACTION "
        f"{cpu.WORKER_CORE_FRACTION}"
    )
    # the cold-start crowd's figures: an older Measurements (tests) has none (init_cores at
    # every n, the whole start-up stretched)
    per_n = {}
    if m.init_cores_by_n:
        per_n["init_cores_by_n"] = measured(
            [[k, round(c, 3)] for k, c in m.init_cores_by_n],
            "[n, cores]",
            "k·t₁/t_k as init_cores, for each k = n emulator runners cold-started at once: t_k "
            f"the median of {m.init_repeats} rounds, t₁ of one alone before each of them; the "
            "model interpolates between them (provisioner.model.init_cores_at)",
        )
    if m.init_import_s is not None:
        per_n["init_import_s"] = measured(
            round(m.init_import_s, 4),
            "s",
            "t₁ of init_cores_by_n: one emulator runner's own import of functions.worker "
            f"(torch) alone, the median of {m.init_repeats * len(m.init_cores_by_n)} rounds; "
            "the part of a worker's start-up a crowd of cold starts stretches, the rest (the "
            "model's build, its first pull) is the workload's (provisioner.local_machine."
            "cold_start_s)",
        )
    return {
        **_fresh_memory_section(m, w),
        "memory_min_mb": policy(128, "MB", "Lambda's smallest size, kept"),
        "memory_max_mb": measured(
            memory_max_mb(m.total_vcpu), "MB", f"floor(total_vcpu × 1769); {cores_method}"
        ),
        "memory_step_mb": policy(1, "MB", "Lambda's 1 MB step, kept"),
        # no ceiling below what the cores buy: a small model fits one function, as before
        "memory_ceiling_mb": policy(
            memory_max_mb(m.total_vcpu),
            "MB",
            "no ceiling beyond memory_max_mb; lower it (or "
            "`python -m provisioner plan --memory-ceiling MB`) to make the planner cut a model "
            "into pipeline stages locally (docs/pipeline.md, Locally)",
        ),
        "mb_per_vcpu": policy(cpu.MB_PER_VCPU, "MB", "1 local core = 1 Lambda vCPU (cpu_scale 1)"),
        "max_vcpu": measured(m.total_vcpu, "vCPU", cores_method),
        "total_vcpu": measured(m.total_vcpu, "vCPU", cores_method),
        "init_cores": measured(
            round(m.init_cores, 3),
            "cores",
            f"k·t₁/t_k for k = {min(2 * m.cores, CONCURRENCY_LIMIT)} emulator runners "
            "cold-started at once (each imports "
            "functions.worker: torch; t = the slowest runner's own import time, as a worker "
            "reports its start-up) against one alone, within [1, "
            f"{m.cores}] (os.sched_getaffinity); imports run at burst CPU, outside the workers' "
            "quota (emulator/runner.py init_phase)",
        ),
        **per_n,
        "compute_cores": measured(
            float(m.cores),
            "cores",
            f"os.sched_getaffinity: {m.cores} cores; the workers' steps are held by their own "
            "quotas only, and the PS, the S3 server and the orchestrator wait while a BSP step "
            "computes, so n steps at once share every core (k copies at 0.72 vCPU got 0.93-1.02 "
            "of 2 cores: bench/results/shared-cores.md)",
        ),
        "cpu_throttle_period_s": policy(
            m.cfs_period_s, "s", "emulator/cpu.py CFS_PERIOD_US (Lambda's 20 ms slice)"
        ),
        "cpu_share_achieved_ratio": share,
        "scheduler_tick_s": _scheduler_tick(m, w),
        "invocation_timeout_s": policy(INVOCATION_TIMEOUT_S, "s", "Lambda's limit, kept"),
        **{key: _copied(ref[key], w) for key in COPIED_LAMBDA_FIGURES},
        "concurrency_limit": policy(
            CONCURRENCY_LIMIT, "functions", "emulated functions this machine hosts at once"
        ),
        "unreserved_concurrency_min": policy(0, "functions", "no other functions share it"),
        "restart_s": measured(
            round(m.restart_s, 4),
            "s",
            "mean wall less work of warm emulator.startup_probe invocations polled at "
            f"the orchestrator's POLL_INTERVAL_S, working {m.repeats} evenly spread shares of "
            "it (a link ends at any phase of the poll)",
        ),
        "cold_start_s": measured(
            round(m.cold_start_s, 4),
            "s",
            "spawn of emulator.runner --serve to the first result; the "
            "handler module imports functions.worker (torch)",
        ),
        "launch_s": measured(
            round(m.launch_s, 4),
            "s",
            f"median of {m.repeats} fresh emulator.runner spawns to their first result (polled "
            "every 5 ms) less the functions.worker import each reports: the spawn, interpreter "
            "and runner start no handler times",
        ),
        "warm_start_s": measured(
            round(m.warm_start_s, 4),
            "s",
            f"median second invocation in the same runner, {m.repeats} repeats",
        ),
        "load_cpu_s": measured(
            round(m.load_cpu_s, 4), "s", load_method(min(m.repeats, LOAD_RUNNERS))
        ),
        "safety_margin_s": policy(
            default_safety_margin_s(INVOCATION_TIMEOUT_S),
            "s",
            "emulator/options.py default_safety_margin_s(900)",
        ),
        # Only this machine's architecture: the emulator cannot run the other one's workers.
        "architectures": {
            name: _copied(arch, w) for name, arch in ref["architectures"].items() if name == m.arch
        },
    }


def _fresh_memory_section(m: Measurements, w: Provenance) -> dict[str, Any]:
    """The fresh-memory line's figures where the probe found one (none where it did not: every
    fresh page then costs alike, and that cost is in each step a profile timed)."""
    fresh = m.fresh_memory
    if fresh is None or fresh.warm_mb is None or fresh.cold_s_per_mb is None:
        return {}
    method = (
        f"emulator/calibration/memory_probe.py: one child mapped fresh {CHUNK_MB} MB blocks and "
        "wrote a byte to each page, timing each block's kernel CPU; the line is the first block "
        f"from which every block cost over {JUMP_RATIO:g}× the median before it "
        f"({fresh.probed_mb:.0f} MB probed)"
    )
    return {
        "fresh_memory_warm_mb": figure(fresh.warm_mb, "MB", method, w, "measured"),
        "fault_warm_s_per_mb": figure(
            round(fresh.warm_s_per_mb, 7),
            "s/MB",
            f"median of the blocks below the line; {method}",
            w,
            "measured",
        ),
        "fault_cold_s_per_mb": figure(
            round(fresh.cold_s_per_mb, 7),
            "s/MB",
            f"median of the blocks from the line; {method}",
            w,
            "measured",
        ),
    }


def _network_section(m: Measurements, w: Provenance) -> dict[str, Any]:
    ps_method = (
        f"push+pull through a functions.ps shard with functions.ps_client, sizes "
        f"{'/'.join(f'{s:g}' for s in (PS_SIZES_QUICK_MB if m.repeats <= 3 else PS_SIZES_MB))}"
        f" MB, median of {m.repeats} rounds of every size, fit time = 2·rtt + 2·d/B"
    )
    small = loop_method(1 if m.repeats <= 3 else LOOP_READINGS)
    rtt_method = m.noted("ps", f"the median exchange of {small}, less 2·d/B: (t − 2·d/B)/2")
    rounds = f"median of {m.repeats} rounds of every size, fit latency + d/B"
    s3_method = m.noted("s3_get", f"boto3 GET from SeaweedFS on 127.0.0.1, {rounds}")
    s3_put_method = m.noted("s3_put", f"boto3 PUT to SeaweedFS on 127.0.0.1, {rounds}")
    checkpoint_method = m.noted(
        "checkpoint",
        "functions.ps.checkpoints.CheckpointStore: copy, np.savez, HMAC, PUT to SeaweedFS on "
        f"127.0.0.1, LIST and prune, as a PS shard checkpoints; {rounds}",
    )
    return {
        "function_ps_mb_s": figure(
            round(m.ps_mb_s, 3), "MB/s", m.noted("ps", ps_method), w, "measured"
        ),
        "function_ps_rtt_s": figure(round(m.ps_rtt_s, 6), "s", rtt_method, w, "measured"),
        "exchange_cpu_fraction": figure(
            round(m.exchange_cpu_fraction, 3),
            "CPU s per wall s",
            f"the client's process CPU time over the wall time of {small}",
            w,
            "measured",
        ),
        **(
            {}
            if m.ps_request_cpu_s is None
            else {
                "ps_request_cpu_s": figure(
                    round(m.ps_request_cpu_s, 6),
                    "CPU s per push+pull",
                    f"the shard process's CPU time (/proc/<pid>/stat) over {small}, per exchange",
                    w,
                    "measured",
                )
            }
        ),
        "s3_mb_s_per_memory_mb": figure(
            0, "MB/s per MB", "loopback does not depend on memory", w, "policy"
        ),
        "s3_mb_s_intercept": figure(round(m.s3_get_mb_s, 3), "MB/s", s3_method, w, "measured"),
        "s3_max_mb_s": figure(round(m.s3_get_mb_s, 3), "MB/s", s3_method, w, "measured"),
        "s3_request_s": figure(round(m.s3_get_latency_s, 6), "s", s3_method, w, "measured"),
        "s3_put_request_s": figure(round(m.s3_put_latency_s, 6), "s", s3_put_method, w, "measured"),
        "s3_put_mb_s": figure(round(m.s3_put_mb_s, 3), "MB/s", s3_put_method, w, "measured"),
        "per_flow_cap_gbps": figure(
            round(mb_s_to_gbps(m.ps_mb_s), 4),
            "Gbit/s",
            m.noted("ps", f"one client's B, {ps_method}"),
            w,
            "measured",
        ),
        "ps_s3_mb_s": figure(
            round(m.checkpoint_mb_s, 3),
            "MB/s",
            f"{checkpoint_method}, d the parameters and the momentum",
            w,
            "measured",
        ),
        "ps_checkpoint_request_s": figure(
            round(m.checkpoint_latency_s, 6), "s", checkpoint_method, w, "measured"
        ),
        "vpc_interface_endpoints": figure(
            [], "AWS service names", "no VPC on loopback", w, "policy"
        ),
        "vpc_endpoint_usd_per_hour": figure(0, "USD/h", "no endpoints on loopback", w, "policy"),
        **_request_cpu_figures(m, w),
    }


def _request_cpu_figures(m: Measurements, w: Provenance) -> dict[str, Any]:
    """The S3 request's CPU on each side, where measured (an older record has neither)."""
    method = (
        f"{CPU_REQUESTS} requests of the worker's own S3 exchange (one worker reducing a 4 KB "
        "vector: PUTs, GETs, polls that find nothing, DELETEs) to SeaweedFS on 127.0.0.1"
    )
    out: dict[str, Any] = {}
    if m.s3_request_cpu_s is not None:
        out["s3_request_cpu_s"] = figure(
            round(m.s3_request_cpu_s, 6), "CPU s per request",
            f"the worker's process CPU time (time.process_time) over {method}, per request",
            w, "measured",
        )  # fmt: skip
    if m.s3_server_cpu_s is not None:
        out["s3_server_cpu_s"] = figure(
            round(m.s3_server_cpu_s, 6), "CPU s per request",
            f"the server process's CPU time (/proc/<pid>/stat) over {method}, less its idle "
            f"rate over {CPU_IDLE_S:g} s, per request",
            w, "measured",
        )  # fmt: skip
    return out


def _ps_section(m: Measurements, ref: dict[str, Any], w: Provenance) -> dict[str, Any]:
    default = next(p for p in ref["candidates"] if p["name"] == ref["default_type"])
    aggregate = (
        f"largest push+pull with {'/'.join(map(str, PS_CLIENTS))} clients on one shard: the "
        "highest n·2·d/(t − 2·rtt)"
    )
    gbps = round(mb_s_to_gbps(m.ps_aggregate_mb_s), 4)
    return {
        "max_shards": figure(
            PS_MAX_SHARDS, "shards", "shards this machine hosts beside workers", w, "policy"
        ),
        "min_billed_s": _copied(ref["min_billed_s"], w),
        "default_type": "loopback",
        "candidates": [
            {
                "name": "loopback",
                "arch": m.arch,
                "vcpu": figure(m.cores, "vCPU", "os.sched_getaffinity", w, "measured"),
                "memory_gib": figure(
                    round(m.memory_gib, 2), "GiB", "sysconf physical pages", w, "measured"
                ),
                "baseline_gbps": figure(
                    gbps, "Gbit/s", m.noted("aggregate", aggregate), w, "measured"
                ),
                "peak_gbps": figure(
                    gbps, "Gbit/s", m.noted("aggregate", f"= baseline; {aggregate}"), w, "measured"
                ),
                "burst_s": figure(0, "s", "loopback has no burst credit", w, "policy"),
                "usd_per_hour": _copied(default["usd_per_hour"], w),
            }
        ],
    }


def build_catalog(m: Measurements, reference: dict[str, Any], where: Provenance) -> dict[str, Any]:
    """The local catalog document (lambda-2025 schema) from the measurements; pure."""
    return {
        "schema_version": reference.get("schema_version", 1),
        "name": "local",
        "description": f"This machine ({where.machine}) as the emulator runs it, measured "
        f"{where.date}: 1 local core = 1 Lambda vCPU, PS shards on loopback.",
        "refresh": "Generated per machine by `make calibrate` (python -m emulator.calibrate); "
        "not committed.",
        "tags": {
            "measured": "measured on this machine by emulator/calibrate.py (source = method)",
            "policy": "a choice of this project or of the emulator, not a measurement",
            "copied": "copied from lambda-2025 (prices) so the planner's objective is the same",
        },
        "lambda": _lambda_section(m, reference["lambda"], where),
        "network": _network_section(m, where),
        "parameter_servers": _ps_section(m, reference["parameter_servers"], where),
        "orchestration": {
            **{key: _copied(fig, where) for key, fig in reference["orchestration"].items()},
            "default_slack": figure(
                DEFAULT_SLACK,
                "share of the deadline",
                "emulator/calibration/catalog.py DEFAULT_SLACK: runs here land up to 1.19× their "
                "prediction (bench/results/predict-synthetic-cifar-cnn.md, every run), so plans "
                "aim at 80% of a deadline unless the user gives a slack",
                where,
                "policy",
            ),
        },
    }


def write_catalog(document: dict[str, Any], out: Path) -> None:
    """Check that the catalog loads, then write it whole or not at all."""
    catalog_from_dict(document)
    write_text_atomically(out, json.dumps(document, indent=2) + "\n")
