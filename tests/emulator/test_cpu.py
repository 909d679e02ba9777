"""CPU share arithmetic, the cgroup v1 and v2 limiters and their clearly reported fallback.

The v2 paths run against FakeCgroup2 (a tmp tree keeping the kernel's rules): this machine's
unified hierarchy has no cpu controller (cpu is bound to v1), which the real-kernel test checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator import cgroups, cpu
from emulator.invocation import poll, start_environment, submit
from emulator.procs import Supervisor
from tests.emulator.fake_cgroup2 import FakeCgroup2, fake_proc


def test_vcpu_share_is_memory_over_1769_capped_at_lambda_max() -> None:
    assert cpu.lambda_vcpu_share(1769) == pytest.approx(1.0)
    assert cpu.lambda_vcpu_share(884.5) == pytest.approx(0.5)
    assert cpu.lambda_vcpu_share(10240) == pytest.approx(10240 / 1769)
    assert cpu.lambda_vcpu_share(20000) == pytest.approx(10240 / 1769)


def test_vcpu_share_rejects_non_positive_memory() -> None:
    with pytest.raises(ValueError, match="memory_mb must be positive, got 0"):
        cpu.lambda_vcpu_share(0)


def test_default_scale_fits_the_plan_in_the_worker_fraction_of_the_machine() -> None:
    scale = cpu.default_cpu_scale(n_workers=4, memory_mb=1769, cores=2.0)
    assert 4 * cpu.local_cores(1769, scale) == pytest.approx(cpu.WORKER_CORE_FRACTION * 2.0)


def test_default_scale_never_gives_more_than_one_core_per_vcpu() -> None:
    assert cpu.default_cpu_scale(n_workers=1, memory_mb=512, cores=64.0) == 1.0


def test_quota_is_cores_times_period_with_kernel_minimum() -> None:
    assert cpu.cfs_quota_us(0.5) == cpu.CFS_PERIOD_US // 2
    assert cpu.cfs_quota_us(2.0) == 2 * cpu.CFS_PERIOD_US
    assert cpu.cfs_quota_us(0.0001) == cpu.MIN_QUOTA_US


@pytest.mark.parametrize("bad", ["zero", "-1", "0", "nan"])
def test_parse_cpu_scale_names_the_bad_value(bad: str) -> None:
    with pytest.raises(ValueError, match=f"bad --cpu-scale '{bad}'"):
        cpu.parse_cpu_scale(bad)


def test_fallback_without_cgroup_is_reported_and_placement_is_a_no_op(tmp_path: Path) -> None:
    limiter = cpu.CpuLimiter("emu-test", root=tmp_path / "nothing-here", proc=tmp_path / "no-proc")
    assert not limiter.enforced
    assert limiter.status() == (
        f"CPU share not enforced: no cgroup v1 cpu controller at {tmp_path / 'nothing-here'}; "
        f"cgroup v2: cannot read {tmp_path / 'no-proc' / 'mountinfo'}: No such file or directory"
    )
    assert limiter.mechanism is None
    placement = limiter.place("w0", 0.5)
    placement.enter()  # must not fail
    assert placement.procs_file is None
    limiter.close()


def _cgroup_v1_writable() -> bool:
    return (cgroups.CGROUP_V1_CPU_ROOT / "cpu.cfs_quota_us").is_file() and os.access(
        cgroups.CGROUP_V1_CPU_ROOT, os.W_OK
    )


@pytest.mark.skipif(not _cgroup_v1_writable(), reason="needs a writable cgroup v1 cpu hierarchy")
def test_cgroup_limiter_sets_quota_places_child_and_removes_groups() -> None:
    with cpu.CpuLimiter(f"emu-test-{os.getpid()}") as limiter:
        assert limiter.enforced, limiter.status()
        placement = limiter.place("w0", 0.25)
        group = limiter.group / "w0"
        assert (group / "cpu.cfs_period_us").read_text().strip() == "20000"
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "5000"
        proc = subprocess.Popen(
            [sys.executable, "-c", "import os; print(open('/proc/self/cgroup').read())"],
            stdout=subprocess.PIPE,
            preexec_fn=placement.enter,
        )
        out, _ = proc.communicate(timeout=30)
        assert f"{limiter.group.name}/w0" in out.decode()
    assert not limiter.group.exists()


def test_stale_groups_of_dead_runs_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f"emu-{dead.pid}" / "worker-0").mkdir(parents=True)
    (tmp_path / f"emu-{os.getpid()}" / "worker-0").mkdir(parents=True)
    removed = cgroups.remove_stale_groups("emu", root=tmp_path, proc=tmp_path / "no-proc")
    assert removed == [f"emu-{dead.pid}"]
    assert (tmp_path / f"emu-{os.getpid()}").is_dir()


def test_init_phase_runs_unthrottled_and_invocations_in_the_group(tmp_path: Path) -> None:
    """Lambda's init burst: the handler module is imported outside the quota, invoked inside."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    supervisor = Supervisor()
    with cpu.CpuLimiter(f"emu-test-{os.getpid()}") as limiter, supervisor.guard():
        assert limiter.enforced, limiter.status()
        placement = limiter.place("w0", 0.5)
        environment = start_environment(
            supervisor, name="w0", handler="tests.emulator.cgroup_probe:handler",
            memory_mb=1024, work_dir=tmp_path, env=env, placement=placement,
        )  # fmt: skip
        inv = submit(environment, name="w0-0", event={}, limit_s=30, work_dir=tmp_path,
                     one_shot=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while (outcome := poll(supervisor, inv)) is None:
            assert time.monotonic() < deadline, "the probe handler never answered"
            time.sleep(0.05)
    assert outcome.ok, outcome.error
    group = f"{limiter.group.name}/w0"
    assert outcome.result["invoked_in"].endswith(group)
    assert not outcome.result["imported_in"].endswith(group)


HYBRID_MOUNTINFO = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def test_cgroup2_mount_and_our_group_are_read_from_proc_files() -> None:
    assert cgroups.cgroup2_mount(HYBRID_MOUNTINFO) == (Path("/sys/fs/cgroup/unified"), "/")
    spaced = "29 1 0:26 /ctr /mnt/cg\\0402 rw shared:4 master:1 - cgroup2 cgroup2 rw\n"
    assert cgroups.cgroup2_mount(spaced) == (Path("/mnt/cg 2"), "/ctr")
    assert cgroups.cgroup2_mount(HYBRID_MOUNTINFO.splitlines()[1]) is None
    assert (
        cgroups.own_cgroup2_path("1:cpu:/\n0::/user.slice/s 1.scope\n") == "/user.slice/s 1.scope"
    )
    assert cgroups.own_cgroup2_path("1:cpu:/\n") is None


def test_our_group_is_found_below_the_mount_root(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", tmp_path / "cg", "/docker/c1/app", mount_root="/docker/c1")
    location, _ = cgroups.locate_cgroup2(proc)
    assert location == cgroups.Cgroup2Location(mount=tmp_path / "cg", own=tmp_path / "cg" / "app")
    outside = fake_proc(tmp_path / "p2", tmp_path / "cg", "/other", mount_root="/docker/c1")
    assert cgroups.locate_cgroup2(outside) == (
        None,
        "our cgroup /other is outside the cgroup2 mount of /docker/c1",
    )


def test_stat_throttling_is_read_in_either_hierarchy_s_unit() -> None:
    v1 = "nr_periods 10\nnr_throttled 3\nthrottled_time 2500000000\n"
    v2 = "usage_usec 9\nnr_periods 10\nnr_throttled 3\nthrottled_usec 1500000\n"
    assert cgroups.throttled_s_from_stat(v1) == pytest.approx(2.5)
    assert cgroups.throttled_s_from_stat(v2) == pytest.approx(1.5)


def test_v2_at_the_hierarchy_root_writes_cpu_max_and_removes_its_groups(tmp_path: Path) -> None:
    """The root group may hold processes and still delegate cpu: the group goes under it."""
    kernel = FakeCgroup2(tmp_path / "cg")
    kernel.add("", pids=(1, os.getpid()))
    proc = fake_proc(tmp_path / "proc", kernel.mount, "/")
    limiter = cpu.CpuLimiter("emu-7", root=tmp_path / "no-v1", proc=proc, files=kernel)
    group = kernel.mount / "emu-7"
    assert limiter.status() == (
        f"CPU share enforced: cgroup v2 cpu.max under {group} (in our group {kernel.mount}; "
        "period 20000 us)"
    )
    assert limiter.mechanism == "cgroup v2 cpu.max"
    placement = limiter.place("w0", 0.25)
    assert placement.procs_file == group / "w0" / "cgroup.procs"
    assert kernel.writes == [
        ("cgroup.subtree_control", "+cpu"),
        ("emu-7/cgroup.subtree_control", "+cpu"),
        ("emu-7/w0/cpu.max", "5000 20000"),
    ]
    (group / "w0" / "cpu.stat").write_text("usage_usec 4\nthrottled_usec 250000\n")
    assert limiter.throttled_s("w0") == pytest.approx(0.25)
    kernel.write(group / "w0" / "cgroup.procs", "4242")  # a straggler the run left behind
    limiter.close()
    assert not group.exists()
    assert "4242" in kernel.pids(kernel.mount)


def test_v2_group_with_other_processes_puts_ours_next_to_it(tmp_path: Path) -> None:
    """No internal processes: a busy non-root group cannot delegate; its parent already does."""
    kernel = FakeCgroup2(tmp_path / "cg")
    kernel.add("a", delegate="cpu")
    own = kernel.add("a/b", pids=(os.getpid(), 999))
    proc = fake_proc(tmp_path / "proc", kernel.mount, "/a/b")
    limiter = cpu.CpuLimiter("emu-7", root=tmp_path / "no-v1", proc=proc, files=kernel)
    assert limiter.enforced, limiter.status()
    assert limiter.group == kernel.mount / "a" / "emu-7"
    assert f"(next to our group {own};" in limiter.reason
    limiter.place("w0", 1.5)
    assert kernel.writes == [
        ("a/emu-7/cgroup.subtree_control", "+cpu"),
        ("a/emu-7/w0/cpu.max", "30000 20000"),
    ]
    kernel.write(limiter.group / "w0" / "cgroup.procs", "4242")
    limiter.close()
    assert not limiter.group.exists()
    assert kernel.pids(own) == [str(os.getpid()), "999", "4242"]


def _delegated_group(tmp_path: Path, pids: tuple[int, ...]) -> tuple[FakeCgroup2, Path, Path]:
    """A group delegated to us (we may write below it, not next to it) holding `pids`."""
    kernel = FakeCgroup2(tmp_path / "cg")
    parent = kernel.add("a", delegate="cpu")
    own = kernel.add("a/b", pids=pids)
    kernel.refused.add(parent)
    return kernel, own, fake_proc(tmp_path / "proc", kernel.mount, "/a/b")


def test_v2_alone_in_a_delegated_group_moves_itself_to_a_leaf_and_back(tmp_path: Path) -> None:
    pid = str(os.getpid())
    kernel, own, proc = _delegated_group(tmp_path, (os.getpid(),))
    limiter = cpu.CpuLimiter("emu-7", root=tmp_path / "no-v1", proc=proc, files=kernel)
    leaf = own / "emu-7" / "self"
    assert limiter.enforced, limiter.status()
    assert f"(this process moved to {leaf} so that {own} may delegate cpu;" in limiter.reason
    assert kernel.pids(leaf) == [pid] and kernel.pids(own) == []
    limiter.place("w0", 0.5)
    limiter.close()
    assert kernel.writes == [
        ("a/b/emu-7/self/cgroup.procs", pid),
        ("a/b/cgroup.subtree_control", "+cpu"),
        ("a/b/emu-7/cgroup.subtree_control", "+cpu"),
        ("a/b/emu-7/w0/cpu.max", "10000 20000"),
        ("a/b/emu-7/cgroup.subtree_control", "-cpu"),
        ("a/b/cgroup.subtree_control", "-cpu"),
        ("a/b/cgroup.procs", pid),
    ]
    assert kernel.pids(own) == [pid]
    assert not (own / "emu-7").exists()


def test_v2_refused_everywhere_names_each_attempt_and_undoes_them(tmp_path: Path) -> None:
    """Another process shares our delegated group: no attempt can work, and none leaves a trace."""
    kernel, own, proc = _delegated_group(tmp_path, (os.getpid(), 999))
    limiter = cpu.CpuLimiter("emu-7", root=tmp_path / "no-v1", proc=proc, files=kernel)
    assert not limiter.enforced
    assert limiter.status() == (
        f"CPU share not enforced: no cgroup v1 cpu controller at {tmp_path / 'no-v1'}; "
        f"cgroup v2 at {own}: "
        f"in place: {own}/cgroup.subtree_control: Device or resource busy; "
        f"sibling: {own.parent}/emu-7: Permission denied; "
        f"leaf: {own}/cgroup.subtree_control: Device or resource busy with this process moved "
        f"out (others share {own})"
    )
    assert kernel.pids(own) == ["999", str(os.getpid())]
    assert not [p for p in own.iterdir() if p.is_dir()]
    assert limiter.place("w0", 0.5).procs_file is None


def test_v2_without_a_cpu_controller_says_what_it_has(tmp_path: Path) -> None:
    """This machine's layout: cpu is bound to the v1 hierarchy, unified offers only hugetlb."""
    kernel = FakeCgroup2(tmp_path / "cg", controllers="hugetlb")
    proc = fake_proc(tmp_path / "proc", kernel.mount, "/")
    limiter = cpu.CpuLimiter("emu-7", root=tmp_path / "no-v1", proc=proc, files=kernel)
    assert limiter.reason.endswith(
        f"; cgroup v2 at {kernel.mount}: no cpu controller in its cgroup.controllers (has: hugetlb)"
    )
    assert kernel.writes == []


def test_v1_is_preferred_when_both_hierarchies_can_hold_a_share(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("-1")
    kernel = FakeCgroup2(tmp_path / "cg")
    proc = fake_proc(tmp_path / "proc", kernel.mount, "/")
    limiter = cpu.CpuLimiter("emu-7", root=v1, proc=proc)
    assert limiter.mechanism == "cgroup v1 CFS quota"
    limiter.place("w0", 0.25)
    assert (v1 / "emu-7" / "w0" / "cpu.cfs_period_us").read_text() == "20000"
    assert (v1 / "emu-7" / "w0" / "cpu.cfs_quota_us").read_text() == "5000"
    assert not (kernel.mount / "emu-7").exists()


def test_stale_v2_groups_of_dead_runs_are_removed_next_to_and_under_ours(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    kernel = FakeCgroup2(tmp_path / "cg")
    kernel.add("a", delegate="cpu")
    kernel.add("a/b", pids=(os.getpid(),))
    kernel.add(f"a/emu-{dead.pid}/w0")
    kernel.add(f"a/b/emu-{dead.pid}/self")
    kernel.add(f"a/emu-{os.getpid()}/w0")
    survivor = kernel.add(f"a/b/emu-{dead.pid + 1}/w0", pids=(4242,))
    proc = fake_proc(tmp_path / "proc", kernel.mount, "/a/b")
    removed = cgroups.remove_stale_groups("emu", root=tmp_path / "no-v1", proc=proc, files=kernel)
    assert sorted(removed) == [f"emu-{dead.pid}", f"emu-{dead.pid}"]
    assert not (kernel.mount / "a" / f"emu-{dead.pid}").exists()
    assert not (kernel.mount / "a" / "b" / f"emu-{dead.pid}").exists()
    assert (kernel.mount / "a" / f"emu-{os.getpid()}" / "w0").is_dir()
    # A group that still holds a process is left alone, not emptied (its pid may be another
    # namespace's).
    assert kernel.pids(survivor) == ["4242"]


def _real_v2_offers_cpu() -> bool:
    location, _ = cgroups.locate_cgroup2()
    if location is None:
        return False
    controllers = (location.own / "cgroup.controllers").read_text().split()
    return "cpu" in controllers


def test_real_unified_hierarchy_is_used_exactly_when_it_offers_cpu(tmp_path: Path) -> None:
    """Against this kernel, with v1 out of the way: enforced by v2 iff the unified group has cpu."""
    name = f"emu-test-v2-{os.getpid()}"
    with cpu.CpuLimiter(name, root=tmp_path / "no-v1") as limiter:
        if not _real_v2_offers_cpu():
            assert not limiter.enforced
            assert "no cpu controller in its cgroup.controllers" in limiter.reason
            return
        assert limiter.mechanism == "cgroup v2 cpu.max", limiter.status()
        placement = limiter.place("w0", 0.25)
        assert (limiter.group / "w0" / "cpu.max").read_text().split() == ["5000", "20000"]
        proc = subprocess.Popen(
            [sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
            stdout=subprocess.PIPE,
            preexec_fn=placement.enter,
        )
        out, _ = proc.communicate(timeout=30)
        assert f"{name}/w0" in out.decode()
    assert not limiter.group.exists()


def test_machine_name_is_the_cpu_model_and_the_cores() -> None:
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n"
    assert cpu.machine_name(cpuinfo, 2) == "AMD EPYC 7B13, 2 cores"
    assert cpu.machine_name("processor\t: 0\n", 4).endswith(", 4 cores")
    assert cpu.model_name(cpuinfo) == "AMD EPYC 7B13"
    assert cpu.model_name("processor\t: 0\nmodel name\t:\n") is None  # names none


def test_this_machine_counts_the_cores_this_process_may_run_on() -> None:
    """The catalog's figures, the runs' reports and the benchmarks name a machine alike: by the
    cores of this process's affinity, not the host's count."""
    assert cpu.this_machine().endswith(f", {len(os.sched_getaffinity(0))} cores")
