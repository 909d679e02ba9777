"""Hold each emulated function to the CPU share its memory size buys in Lambda.

Lambda gives a function CPU in proportion to its memory: 1,769 MB is one vCPU of credit, capped
at about 5.79 vCPU at 10,240 MB (docs/platform-facts). This machine has fewer cores than a plan
of n functions would use in AWS, so every share is multiplied by one `cpu_scale` factor: one
Lambda vCPU becomes `cpu_scale` local cores. The default factor makes the plan's total share fit
in a fraction of this machine's cores (the rest is left to the PS, the S3 server and the
orchestrator); it is reported so measured compute times can be read against the prediction.

`CpuLimiter` holds each worker to its share with a CFS quota in a cgroup of its own
(emulator/cgroups.py finds where); where none can be made the run goes on unenforced and says
what was tried ("CPU share not enforced: <reason>"). This module also names the machine the way
its catalog and its runs' reports do (/proc/cpuinfo's model, the cores this process may use).
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from emulator.cgroups import (
    CGROUP_V1_CPU_ROOT,
    MECHANISMS,
    PROC_SELF,
    CgroupFiles,
    probe,
    remove_site,
    throttled_s_from_stat,
)

MB_PER_VCPU = 1769.0  # Lambda: 1,769 MB of memory = one vCPU of credit
MAX_VCPU = 10240.0 / MB_PER_VCPU  # the credit at Lambda's largest memory size
# Lambda's throttling interval, as observed in pwrdrvr/lambda-dispatch (a function that uses its
# share of a 20 ms slice is paused until the slice ends); the kernel default of 100 ms would let
# an emulated worker burst five times longer than a Lambda one.
CFS_PERIOD_US = 20_000
MIN_QUOTA_US = 1_000  # the kernel rejects quotas below 1 ms
# Fraction of this machine's cores the workers may use together by default; the rest is left to
# the PS shards, the S3 server and the orchestrator, which in AWS run on other hardware.
WORKER_CORE_FRACTION = 0.75


def lambda_vcpu_share(memory_mb: float) -> float:
    """vCPU credit Lambda gives a function of `memory_mb` (1,769 MB = 1 vCPU, capped)."""
    if memory_mb <= 0:
        raise ValueError(f"memory_mb must be positive, got {memory_mb!r}")
    return min(memory_mb / MB_PER_VCPU, MAX_VCPU)


def machine_cores() -> float:
    """Cores this process may run on (affinity, not the host's count)."""
    return float(len(os.sched_getaffinity(0)))


def read_cpuinfo() -> str:
    """/proc/cpuinfo's text; empty where there is none (not Linux)."""
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def model_name(cpuinfo: str) -> str | None:
    """The CPU's model name in /proc/cpuinfo's text; None where it names none."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def machine_name(cpuinfo: str, cores: int) -> str:
    """`<CPU model>, <cores> cores` from /proc/cpuinfo's text (the platform name if absent)."""
    return f"{model_name(cpuinfo) or platform.machine() or 'unknown CPU'}, {cores} cores"


def this_machine() -> str:
    """This machine as its catalog's figures, its runs' reports and its benchmarks name it: the
    CPU model and the cores this process may run on (machine_cores), so a figure and the runs
    read against it agree on where they were taken."""
    return machine_name(read_cpuinfo(), int(machine_cores()))


def default_cpu_scale(n_workers: int, memory_mb: float, cores: float) -> float:
    """Local cores per Lambda vCPU so that n workers together use WORKER_CORE_FRACTION of `cores`.

    Never above 1.0: one Lambda vCPU is not emulated by more than one local core.
    """
    total_vcpu = n_workers * lambda_vcpu_share(memory_mb)
    return min(1.0, WORKER_CORE_FRACTION * cores / total_vcpu)


def parse_cpu_scale(value: str) -> float:
    """`--cpu-scale` value: a positive number (local cores per Lambda vCPU) or 'auto'."""
    try:
        scale = float(value)
    except ValueError:
        raise ValueError(
            f"bad --cpu-scale {value!r}: expected a positive number such as 0.5, or 'auto'"
        ) from None
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"bad --cpu-scale {value!r}: expected a positive number such as 0.5")
    return scale


