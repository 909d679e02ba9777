"""The kernel's side of holding a process to a CPU share: cgroup v1 and v2, where a run's
groups can go, and the groups a killed run left behind.

A run puts one group per worker under a group of its own: cgroup v1 CFS quotas
(`cpu.cfs_quota_us` / `cpu.cfs_period_us`) where the v1 cpu hierarchy is writable, else cgroup v2
`cpu.max` ("<quota> <period>") in the unified hierarchy found in /proc/self/mountinfo. v2 only
lets a group without processes hand cpu to its children, so our group goes under our own group
when that is allowed (the root, or a delegated one), else next to it, else this process first
moves into a leaf of its own. `probe` says which worked, or what was tried where none did.
The shares themselves, and the limiter a run holds, are emulator/cpu.py's.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from emulator.procs import pid_alive

CGROUP_V1_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
PROC_SELF = Path("/proc/self")  # its mountinfo and cgroup locate our cgroup v2 group
# Leaf mode (cgroup v2): this process moves here so that its old group may delegate cpu.
V2_SELF_LEAF = "self"


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


MECHANISMS = {1: "cgroup v1 CFS quota", 2: "cgroup v2 cpu.max"}


def probe(
    group_name: str, root: Path, proc: Path, files: CgroupFiles, period_us: int
) -> tuple[Site | None, str]:
    """The first hierarchy that holds a share (v1, then v2) and its reason, or None and why not;
    `period_us` is the CFS period the groups will be given (named in the reason)."""
    site, v1_reason = _probe_v1(root / group_name, files, period_us)
    if site is not None:
        return site, v1_reason
    location, why = locate_cgroup2(proc)
    if location is None:
        return None, f"{v1_reason}; cgroup v2: {why}"
    site, v2_reason = _probe_v2(location, group_name, files, period_us)
    if site is not None:
        return site, v2_reason
    return None, f"{v1_reason}; {v2_reason}"


def _probe_v1(group: Path, files: CgroupFiles, period_us: int) -> tuple[Site | None, str]:
    root = group.parent
    if not (root / "cpu.cfs_quota_us").is_file():
        return None, f"no cgroup v1 cpu controller at {root}"
    try:
        files.mkdir(group)
    except OSError as err:
        return None, f"cannot create {group}: {err.strerror}"
    site = Site(version=1, group=group, home=root)
    return site, f"{MECHANISMS[1]} under {group} (period {period_us} us)"


def _probe_v2(
    location: Cgroup2Location, group_name: str, files: CgroupFiles, period_us: int
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
            return site, f"{MECHANISMS[2]} under {site.group} ({why}; period {period_us} us)"
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


def remove_site(site: Site, children: list[Path], files: CgroupFiles) -> None:
    """Remove a run's groups (`children`, then the site's own); stragglers are moved out first,
    leaf mode undone."""
    for child in children:
        evacuate(child, site.home, files)
        with contextlib.suppress(OSError):
            files.rmdir(child)
    # Leaf mode: "-cpu" inside out, or our old group cannot take this process back.
    for control in site.undo:
        with contextlib.suppress(OSError):
            files.write(control, "-cpu")
    if site.home_return is not None:
        evacuate(site.home, site.home_return, files)
        with contextlib.suppress(OSError):
            files.rmdir(site.home)
    with contextlib.suppress(OSError):
        files.rmdir(site.group)


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
                evacuate(child, evacuate_to, files)
            with contextlib.suppress(OSError):
                files.rmdir(child)
        with contextlib.suppress(OSError):
            files.rmdir(group)
            removed.append(group.name)
    return removed


def evacuate(group: Path, to: Path, files: CgroupFiles) -> None:
    """Move any process still in `group` to `to` so the group can be removed."""
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                files.write(to / "cgroup.procs", pid)
