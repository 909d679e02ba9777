"""The CPU probe: the share a busy loop achieves in a CPU group, and the machine's memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from emulator import cpu, lifeline

CPU_SHARES = (0.25, 0.5, 1.0)
BUSY_LOOP = (
    "import sys, time\n"
    "d = float(sys.argv[1]); w0 = time.monotonic(); c0 = time.process_time()\n"
    "while time.monotonic() - w0 < d:\n"
    "    pass\n"
    "print((time.process_time() - c0) / (time.monotonic() - w0))\n"
)


def measure_cpu_share(duration_s: float) -> tuple[float | None, str]:
    """Mean achieved/asked CPU share of a busy loop in a CFS group at each of CPU_SHARES."""
    limiter = cpu.CpuLimiter(f"lambda-dnn-calibrate-{os.getpid()}")
    if not limiter.enforced:
        return None, limiter.reason
    with limiter:
        ratios = []
        for k, cores in enumerate(CPU_SHARES):
            placement = limiter.place(f"share-{k}", cores)
            out = subprocess.run(
                [sys.executable, "-c", BUSY_LOOP, repr(duration_s)],
                capture_output=True,
                text=True,
                timeout=60.0 + duration_s,
                check=True,
                # dies with this process (run() waits in the thread that forks), enters its group
                preexec_fn=lifeline.die_with_parent(placement.enter),  # noqa: PLW1509
            )
            ratios.append(float(out.stdout.strip()) / cores)
    shares = ", ".join(f"{c:g}" for c in CPU_SHARES)
    return statistics.mean(ratios), f"busy loop {duration_s:g} s in a CFS group at {shares} core"


def machine_memory_gib() -> float:
    """Physical memory, GiB (sysconf pages)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
