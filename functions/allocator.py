"""Freed memory stays in the worker's process, so a training step does not page-fault.

glibc's malloc serves a large block (over its mmap threshold) with a fresh mapping and hands it
back to the kernel when freed; the threshold moves with what the process freed before, so it
depends on the process's history. In the emulator's worker (a shard loaded from S3, then the
model built), the CNN's step then took about 6,000 minor page faults (24 MB of zeroed pages per
step), the profiler's child, with another history, none: its step was the faster one. Every
step's activations were being mapped, zero-filled and unmapped again.

Fixing the thresholds at start keeps the process's peak in the process (Lambda bills the
memory size whatever is resident) and makes the step's cost the same in the worker, the
profiler and on AWS, whatever ran before: bench/allocator.py measures both ways.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 2**20  # the most glibc accepts (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD_BYTES = 2**30  # freed memory at the heap's top stays unless over 1 GiB
OFF_SWITCH = "LAMBDA_DNN_MALLOC_DEFAULTS"  # "1": leave malloc as it is (bench/allocator.py)


def keep_freed_memory() -> str:
    """Fix glibc's thresholds for this process; says what was done (or why not)."""
    if os.environ.get(OFF_SWITCH) == "1":
        return f"malloc defaults ({OFF_SWITCH}=1)"
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return "malloc defaults (no glibc mallopt here)"
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        return "malloc defaults (mallopt refused the mmap threshold)"
    if mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) != 1:
        return "malloc: mmap threshold fixed; trim threshold refused"
    return "malloc: mmap threshold 32 MiB, trim threshold 1 GiB (fixed at start)"
