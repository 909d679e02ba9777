"""`python -m emulator cdk.out/plan.json [--invocation-limit 60s] [--cpu-scale auto] [--out DIR]`.

Bad input gets one line naming the bad value and what is accepted, and exit code 2; a run that
fails gets one line saying what failed and exit code 1; Ctrl-C or SIGTERM stop every process
of the run, leave report.json with `status: interrupted`, and exit with 128 + the signal number;
no traceback in any case.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from pathlib import Path

from emulator.cpu import parse_cpu_scale
from emulator.orchestrator import EmulatorError, Options, run
from emulator.procs import Interrupted
from provisioner.plan import Plan

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 1.0}
MIN_INVOCATION_LIMIT_S = 3.0  # the handler needs about 1 s to build, load and sync
MAX_INVOCATION_LIMIT_S = 900.0  # Lambda's hard limit


def parse_limit_s(value: str) -> float:
    """`--invocation-limit`: '60s', '2m', '90' (seconds); between 3 s and Lambda's 900 s."""
    match = _DURATION.match(value)
    if not match:
        raise ValueError(
            f"bad --invocation-limit {value!r}: expected a duration such as 60s, 2m or 90"
        )
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not MIN_INVOCATION_LIMIT_S <= seconds <= MAX_INVOCATION_LIMIT_S:
        raise ValueError(
            f"bad --invocation-limit {value!r}: expected between {MIN_INVOCATION_LIMIT_S:.0f}s "
            f"and {MAX_INVOCATION_LIMIT_S:.0f}s (Lambda's limit)"
        )
    return seconds


def load_plan(path: Path) -> Plan:
    """The Plan in a cdk.out/plan.json (or a bare Plan JSON); ValueError with one line if bad."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(
            f"cannot read plan {str(path)!r}: {err.strerror}; run `npx cdk synth` first"
        ) from None
    try:
        return Plan.from_json(text)
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(
            f"{str(path)!r} is not a plan.json written by app.py ({type(err).__name__}: {err})"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m emulator",
        description="Run a synthesized plan locally: S3 server, PS processes, Lambda workers.",
    )
    parser.add_argument("plan", type=Path, help="cdk.out/plan.json")
    parser.add_argument(
        "--invocation-limit",
        default="60s",
        help="time limit of one worker invocation (default 60s; AWS: 900s)",
    )
    parser.add_argument(
        "--cpu-scale",
        default="auto",
        help="local cores per Lambda vCPU, or 'auto' to fit the machine",
    )
    parser.add_argument("--out", type=Path, default=None, help="report directory (runs/<job>)")
    parser.add_argument(
        "--s3",
        choices=("weed", "moto"),
        default="weed",
        help="local S3 server: weed (SeaweedFS, default) or moto (fallback)",
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        help="tries per invocation before the run fails (default 3)",
    )
    parser.add_argument(
        "--cold-starts",
        action="store_true",
        help="start every worker invocation in a fresh environment (default: "
        "reuse the worker's warm environment, as Lambda usually does)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        limit_s = parse_limit_s(args.invocation_limit)
        scale = None if args.cpu_scale == "auto" else parse_cpu_scale(args.cpu_scale)
        if args.max_attempts < 1:
            raise ValueError(f"bad --max-attempts {args.max_attempts}: expected 1 or more")
        plan = load_plan(args.plan)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    options = Options(
        invocation_limit_s=limit_s,
        cpu_scale=scale,
        out_dir=args.out,
        s3=args.s3,
        max_attempts=args.max_attempts,
        quiet=args.quiet,
    )
    try:
        run(plan, options)
    except EmulatorError as err:
        print(f"emulator: run failed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        print(
            f"emulator: interrupted by {signal.Signals(signum).name}; every process it started "
            "has been stopped; report.json says how far it got",
            file=sys.stderr,
        )
        return 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
