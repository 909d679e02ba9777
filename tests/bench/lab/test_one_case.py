"""bench.lab.one_case's per-worker lines, from link results as a worker writes them."""

from __future__ import annotations

import json
from pathlib import Path

from bench.lab.one_case import worker_lines


def test_each_worker_s_first_link_is_read_by_phase(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    timings = {"init_cpu_s": 1.28, "setup_cpu_s": 0.29, "train_cpu_s": 1.7,
               "train_system_cpu_s": 1.1, "train_minor_faults": 155000,
               "compute_s": 6.4}  # fmt: skip
    (logs / "worker-3-link-0-try-1.result.json").write_text(json.dumps({"timings": timings}))
    (logs / "worker-3-link-1-try-1.result.json").write_text(json.dumps({"timings": {}}))
    assert worker_lines(tmp_path) == [
        "worker-3: init_cpu 1.28 setup_cpu 0.29 train_cpu 1.70 train_system_cpu 1.10 s; "
        "155000 faults; compute 6.40 s"
    ]
