"""Each worker's CPU group at the memory its link runs at.

A plan that runs as it is holds every worker to one share, made before the run starts
(`worker-<label>`). A plan that re-plans may run a link at another memory variant (its event's
`memory_mb`: another function, `WorkerFunctionMb<mb>`, with its own share) and on ranks the
plan does not use: those groups (`worker-<label>-mb<mb>`, or `worker-<label>` at the plan's
memory) are made on first use, each held to its memory's Lambda share × the run's cpu scale.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from emulator import cpu


def group_name(label: str, memory_mb: int, plan_memory_mb: int) -> str:
    """The CPU group of worker `label` at `memory_mb`: today's name at the plan's memory."""
    base = f"worker-{label}"
    return base if memory_mb == plan_memory_mb else f"{base}-mb{memory_mb}"


class Placements:
    """The run's worker groups by (label, memory), made on first use (thread-safe)."""

    def __init__(self, place: Callable[[str, float], cpu.Placement], cpu_scale: float) -> None:
        self._place, self.cpu_scale = place, cpu_scale
        self._made: dict[str, cpu.Placement] = {}
        self._lock = threading.Lock()

    def get(self, label: str, memory_mb: int, plan_memory_mb: int) -> cpu.Placement:
        """The group of worker `label` for a link at `memory_mb` (made now if it is new)."""
        name = group_name(label, memory_mb, plan_memory_mb)
        with self._lock:
            if name not in self._made:
                self._made[name] = self._place(name, cpu.local_cores(memory_mb, self.cpu_scale))
            return self._made[name]

    def names(self) -> list[str]:
        """Every group made so far, in the order they were made."""
        with self._lock:
            return list(self._made)
