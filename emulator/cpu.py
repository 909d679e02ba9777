"""Hold each emulated function to the CPU share its memory size buys in Lambda.

Lambda gives a function CPU in proportion to its memory: 1,769 MB is one vCPU of credit, capped
at about 5.79 vCPU at 10,240 MB (docs/platform-facts). This machine has fewer cores than a plan
of n functions would use in AWS, so every share is multiplied by one `cpu_scale` factor: one
Lambda vCPU becomes `cpu_scale` local cores. The default factor makes the plan's total share fit
in a fraction of this machine's cores (the rest is left to the PS, the S3 server and the
orchestrator); it is reported so measured compute times can be read against the prediction.

Enforcement puts one group per worker under a group of our own: cgroup v1 CFS quotas
(`cpu.cfs_quota_us` / `cpu.cfs_period_us`) where the v1 cpu hierarchy is writable, else cgroup v2
`cpu.max` ("<quota> <period>") in the unified hierarchy found in /proc/self/mountinfo. v2 only
lets a group without processes hand cpu to its children, so our group goes under our own group
when that is allowed (the root, or a delegated one), else next to it, else this process first
moves into a leaf of its own. Where none works the run goes on unenforced and says what was tried
("CPU share not enforced: <reason>").
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from emulator.procs import pid_alive

MB_PER_VCPU = 1769.0  # Lambda: 1,769 MB of memory = one vCPU of credit
MAX_VCPU = 10240.0 / MB_PER_VCPU  # the credit at Lambda's largest memory size
CGROUP_V1_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
PROC_SELF = Path("/proc/self")  # its mountinfo and cgroup locate our cgroup v2 group
# Leaf mode (cgroup v2): this process moves here so that its old group may delegate cpu.
V2_SELF_LEAF = "self"
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


def throttled_s_from_stat(text: str) -> float:
    """Seconds throttled in a cpu.stat: v2's throttled_usec (µs) or v1's throttled_time (ns)."""
    fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    if "throttled_usec" in fields:
        return int(fields["throttled_usec"]) / 1e6
    return int(fields.get("throttled_time", "0")) / 1e9


def cgroup2_mount(mountinfo: str) -> tuple[Path, str] | None:
    """Mount point and mount root of the first cgroup2 filesystem in /proc/self/mountinfo text.

    A line reads "<id> <parent> <dev> <root> <mount point> <options> ... - <fstype> ...";
    paths escape blanks as octal (\\040).
    """
    for line in mountinfo.splitlines():
        fields, sep, tail = line.partition(" - ")
        parts = fields.split()
        if sep and tail.split()[:1] == ["cgroup2"] and len(parts) >= 5:
            return Path(_unescape(parts[4])), _unescape(parts[3])
    return None


def own_cgroup2_path(cgroup: str) -> str | None:
    """Our path in the unified hierarchy: the "0::<path>" line of /proc/self/cgroup."""
    for line in cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


@dataclass(frozen=True)
class Cgroup2Location:
    """Where the unified hierarchy is mounted and which of its groups this process is in."""

    mount: Path
    own: Path


def locate_cgroup2(proc: Path = PROC_SELF) -> tuple[Cgroup2Location | None, str]:
    """Our cgroup v2 group from `proc`'s mountinfo and cgroup files, or None and why not."""
    try:
        mount = cgroup2_mount((proc / "mountinfo").read_text())
        own_path = own_cgroup2_path((proc / "cgroup").read_text())
    except OSError as err:
        return None, f"cannot read {err.filename}: {err.strerror}"
    if mount is None:
        return None, f"no cgroup2 mount in {proc}/mountinfo"
    mount_point, mount_root = mount
    if own_path is None:
        return None, f"no '0::' line in {proc}/cgroup"
    relative = os.path.relpath(own_path, mount_root)
    if relative == ".." or relative.startswith("../"):
        return None, f"our cgroup {own_path} is outside the cgroup2 mount of {mount_root}"
    return Cgroup2Location(mount=mount_point, own=mount_point / relative), ""


class CgroupFiles:
    """Writes, creates and removes cgroup files; tests pass a fake that keeps the kernel's rules."""

    def write(self, path: Path, text: str) -> None:
        try:
            path.write_text(text)
        except OSError as err:  # a refused write names no file; the reason should
            raise OSError(err.errno, err.strerror, str(path)) from None

    def mkdir(self, path: Path) -> None:
        path.mkdir(exist_ok=True)

    def rmdir(self, path: Path) -> None:
        path.rmdir()


