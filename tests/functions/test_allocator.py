"""functions.allocator: a loop that frees what it allocated maps no fresh memory next time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from functions import allocator

REPO = Path(__file__).resolve().parents[2]

# A step's shape in small: blocks under the mmap threshold, all freed at the step's end. Before
# the steps, one 200 KB block is freed, which sets glibc's dynamic trim threshold to 400 KB, so
# each step's 9.6 MB is handed back to the kernel and faulted in again by the next one (the
# history-dependent behaviour the emulator's worker had: 6,000 faults per CNN step).
_STEPS = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from functions.allocator import keep_freed_memory
import numpy as np
said = keep_freed_memory()
np.ones(200 * 1024 // 8).sum()
faults = []
for step in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [np.ones(150 * 1024 // 8) for _ in range(64)]
    del blocks
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"said": said, "faults": faults}))
"""


def _steps(**env: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _STEPS, str(REPO)], check=True, text=True,
                         capture_output=True, env={**os.environ, **env})  # fmt: skip
    return dict(json.loads(out.stdout))


def test_freed_memory_is_reused_instead_of_faulted_in_every_step() -> None:
    kept, default = _steps(), _steps(**{allocator.OFF_SWITCH: "1"})
    assert str(kept["said"]).startswith("malloc: mmap threshold 32 MiB")
    assert str(default["said"]).startswith("malloc defaults")
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    step_pages = 64 * 150 // page_kb
    # after the first step (which maps the memory once) both ways differ by the whole step
    assert max(kept["faults"][1:]) < step_pages // 10  # type: ignore[index]
    assert min(default["faults"][1:]) > step_pages // 2  # type: ignore[index]


def test_the_worker_applies_it_when_its_module_loads() -> None:
    from functions import worker

    assert worker.ALLOCATOR.startswith("malloc")
