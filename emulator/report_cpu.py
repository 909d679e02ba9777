"""The CPU a local run's workers asked of the shared cores, by phase (a report section).

Each link records its process CPU before the handler (a cold link's imports), in the handler
before the loop (load, model build, PS sync) and in the loop (functions/worker.py Timings). Here
n workers share the machine's cores, so the run's training wall is at least the CPU they asked
for over those cores: the section sets that floor beside the measured wall, so a term that runs
long can be told apart from cores that were simply full. The PS shards' and S3 server's CPU are
not in it (no worker link records them), so the floor is a lower bound.
"""

from __future__ import annotations

from typing import Any

PHASES = (("init", "init_cpu_s"), ("setup", "setup_cpu_s"), ("train", "train_cpu_s"))
KERNEL = ("train_kernel", "train_system_cpu_s")  # the loop's CPU in the kernel, part of train


def cpu_by_phase(links_by_worker: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Core-seconds per phase, summed over every worker's links."""
    totals = dict.fromkeys((name for name, _ in (*PHASES, KERNEL)), 0.0)
    for links in links_by_worker:
        for link in links:
            timings = link.get("timings") or {}
            for name, key in (*PHASES, KERNEL):
                value = timings.get(key)
                if isinstance(value, int | float):
                    totals[name] += float(value)
    return totals


def cpu_section(
    links_by_worker: list[list[dict[str, Any]]], cores: float, train_wall_s: float
) -> dict[str, Any] | None:
    """report.json's `cpu`: core-seconds per phase, their total over `cores` (the floor on the
    training wall) and the wall; None where no link recorded its CPU."""
    phases = cpu_by_phase(links_by_worker)
    total = sum(phases[name] for name, _ in PHASES)
    if total <= 0 or cores <= 0:
        return None
    return {
        "core_s": {name: round(value, 3) for name, value in phases.items()},
        "cores": cores,
        "floor_s": round(total / cores, 3),
        "train_wall_s": round(train_wall_s, 3),
    }


def cpu_lines(section: dict[str, Any] | None) -> list[str]:
    """The section in one line of the text report (none without it)."""
    if not section:
        return []
    core_s = section["core_s"]
    parts = ", ".join(f"{name} {core_s[name]:.1f}" for name, _ in PHASES)
    parts += f" (in the kernel {core_s.get(KERNEL[0], 0.0):.1f})"
    return [
        f"CPU the workers asked for: {parts} core-s; over {section['cores']:g} cores at least "
        f"{section['floor_s']:.1f} s of the training's {section['train_wall_s']:.1f} s"
    ]