@dataclass(frozen=True)
class Site:
    """Where a run's groups were made and what closing them must undo."""

    version: int  # 1 or 2
    group: Path  # the run's group; one child per placement
    home: Path  # where a straggler in a child goes before the child is removed
    undo: tuple[Path, ...] = ()  # subtree_control files we gave "+cpu" and take back, in order
    home_return: Path | None = None  # leaf mode: `home` is emptied into this group at close


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


MECHANISMS = {1: "cgroup v1 CFS quota", 2: "cgroup v2 cpu.max"}


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
        self.site, self.reason = _probe(group_name, root, proc, self.files)
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
        site = self.site
        if site is None:
            return
        for child in self._children:
            _evacuate(child, site.home, self.files)
            with contextlib.suppress(OSError):
                self.files.rmdir(child)
        self._children.clear()
        # Leaf mode: "-cpu" inside out, or our old group cannot take this process back.
        for control in site.undo:
            with contextlib.suppress(OSError):
                self.files.write(control, "-cpu")
        if site.home_return is not None:
            _evacuate(site.home, site.home_return, self.files)
            with contextlib.suppress(OSError):
                self.files.rmdir(site.home)
        with contextlib.suppress(OSError):
            self.files.rmdir(site.group)

    def __enter__(self) -> CpuLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _probe(group_name: str, root: Path, proc: Path, files: CgroupFiles) -> tuple[Site | None, str]:
    """The first hierarchy that holds a share (v1, then v2) and its reason, or None and why not."""
    site, v1_reason = _probe_v1(root / group_name, files)
    if site is not None:
        return site, v1_reason
    location, why = locate_cgroup2(proc)
    if location is None:
        return None, f"{v1_reason}; cgroup v2: {why}"
    site, v2_reason = _probe_v2(location, group_name, files)
    if site is not None:
        return site, v2_reason
    return None, f"{v1_reason}; {v2_reason}"


def _probe_v1(group: Path, files: CgroupFiles) -> tuple[Site | None, str]:
    root = group.parent
    if not (root / "cpu.cfs_quota_us").is_file():
        return None, f"no cgroup v1 cpu controller at {root}"
    try:
        files.mkdir(group)
    except OSError as err:
        return None, f"cannot create {group}: {err.strerror}"
    site = Site(version=1, group=group, home=root)
    return site, f"{MECHANISMS[1]} under {group} (period {CFS_PERIOD_US} us)"


def _probe_v2(
    location: Cgroup2Location, group_name: str, files: CgroupFiles
) -> tuple[Site | None, str]:
    own = location.own
    available = _words(own / "cgroup.controllers")
    if "cpu" not in available:
        has = " ".join(sorted(available)) or "none"
        return None, f"cgroup v2 at {own}: no cpu controller in its cgroup.controllers (has: {has})"
    tried = []
    for attempt in (_v2_in_place, _v2_sibling, _v2_leaf):
        site, why = attempt(location, group_name, files)
        if site is not None:
            return site, f"{MECHANISMS[2]} under {site.group} ({why}; period {CFS_PERIOD_US} us)"
        tried.append(why)
    return None, f"cgroup v2 at {own}: " + "; ".join(tried)


def _v2_in_place(
    location: Cgroup2Location, group_name: str, files: CgroupFiles
) -> tuple[Site | None, str]:
    """Our group under our own: works where ours may delegate cpu (the root, or no processes)."""
    own = location.own
    try:
        if "cpu" not in _words(own / "cgroup.subtree_control"):
            files.write(own / "cgroup.subtree_control", "+cpu")
        _make_v2_group(own / group_name, files)
    except OSError as err:
        return None, f"in place: {_failure(err)}"
    return Site(version=2, group=own / group_name, home=own), f"in our group {own}"


def _v2_sibling(
    location: Cgroup2Location, group_name: str, files: CgroupFiles
) -> tuple[Site | None, str]:
    """Our group next to our own, in a parent that already delegates cpu (where we may write)."""
    own = location.own
    if own == location.mount:
        return None, "sibling: our group is the hierarchy's root"
    group = own.parent / group_name
    try:
        _make_v2_group(group, files)
    except OSError as err:
        return None, f"sibling: {_failure(err)}"
    return Site(version=2, group=group, home=own), f"next to our group {own}"


