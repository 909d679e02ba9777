"""The report's CPU section: each phase's core-seconds over every worker's links, and their
floor on the training wall over the machine's cores."""

from __future__ import annotations

import pytest

from emulator.report_cpu import cpu_by_phase, cpu_lines, cpu_section


def _link(init: float, setup: float, train: float, kernel: float = 0.0) -> dict:
    timings = {"init_cpu_s": init, "setup_cpu_s": setup, "train_cpu_s": train,
               "train_system_cpu_s": kernel}  # fmt: skip
    return {"timings": timings}


def test_phases_sum_over_workers_and_links_and_floor_the_wall() -> None:
    cold, warm = _link(1.25, 0.25, 2.0, kernel=1.0), _link(0.0, 0.05, 3.0)
    links = [[cold, warm], [cold, warm]]
    assert cpu_by_phase(links) == pytest.approx(
        {"init": 2.5, "setup": 0.6, "train": 10.0, "train_kernel": 2.0}
    )
    section = cpu_section(links, cores=2.0, train_wall_s=7.5)
    assert section is not None
    assert section["floor_s"] == pytest.approx(13.1 / 2)
    assert cpu_lines(section) == [
        "CPU the workers asked for: init 2.5, setup 0.6, train 10.0 (in the kernel 2.0) core-s; "
        "over 2 cores at least 6.5 s of the training's 7.5 s"
    ]


def test_links_without_cpu_timings_give_no_section() -> None:
    assert cpu_section([[{"timings": {"compute_s": 1.0}}]], 2.0, 3.0) is None
    assert cpu_lines(None) == []
