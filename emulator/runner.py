"""An emulated Lambda execution environment: event JSON in, result JSON out.

`python -m emulator.runner EVENT RESULT --limit-s S` runs one invocation and exits (the exit code
says whether the handler raised). `python -m emulator.runner --serve` is a warm environment: it
reads one request per line on stdin (`{"event": path, "result": path, "limit_s": s}`) and serves
them in turn in the same process, so the handler module (and `import torch`) is loaded once, as
in a reused Lambda environment. Either way the handler is called with a CountdownContext and the
result file holds its return value or a Lambda-style error object (`errorType`, `errorMessage`),
written atomically.
"""

from __future__ import annotations

import argparse
import contextlib
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


def init_phase(handler: str, cpu_group_procs: Path | None) -> None:
    """Lambda's init phase: import the handler module, then enter the function's CPU group.

    Lambda runs a cold start's init (here: `import torch` and the worker module) with burst
    CPU, not at the memory's share (bitesizedserverless.com/bite/lambda-cold-start-bootstrap;
    AWS's Lambda Web Adapter docs: "up to 10 seconds ... with burst CPU"), so the import runs
    unthrottled and the quota starts with the first invocation. An import error is left for
    the invocation to report, as Lambda reports an init error on invoke.
    """
    with contextlib.suppress(Exception):  # reported by invoke(), which imports again
        load_handler(handler)
    if cpu_group_procs is not None:
        cpu_group_procs.write_text(str(os.getpid()))  # moves every thread of this process


def serve(
    handler: str, memory_mb: int, function_name: str, cpu_group_procs: Path | None = None
) -> int:
    """Serve requests from stdin until it closes (the orchestrator ends the environment)."""
    init_phase(handler, cpu_group_procs)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        # Lambda's clock starts when the invocation arrives, not when the environment started.
        context = CountdownContext(
            limit_s=float(request["limit_s"]),
            function_name=function_name,
            memory_limit_in_mb=memory_mb,
        )
        event = json.loads(Path(request["event"]).read_text())
        code, result = invoke(handler, event, context)
        if code:
            print(f"{result['errorType']}: {result['errorMessage']}", file=sys.stderr, flush=True)
        write_json_atomic(Path(request["result"]), result)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.runner")
    parser.add_argument("event", type=Path, nargs="?")
    parser.add_argument("result", type=Path, nargs="?")
    parser.add_argument("--serve", action="store_true", help="warm environment: requests on stdin")
    parser.add_argument("--limit-s", type=float, default=900.0)
    parser.add_argument("--memory-mb", type=int, default=128)
    parser.add_argument("--function-name", default="emulated-worker")
    parser.add_argument("--handler", default=DEFAULT_HANDLER)
    parser.add_argument(
        "--cpu-group-procs", type=Path, help="cgroup.procs file to enter after the init phase"
    )
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.handler, args.memory_mb, args.function_name, args.cpu_group_procs)
    if args.event is None or args.result is None:
        parser.error("EVENT and RESULT are required without --serve")
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
