"""What this machine did: every probe run against real local servers, gathered in one record."""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
from dataclasses import dataclass
from pathlib import Path

from emulator import cpu
from emulator.calibration.cpu_probe import kernel_hz, machine_memory_gib, measure_cpu_share
from emulator.calibration.memory_probe import QUICK_PROBE_MB, FreshMemory, measure_fresh_memory
from emulator.calibration.ps_probe import LOOP_READINGS, PS_SIZES_MB, PS_SIZES_QUICK_MB, measure_ps
from emulator.calibration.runner_probe import (
    INIT_REPEATS,
    LOAD_RUNNERS,
    measure_init_cores,
    measure_load,
    measure_startup,
    single_init_cores,
)
from emulator.calibration.s3_probe import (
    S3_SIZES_MB,
    S3_SIZES_QUICK_MB,
    measure_checkpoint,
    measure_request_cpu,
    measure_s3,
)
from emulator.child_env import child_env
from emulator.procs import Supervisor
from emulator.s3server import s3_server


@dataclass(frozen=True)
class Measurements:
    """What this machine did; every field a figure of the catalog or the basis of one."""

    cores: int
    total_vcpu: float
    cfs_period_s: float
    cpu_share_ratio: float | None  # None: CFS groups not usable here (cpu_share_note says why)
    cpu_share_note: str
    ps_rtt_s: float
    exchange_cpu_fraction: float  # of a small push+pull's wall time, the client's CPU
    ps_request_cpu_s: float | None  # the shard's CPU per small push+pull; None: not readable
    ps_mb_s: float
    ps_aggregate_mb_s: float
    s3_get_latency_s: float
    s3_get_mb_s: float
    s3_put_latency_s: float
    s3_put_mb_s: float
    # a PS shard's checkpoint as functions.ps writes it: time = latency + (params + momentum)/B
    checkpoint_latency_s: float
    checkpoint_mb_s: float
    cold_start_s: float
    warm_start_s: float
    init_cores: float  # cores n cold starts at once effectively share (parallel_init_cores)
    load_cpu_s: float  # the worker's load of a tiny dataset (bytes ~0) in a fresh runner
    restart_s: float
    launch_s: float  # a fresh runner's first invocation before the handler's clock (spawn on)
    memory_gib: float
    arch: str  # "x86_64" | "arm64": the loopback PS type's architecture
    repeats: int
    # the same per n, (n, cores) for n in init_counts(cores); () = init_cores at every n
    init_cores_by_n: tuple[tuple[int, float], ...] = ()
    init_repeats: int = INIT_REPEATS  # rounds per n behind init_cores_by_n
    # one runner's import of the worker module alone, the t₁ of init_cores_by_n (None: an
    # older record)
    init_import_s: float | None = None
    # the kernel's CONFIG_HZ and the file that said it (None: not readable)
    kernel_hz: int | None = None
    kernel_hz_note: str = ""
    # (fit, note) where a bandwidth fit was not the first attempt's line (Fit.note): "ps" (one
    # client), "aggregate" (one shard), "s3_get", "s3_put", "checkpoint"; each figure read
    # from that fit leads its source with the note
    fit_notes: tuple[tuple[str, str], ...] = ()
    # CPU seconds a small S3 request costs the boto3 client and the server (s3_probe
    # measure_request_cpu); None: not measured (an older record) or not readable
    s3_request_cpu_s: float | None = None
    s3_server_cpu_s: float | None = None
    # kernel CPU per MB of fresh memory faulted in, and where it grows (memory_probe); None: not
    # measured (an older record)
    fresh_memory: FreshMemory | None = None

    def noted(self, fit: str, method: str) -> str:
        """`method`, led by the note of `fit` where it has one (a fallback says so first)."""
        note = dict(self.fit_notes).get(fit, "")
        return f"{note}; {method}" if note else method


def measure(quick: bool, work: Path) -> Measurements:
    """Run every measurement against real local servers; all children stopped on return."""
    repeats = 3 if quick else 7
    init_repeats = 1 if quick else INIT_REPEATS
    cores = int(cpu.machine_cores())
    share, share_note = measure_cpu_share(0.3 if quick else 2.0)
    hz, hz_note = kernel_hz()
    secret = secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(s3_server(data_dir=work / "s3", log_dir=work / "s3-logs"))
        supervisor = stack.enter_context(Supervisor().guard())
        env = child_env(endpoint, secret, tmp_dir=work)
        ps = measure_ps(
            supervisor,
            env,
            work,
            PS_SIZES_QUICK_MB if quick else PS_SIZES_MB,
            repeats,
            1 if quick else LOOP_READINGS,
        )
        s3_sizes_mb = S3_SIZES_QUICK_MB if quick else S3_SIZES_MB
        s3_get, s3_put = measure_s3(endpoint, s3_sizes_mb, repeats)
        checkpoint = measure_checkpoint(endpoint, s3_sizes_mb, repeats)
        request_cpu = measure_request_cpu(endpoint)
        # quick (the tests' catalogs): a small probe that finds no line, so none is priced
        fresh_memory = measure_fresh_memory(QUICK_PROBE_MB if quick else None)
        cold_s, warm_s, restart_s, launch_s = measure_startup(
            supervisor, env, work / "startup", repeats
        )
        import_s, init_cores_by_n = measure_init_cores(
            supervisor, env, work / "init", cores, init_repeats
        )
        # a no-op placement where no CPU group can be held (the figure is then unthrottled)
        limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-calibrate-load-{os.getpid()}"))
        load_s = measure_load(
            supervisor, env, endpoint, work / "load", min(repeats, LOAD_RUNNERS),
            limiter.place("load", 1.0),
        )  # fmt: skip
    return Measurements(
        cores=cores,
        total_vcpu=cpu.WORKER_CORE_FRACTION * cores,
        cfs_period_s=cpu.CFS_PERIOD_US / 1e6,
        cpu_share_ratio=share,
        cpu_share_note=share_note,
        ps_rtt_s=ps.rtt_s,
        exchange_cpu_fraction=ps.loop.cpu_fraction,
        ps_request_cpu_s=ps.loop.ps_request_cpu_s,
        ps_mb_s=ps.per_flow.mb_s,
        ps_aggregate_mb_s=ps.aggregate.mb_s,
        s3_get_latency_s=s3_get.latency_s,
        s3_get_mb_s=s3_get.mb_s,
        s3_put_latency_s=s3_put.latency_s,
        s3_put_mb_s=s3_put.mb_s,
        checkpoint_latency_s=checkpoint.latency_s,
        checkpoint_mb_s=checkpoint.mb_s,
        cold_start_s=cold_s,
        warm_start_s=warm_s,
        init_cores=single_init_cores(init_cores_by_n, cores),
        init_cores_by_n=init_cores_by_n,
        init_import_s=import_s,
        kernel_hz=hz,
        kernel_hz_note=hz_note,
        init_repeats=init_repeats,
        load_cpu_s=load_s,
        restart_s=restart_s,
        launch_s=launch_s,
        memory_gib=machine_memory_gib(),
        arch="arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64",
        repeats=repeats,
        fit_notes=tuple(
            (key, fit.note)
            for key, fit in (
                ("ps", ps.per_flow),
                ("aggregate", ps.aggregate),
                ("s3_get", s3_get),
                ("s3_put", s3_put),
                ("checkpoint", checkpoint),
            )
            if fit.note
        ),
        s3_request_cpu_s=request_cpu.client_s,
        s3_server_cpu_s=request_cpu.server_s,
        fresh_memory=fresh_memory,
    )
