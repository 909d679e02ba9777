"""A handler that does nothing, in a module that imports the worker handler's module.

`python -m emulator.calibrate` invokes it through the emulator's runner to time start-up: the
first invocation of a fresh environment pays what a worker's cold start pays (interpreter,
runner, `functions.worker` with torch), a second one in the same environment the warm path.
"""

from __future__ import annotations

from typing import Any

import functions.worker  # noqa: F401 - imported for its cost: the cold start being timed


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Return at once: the time an invocation takes is then all start-up and dispatch."""
    return {"ok": True}
