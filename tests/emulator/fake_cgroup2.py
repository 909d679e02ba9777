"""A cgroup v2 hierarchy in a tmp dir that keeps the kernel rules the CPU limiter depends on.

Plain files cannot refuse a write, so the limiter's file operations (CgroupFiles) are swapped for
this fake, which answers as the kernel does (cgroup-v2.rst, "Top-down constraint" and "No
Internal Process Constraint"): a controller is enabled for children only if the group has it;
a non-root group with processes cannot enable one, nor take processes while it delegates one;
cpu.max exists only where the parent delegates cpu; a group with processes or children cannot
be removed; writes outside the groups we may write (`refused`) are denied. Every write is
recorded as (path relative to the mount, text).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from emulator.cgroups import CgroupFiles

INTERFACE_FILES = ("cgroup.controllers", "cgroup.subtree_control", "cgroup.procs")
CPU_FILES = {"cpu.max": "max 100000\n", "cpu.stat": "usage_usec 0\nthrottled_usec 0\n"}


def refusal(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


class FakeCgroup2(CgroupFiles):
    """The unified hierarchy mounted at `mount`, its root offering `controllers`."""

    def __init__(self, mount: Path, controllers: str = "cpu memory pids") -> None:
        self.mount = mount
        self.writes: list[tuple[str, str]] = []
        self.refused: set[Path] = set()  # groups in which we may not create or change anything
        mount.mkdir(parents=True)
        (mount / "cgroup.controllers").write_text(controllers)
        (mount / "cgroup.subtree_control").write_text("")
        (mount / "cgroup.procs").write_text("")

    def add(self, relative: str, *, delegate: str = "", pids: tuple[int, ...] = ()) -> Path:
        """Set up a group (as the host did before the test) with its subtree_control and pids."""
        group = self.mount
        for part in Path(relative).parts:
            group = group / part
            if not group.is_dir():
                self._create(group)
        (group / "cgroup.subtree_control").write_text(delegate)
        self._refresh_children(group)
        (group / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))
        return group

    def pids(self, group: Path) -> list[str]:
        return (group / "cgroup.procs").read_text().split()

    def mkdir(self, path: Path) -> None:
        if path.parent in self.refused:
            raise refusal(errno.EACCES, path)
        if not path.is_dir():
            self._create(path)

    def rmdir(self, path: Path) -> None:
        if self.pids(path) or any(p.is_dir() for p in path.iterdir()):
            raise refusal(errno.EBUSY, path)
        for file in path.iterdir():
            file.unlink()
        path.rmdir()

    def write(self, path: Path, text: str) -> None:
        group = path.parent
        if group in self.refused:
            raise refusal(errno.EACCES, path)
        if path.name == "cgroup.subtree_control":
            self._control(group, text)
        elif path.name == "cgroup.procs":
            self._move(group, text.strip())
        elif not path.is_file():
            raise refusal(errno.ENOENT, path)  # e.g. cpu.max where the parent keeps cpu
        else:
            path.write_text(text)
        self.writes.append((str(path.relative_to(self.mount)), text))

    def _create(self, group: Path) -> None:
        group.mkdir()
        offered = (group.parent / "cgroup.subtree_control").read_text()
        (group / "cgroup.controllers").write_text(offered)
        (group / "cgroup.subtree_control").write_text("")
        (group / "cgroup.procs").write_text("")
        if "cpu" in offered.split():
            for name, text in CPU_FILES.items():
                (group / name).write_text(text)

    def _control(self, group: Path, text: str) -> None:
        enabled = set((group / "cgroup.subtree_control").read_text().split())
        for word in text.split():
            sign, name = word[0], word[1:]
            if sign == "+":
                if name not in (group / "cgroup.controllers").read_text().split():
                    raise refusal(errno.ENOENT, group / "cgroup.subtree_control")
                if group != self.mount and self.pids(group):
                    raise refusal(errno.EBUSY, group / "cgroup.subtree_control")
                enabled.add(name)
            else:
                for child in (p for p in group.iterdir() if p.is_dir()):
                    if name in (child / "cgroup.subtree_control").read_text().split():
                        raise refusal(errno.EBUSY, group / "cgroup.subtree_control")
                enabled.discard(name)
        (group / "cgroup.subtree_control").write_text(" ".join(sorted(enabled)))
        self._refresh_children(group)

    def _refresh_children(self, group: Path) -> None:
        offered = (group / "cgroup.subtree_control").read_text()
        for child in (p for p in group.iterdir() if p.is_dir()):
            (child / "cgroup.controllers").write_text(offered)

    def _move(self, group: Path, pid: str) -> None:
        if group != self.mount and (group / "cgroup.subtree_control").read_text().split():
            raise refusal(errno.EBUSY, group / "cgroup.procs")
        for procs in self.mount.rglob("cgroup.procs"):
            kept = [p for p in procs.read_text().split() if p != pid]
            procs.write_text("".join(f"{p}\n" for p in kept))
        with (group / "cgroup.procs").open("a") as procs_file:
            procs_file.write(f"{pid}\n")


def fake_proc(proc: Path, mount: Path, own: str, mount_root: str = "/") -> Path:
    """A /proc/self with the mountinfo and cgroup files of a process in `own` (hybrid layout)."""
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        f"41 31 0:38 {mount_root} {mount} rw,relatime - cgroup2 cgroup2 rw\n"
    )
    (proc / "cgroup").write_text(f"4:memory:/\n0::{own}\n")
    return proc
