"""The CPU probe: the share a busy loop achieves in a CPU group, the kernel's scheduler tick,
and the machine's memory."""

from __future__ import annotations

import gzip
import os
import re
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


# Where a kernel says its CONFIG_HZ; the Linux default where none is readable (the split the tick
# decides moves little between 100 and 1000 Hz: provisioner.local_machine.waits_in_compute)
KERNEL_CONFIGS = ("/proc/config.gz", f"/boot/config-{os.uname().release}")
DEFAULT_HZ = 250


def kernel_hz(paths: tuple[str, ...] = KERNEL_CONFIGS) -> tuple[int | None, str]:
    """(CONFIG_HZ, the file it was read from), or (None, why not) where no config says it."""
    for path in paths:
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                found = re.search(r"^CONFIG_HZ=(\d+)$", f.read(), re.MULTILINE)
        except OSError:
            continue
        if found and int(found.group(1)) > 0:
            return int(found.group(1)), path
    return None, f"no CONFIG_HZ in {' or '.join(paths)}"


def machine_memory_gib() -> float:
    """Physical memory, GiB (sysconf pages)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
