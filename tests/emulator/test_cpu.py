"""CPU share arithmetic, the cgroup v1 limiter and its clearly reported fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator import cpu
from emulator.invocation import poll, start_environment, submit
from emulator.procs import Supervisor


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
    limiter = cpu.CpuLimiter("emu-test", root=tmp_path / "nothing-here")
    assert not limiter.enforced
    assert limiter.status().startswith("CPU share not enforced: no cgroup v1 cpu controller")
    placement = limiter.place("w0", 0.5)
    placement.enter()  # must not fail
    assert placement.procs_file is None
    limiter.close()


def _cgroup_v1_writable() -> bool:
    return (cpu.CGROUP_V1_CPU_ROOT / "cpu.cfs_quota_us").is_file() and os.access(
        cpu.CGROUP_V1_CPU_ROOT, os.W_OK
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
    removed = cpu.remove_stale_groups("emu", root=tmp_path)
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
