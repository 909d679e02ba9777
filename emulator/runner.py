"""Run one emulated Lambda invocation in this process: event JSON in, result JSON out.

The orchestrator starts `python -m emulator.runner EVENT RESULT --limit-s S --memory-mb M` as a
child process (its own process group, inside its CPU group). This module imports the handler,
calls it with the event and a CountdownContext, and writes either the handler's return value or
a Lambda-style error object (`errorType`, `errorMessage`). The exit code says which.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from emulator.lambda_context import CountdownContext

DEFAULT_HANDLER = "functions.worker:handler"


def load_handler(spec: str) -> Any:
    """`module:function` → the callable (the Lambda image's CMD has the same shape)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"bad handler {spec!r}: expected 'module:function'")
    return getattr(importlib.import_module(module_name), attr)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temporary file so a reader never sees half a result."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def invoke(spec: str, event: dict[str, Any], context: CountdownContext) -> tuple[int, Any]:
    """Call the handler; (0, result) on success, (1, Lambda error object) on an exception.

    A dict result gets an `emulator_timings` member: the handler module's import time (a
    cold start's `import torch`) and the handler call's own duration.
    """
    try:
        import_start_s = time.monotonic()
        handler = load_handler(spec)
        call_start_s = time.monotonic()
        result = handler(event, context)
        call_end_s = time.monotonic()
        if isinstance(result, dict):
            result["emulator_timings"] = {
                "handler_import_s": call_start_s - import_start_s,
                "handler_call_s": call_end_s - call_start_s,
            }
        return 0, result
    except Exception as err:  # noqa: BLE001 - reported like Lambda reports an unhandled error
        return 1, {
            "errorType": type(err).__name__,
            "errorMessage": str(err),
            "stackTrace": traceback.format_exc().splitlines()[-20:],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.runner")
    parser.add_argument("event", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--limit-s", type=float, required=True)
    parser.add_argument("--memory-mb", type=int, default=128)
    parser.add_argument("--function-name", default="emulated-worker")
    parser.add_argument("--handler", default=DEFAULT_HANDLER)
    args = parser.parse_args(argv)
    # The clock starts before the handler module is imported, as Lambda's timeout does for a
    # cold start's init phase (close enough: the import is part of what a link costs).
    context = CountdownContext(
        limit_s=args.limit_s, function_name=args.function_name, memory_limit_in_mb=args.memory_mb
    )
    event = json.loads(args.event.read_text())
    code, result = invoke(args.handler, event, context)
    write_json_atomic(args.result, result)
    if code:
        print(f"{result['errorType']}: {result['errorMessage']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