def _v2_leaf(
    location: Cgroup2Location, group_name: str, files: CgroupFiles
) -> tuple[Site | None, str]:
    """Move this process into a leaf of our group so that ours, now empty, may delegate cpu.

    The kernel's "no internal processes" rule: a non-root group with processes cannot enable a
    controller for its children. Works only when no other process shares our group.
    """
    own = location.own
    group = own / group_name
    leaf = group / V2_SELF_LEAF
    pid = str(os.getpid())
    try:
        files.mkdir(group)
        files.mkdir(leaf)
        files.write(leaf / "cgroup.procs", pid)
    except OSError as err:
        _remove_quietly([leaf, group], files)
        return None, f"leaf: {_failure(err)}"
    try:
        files.write(own / "cgroup.subtree_control", "+cpu")
        files.write(group / "cgroup.subtree_control", "+cpu")
    except OSError as err:
        with contextlib.suppress(OSError):
            files.write(own / "cgroup.procs", pid)
        _remove_quietly([leaf, group], files)
        return None, f"leaf: {_failure(err)} with this process moved out (others share {own})"
    undo = (group / "cgroup.subtree_control", own / "cgroup.subtree_control")
    site = Site(version=2, group=group, home=leaf, undo=undo, home_return=own)
    return site, f"this process moved to {leaf} so that {own} may delegate cpu"


def _make_v2_group(group: Path, files: CgroupFiles) -> None:
    """Create `group` and let its children have cpu.max; removed again if that is refused."""
    files.mkdir(group)
    try:
        files.write(group / "cgroup.subtree_control", "+cpu")
    except OSError:
        _remove_quietly([group], files)
        raise


def _remove_quietly(groups: list[Path], files: CgroupFiles) -> None:
    for group in groups:
        with contextlib.suppress(OSError):
            files.rmdir(group)


def _failure(err: OSError) -> str:
    """'<file>: <reason>' of a refused cgroup operation."""
    return f"{err.filename}: {err.strerror}" if err.filename else str(err.strerror or err)


def _words(path: Path) -> set[str]:
    """The names in a controllers file; empty when it cannot be read."""
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _unescape(field: str) -> str:
    r"""A mountinfo path with its octal escapes (\040 for a blank) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def remove_stale_groups(
    prefix: str,
    root: Path = CGROUP_V1_CPU_ROOT,
    proc: Path = PROC_SELF,
    files: CgroupFiles | None = None,
) -> list[str]:
    """Remove `<prefix>-<pid>` groups left by a run that was killed (SIGKILL skips cleanup).

    Looks in the v1 cpu hierarchy and where a v2 run puts its group (our group and its parent).
    Only groups whose owning pid is gone are touched; returns the names removed.
    """
    files = files or CgroupFiles()
    removed = _remove_stale_under(prefix, root, files, evacuate_to=root)
    location, _ = locate_cgroup2(proc)
    if location is not None:
        bases = [location.own]
        if location.own != location.mount:
            bases.append(location.own.parent)
        for base in bases:
            # No evacuation in v2: a parent may hold groups of runs in other pid namespaces,
            # whose pids look dead from here; a group with processes cannot be removed anyway.
            removed += _remove_stale_under(prefix, base, files, evacuate_to=None)
    return removed


def _remove_stale_under(
    prefix: str, base: Path, files: CgroupFiles, evacuate_to: Path | None
) -> list[str]:
    removed: list[str] = []
    if not base.is_dir():
        return removed
    for group in sorted(base.glob(f"{prefix}-*")):
        pid_text = group.name.rsplit("-", 1)[-1]
        if not group.is_dir() or not pid_text.isdigit() or pid_alive(int(pid_text)):
            continue
        for child in [p for p in group.iterdir() if p.is_dir()]:
            if evacuate_to is not None:
                _evacuate(child, evacuate_to, files)
            with contextlib.suppress(OSError):
                files.rmdir(child)
        with contextlib.suppress(OSError):
            files.rmdir(group)
            removed.append(group.name)
    return removed


def _evacuate(group: Path, to: Path, files: CgroupFiles) -> None:
    """Move any process still in `group` to `to` so the group can be removed."""
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                files.write(to / "cgroup.procs", pid)
