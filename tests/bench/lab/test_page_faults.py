"""bench.lab.page_faults, so it cannot rot: two children fault in a small block at once and each
reports a kernel time per fault that is a number (what holds on any machine: not how much)."""

from __future__ import annotations

import math

import pytest

import bench.lab.page_faults as page_faults


def test_a_round_of_two_children_reports_kernel_seconds_per_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(page_faults, "MEGABYTES", 8)
    per_fault_s = page_faults.one_round(2)
    assert math.isfinite(per_fault_s) and per_fault_s >= 0.0
