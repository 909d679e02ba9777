"""The memory probe: what faulting in fresh memory costs the kernel, and how much of it is cheap.

On a virtual machine the host backs the guest's memory lazily: pages the guest used lately are
backed and fault in at the kernel's own cost, the rest first wait for the host. On the 2-core
VM this was written on, a fresh page cost about 2.7 µs of kernel CPU for the first 5-6 GB and
about 11.5 µs beyond, and a crowd of cold workers crosses that line: 8 MobileNetV2 workers fault
in about 1 GB each before their first step ends, and the ones that faulted last spent up to
three times the kernel CPU of one alone (bench/lab/page_faults.py measured no such growth with
2 GB in all, which stays below the line). A plain machine shows no line within the probe's cap.

One child maps fresh blocks of CHUNK_MB and writes a byte to each page, timing each block's
kernel CPU; the figures are read from those timings by `fresh_memory_figures`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass

from emulator import lifeline

CHUNK_MB = 128
# A block slower than this × the cheap blocks' median has crossed the line; RUN blocks in a row
# confirm it (one slow block is a spell of the host's, not the line).
JUMP_RATIO = 2.0
RUN = 4
CAP_MB = 12 * 1024  # the most the probe maps: past what a crowd of workers here holds
SPARE_MB = 3 * 1024  # left free for everything else while the probe holds its blocks
QUICK_PROBE_MB = 4 * CHUNK_MB  # `--quick` calibration: a few blocks, below any line
PROBE = (
    "import mmap, resource, sys, json\n"
    "chunk, most, ratio, run = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), "
    "int(sys.argv[4])\n"
    "page = mmap.PAGESIZE; held = []; costs = []; slow = 0\n"
    "while len(costs) * chunk < most and slow < run:\n"
    "    before = resource.getrusage(resource.RUSAGE_SELF).ru_stime\n"
    "    block = mmap.mmap(-1, chunk << 20)\n"
    "    for offset in range(0, chunk << 20, page):\n"
    "        block[offset] = 1\n"
    "    costs.append((resource.getrusage(resource.RUSAGE_SELF).ru_stime - before) / chunk)\n"
    "    held.append(block)\n"
    "    cheap = sorted(costs[: max(1, len(costs) - slow)])\n"
    "    slow = slow + 1 if len(costs) > run and costs[-1] > ratio * cheap[len(cheap) // 2] "
    "else 0\n"
    "print(json.dumps(costs))\n"
)


@dataclass(frozen=True)
class FreshMemory:
    """Kernel CPU seconds per MB of fresh memory faulted in: `warm_s_per_mb` for the first
    `warm_mb`, `cold_s_per_mb` beyond (None: no line within the probe's `probed_mb`)."""

    warm_s_per_mb: float
    warm_mb: float | None
    cold_s_per_mb: float | None
    probed_mb: float


def fresh_memory_figures(
    costs_s_per_mb: list[float], chunk_mb: float = CHUNK_MB, ratio: float = JUMP_RATIO
) -> FreshMemory:
    """The figures from each block's kernel seconds per MB, in the order they were mapped: the
    line is the earliest block from which every block to the end costs over `ratio` × the
    median of the blocks before it (the probe stops RUN blocks past it); warm below, cold from
    it. The first block also pays the process's own first faults, so no median holds it."""
    if not costs_s_per_mb:
        raise ValueError("no block timed: the memory probe mapped nothing")
    costs = costs_s_per_mb
    for start in range(2, len(costs)):
        warm = statistics.median(costs[1:start])
        if all(c > ratio * warm for c in costs[start:]):
            return FreshMemory(
                warm_s_per_mb=warm,
                warm_mb=start * chunk_mb,
                cold_s_per_mb=statistics.median(costs[start:]),
                probed_mb=len(costs) * chunk_mb,
            )
    return FreshMemory(
        warm_s_per_mb=statistics.median(costs[1:] or costs),
        warm_mb=None,
        cold_s_per_mb=None,
        probed_mb=len(costs) * chunk_mb,
    )


def probe_cap_mb(available_mb: float, cap_mb: float = CAP_MB) -> float:
    """The most the probe maps: CAP_MB, less where the machine has less than that to spare."""
    return max(float(CHUNK_MB), min(cap_mb, available_mb - SPARE_MB))


def available_mb() -> float:
    """MemAvailable of /proc/meminfo, MB (the physical memory where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20


def measure_fresh_memory(cap_mb: float | None = None) -> FreshMemory:
    """Run the probe in a child (its blocks go back with it) up to `cap_mb` (probe_cap_mb of
    what is available where None)."""
    most = probe_cap_mb(available_mb()) if cap_mb is None else cap_mb
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(CHUNK_MB), str(int(most)), repr(JUMP_RATIO), str(RUN)],
        capture_output=True,
        text=True,
        timeout=600.0,
        check=True,
        preexec_fn=lifeline.die_with_parent(),  # noqa: PLW1509
    )
    return fresh_memory_figures(json.loads(out.stdout.strip().splitlines()[-1]))
