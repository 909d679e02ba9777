"""Stand-in handler: the CPU cgroup its module was imported in, and the one it ran in."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def cpu_cgroup() -> str:
    """The v1 cpu hierarchy's group if cpu is bound there, else the unified (v2) group."""
    unified = ""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if hierarchy == "0":
            unified = path
    return unified


IMPORTED_IN = cpu_cgroup()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"imported_in": IMPORTED_IN, "invoked_in": cpu_cgroup()}
