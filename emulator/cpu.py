"""Hold each emulated function to the CPU share its memory size buys in Lambda.

Lambda gives a function CPU in proportion to its memory: 1,769 MB is one vCPU of credit, capped
at about 5.79 vCPU at 10,240 MB (docs/platform-facts). This machine has fewer cores than a plan
of n functions would use in AWS, so every share is multiplied by one `cpu_scale` factor: one
Lambda vCPU becomes `cpu_scale` local cores. The default factor makes the plan's total share fit
in a fraction of this machine's cores (the rest is left to the PS, the S3 server and the
orchestrator); it is reported so measured compute times can be read against the prediction.

Enforcement uses cgroup v1 CFS quotas (`cpu.cfs_quota_us` / `cpu.cfs_period_us`), one group per
worker under a group of our own; where that is not possible the run goes on unenforced and says
so ("CPU share not enforced: <reason>").
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from emulator.procs import pid_alive

MB_PER_VCPU = 1769.0  # Lambda: 1,769 MB of memory = one vCPU of credit
MAX_VCPU = 10240.0 / MB_PER_VCPU  # the credit at Lambda's largest memory size
CGROUP_V1_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
# Lambda's throttling interval, as observed by pwrdrvr/lambda-dispatch#246 (2024-12: a function
# that uses its share of a 20 ms slice is paused until the slice ends); the kernel default
# of 100 ms would let an emulated worker burst five times longer than a Lambda one.
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
    """Creates one cgroup v1 CPU group per worker under a group of our own; removes them all.

    `enforced` is False (with `reason`) when cgroup v1's CPU controller is not usable here;
    placements are then no-ops and the report says the share was not enforced.
    """

    def __init__(self, group_name: str, root: Path = CGROUP_V1_CPU_ROOT) -> None:
        self.root = root
        self.group = root / group_name
        self.enforced, self.reason = self._probe()
        self._children: list[Path] = []

    def _probe(self) -> tuple[bool, str]:
        if not (self.root / "cpu.cfs_quota_us").is_file():
            return False, f"no cgroup v1 cpu controller at {self.root}"
        try:
            self.group.mkdir(exist_ok=True)
        except OSError as err:
            return False, f"cannot create {self.group}: {err.strerror}"
        return True, f"cgroup v1 CFS quota under {self.group} (period {CFS_PERIOD_US} us)"

    def status(self) -> str:
        """One line for the console and the report."""
        if self.enforced:
            return f"CPU share enforced: {self.reason}"
        return f"CPU share not enforced: {self.reason}"

    def place(self, name: str, cores: float) -> Placement:
        """A group limited to `cores` for worker `name` (created now, filled by Placement.enter)."""
        if not self.enforced:
            return Placement(name=name, cores=cores, procs_file=None)
        child = self.group / name
        child.mkdir(exist_ok=True)
        (child / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (child / "cpu.cfs_quota_us").write_text(str(cfs_quota_us(cores)))
        self._children.append(child)
        return Placement(name=name, cores=cores, procs_file=child / "cgroup.procs")

    def throttled_s(self, name: str) -> float:
        """Seconds the group `name` spent throttled so far (0 when unenforced)."""
        stat = self.group / name / "cpu.stat"
        if not self.enforced or not stat.is_file():
            return 0.0
        fields = dict(line.split() for line in stat.read_text().splitlines() if line.strip())
        return int(fields.get("throttled_time", "0")) / 1e9

    def close(self) -> None:
        """Remove every group we created; stragglers are moved to the root group first."""
        if not self.enforced:
            return
        for child in [*self._children, self.group]:
            if child != self.group:
                _evacuate(child, self.root)
            with contextlib.suppress(FileNotFoundError, OSError):
                child.rmdir()
        self._children.clear()

    def __enter__(self) -> CpuLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remove_stale_groups(prefix: str, root: Path = CGROUP_V1_CPU_ROOT) -> list[str]:
    """Remove `<prefix>-<pid>` groups left by a run that was killed (SIGKILL skips cleanup).

    Only groups whose owning pid is gone are touched; returns the names removed.
    """
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for group in root.glob(f"{prefix}-*"):
        pid_text = group.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit() or pid_alive(int(pid_text)):
            continue
        for child in [p for p in group.iterdir() if p.is_dir()]:
            _evacuate(child, root)
            with contextlib.suppress(OSError):
                child.rmdir()
        with contextlib.suppress(OSError):
            group.rmdir()
            removed.append(group.name)
    return removed


def _evacuate(group: Path, root: Path) -> None:
    """Move any process still in `group` to `root` so the group can be removed."""
    procs = group / "cgroup.procs"
    with contextlib.suppress(OSError):
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                (root / "cgroup.procs").write_text(pid)