def check_cpu_scale(text: str, scale: float, memory_mb: float) -> None:
    """ValueError unless `scale` gives a worker of `memory_mb` a quota the kernel can enforce.

    Below MIN_QUOTA_US per period the quota would be raised to the minimum without a word, and
    the run would measure another scale than the one asked for.
    """
    lowest = MIN_QUOTA_US / CFS_PERIOD_US / lambda_vcpu_share(memory_mb)
    if scale < lowest:
        raise ValueError(
            f"bad --cpu-scale {text!r}: a {memory_mb:g} MB worker needs at least {lowest:.3g} "
            f"(the kernel's smallest CPU quota, {MIN_QUOTA_US} µs per {CFS_PERIOD_US} µs)"
        )


def local_cores(memory_mb: float, cpu_scale: float) -> float:
    """Local cores one worker of `memory_mb` gets: its Lambda vCPU share × cpu_scale."""
    return lambda_vcpu_share(memory_mb) * cpu_scale


def cfs_quota_us(cores: float, period_us: int = CFS_PERIOD_US) -> int:
    """CFS quota (µs of CPU per period) that limits a group to `cores` cores."""
    if cores <= 0:
        raise ValueError(f"cores must be positive, got {cores!r}")
    return max(MIN_QUOTA_US, round(cores * period_us))


def limit_files(version: int, cores: float) -> dict[str, str]:
    """The files (and values) that hold a group to `cores` in cgroup v1 or v2."""
    quota_us = cfs_quota_us(cores)
    if version == 1:
        return {"cpu.cfs_period_us": str(CFS_PERIOD_US), "cpu.cfs_quota_us": str(quota_us)}
    return {"cpu.max": f"{quota_us} {CFS_PERIOD_US}"}


@dataclass(frozen=True)
class Placement:
    """One emulated function's CPU limit: where its pid goes and what it was given."""

    name: str
    cores: float
    procs_file: Path | None  # write a pid here to place it; None when not enforced

    def enter(self) -> None:
        """Place the calling process (a child, before exec) in the group; no-op when unenforced."""
        if self.procs_file is not None:
            self.procs_file.write_text(str(os.getpid()))


class CpuLimiter:
    """Creates one CPU group per worker under a group of our own (cgroup v1, else v2); removes them.

    `enforced` is False (with `reason`, naming what was tried) when neither hierarchy lets us hold
    a CPU share; placements are then no-ops and the report says the share was not enforced.
    `root` is the v1 cpu hierarchy, `proc` the /proc/self whose mountinfo and cgroup locate v2.
    """

    def __init__(
        self,
        group_name: str,
        root: Path = CGROUP_V1_CPU_ROOT,
        proc: Path = PROC_SELF,
        files: CgroupFiles | None = None,
    ) -> None:
        self.root = root
        self.files = files or CgroupFiles()
        self.site, self.reason = probe(group_name, root, proc, self.files, CFS_PERIOD_US)
        self.enforced = self.site is not None
        self.group = self.site.group if self.site else root / group_name
        self._children: list[Path] = []

    @property
    def mechanism(self) -> str | None:
        """'cgroup v1 CFS quota' or 'cgroup v2 cpu.max'; None when not enforced."""
        return MECHANISMS[self.site.version] if self.site else None

    def status(self) -> str:
        """One line for the console and the report."""
        if self.enforced:
            return f"CPU share enforced: {self.reason}"
        return f"CPU share not enforced: {self.reason}"

    def place(self, name: str, cores: float) -> Placement:
        """A group limited to `cores` for worker `name` (created now, filled by Placement.enter)."""
        if self.site is None:
            return Placement(name=name, cores=cores, procs_file=None)
        child = self.group / name
        self.files.mkdir(child)
        for file_name, value in limit_files(self.site.version, cores).items():
            self.files.write(child / file_name, value)
        self._children.append(child)
        return Placement(name=name, cores=cores, procs_file=child / "cgroup.procs")

    def throttled_s(self, name: str) -> float:
        """Seconds the group `name` spent throttled so far (0 when unenforced)."""
        stat = self.group / name / "cpu.stat"
        if not self.enforced or not stat.is_file():
            return 0.0
        return throttled_s_from_stat(stat.read_text())

    def close(self) -> None:
        """Remove every group we created; stragglers are moved out first, leaf mode undone."""
        if self.site is not None:
            remove_site(self.site, self._children, self.files)
        self._children.clear()

    def __enter__(self) -> CpuLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
