"""`python -m emulator cdk.out/plan.json [--invocation-limit 60s] [--cpu-scale auto] [--out DIR]
[--no-replan]`.

Bad input gets one line naming the bad value and what is accepted, and exit code 2, before any
server starts or any file is touched (a run folder another live run holds too: the one line
names its pid); a run that fails (a full disk included) gets one line saying
what failed and exit code 1; Ctrl-C or SIGTERM stop every process of the run, leave report.json
with `status: interrupted`, and exit with 128 + the signal number; no traceback in any case.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from pathlib import Path

from emulator.cpu import check_cpu_scale, parse_cpu_scale
from emulator.deadline_scale import PREFIX, parse_ratio, scale_for_deadline
from emulator.naming import run_dir
from emulator.options import REPO_ROOT, Options
from emulator.orchestrator import run
from emulator.procs import Interrupted
from emulator.records import EmulatorError, check_memory_ceiling
from emulator.run_lock import RunFolderBusy
from provisioner.cli import OneLineParser
from provisioner.local_ceiling import parse_ceiling_mb
from provisioner.parse import parse_iteration_cap
from provisioner.plan import load_plan
from provisioner.profile import load_profile

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


def parse_iterations_per_invocation(value: str) -> int:
    """`--iterations-per-invocation`: a whole number from 0 (only the time limit ends one)."""
    try:
        return parse_iteration_cap(value)
    except ValueError as err:
        raise ValueError(f"bad --iterations-per-invocation {err}") from None


def parse_attempts(value: str) -> int:
    """`--max-attempts`: a whole number of tries, at least 1."""
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"bad --max-attempts {value!r}: expected a whole number, 1 or more")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
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
        help="local cores per Lambda vCPU, 'auto' to fit the machine, or for-deadline:R, the "
        "scale at which the plan's local prediction is R × its deadline (1.33: a third over)",
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
        default="3",
        help="tries per invocation before the run fails (default 3)",
    )
    parser.add_argument(
        "--cold-starts",
        action="store_true",
        help="start every worker invocation in a fresh environment (default: "
        "reuse the worker's warm environment, as Lambda usually does)",
    )
    parser.add_argument(
        "--iterations-per-invocation",
        default="0",
        help="end each worker invocation after this many iterations as well (re-invocation at "
        "a chosen iteration on any machine; default 0: only the invocation limit)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--no-replan",
        action="store_true",
        help="run a plan that re-plans as it is (its envelope unused): no pace checks",
    )
    parser.add_argument(
        "--memory-ceiling",
        help="the most MB one function may hold here (python -m provisioner plan "
        "--memory-ceiling): a plan with a function above it is refused",
    )
    parser.add_argument(
        "--workload",
        help="the plan's profile, a name in profiles/ or a path (default: the plan's workload "
        "name); the report predicts from it",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        limit_s = parse_limit_s(args.invocation_limit)
        for_deadline = args.cpu_scale.startswith(PREFIX)
        ratio = parse_ratio(args.cpu_scale) if for_deadline else None
        scale = None if args.cpu_scale == "auto" or for_deadline else parse_cpu_scale(
            args.cpu_scale)  # fmt: skip
        per_invocation = parse_iterations_per_invocation(args.iterations_per_invocation)
        max_attempts = parse_attempts(args.max_attempts)
        plan = load_plan(args.plan)
        if args.workload is not None:  # the report predicts from it: refused now, not after
            load_profile(args.workload)
        if ratio is not None:
            scale = scale_for_deadline(plan, ratio, workload=args.workload, limit_s=limit_s,
                                       iterations_per_invocation=per_invocation)  # fmt: skip
        if scale is not None:  # every memory a link may run at gets a quota the kernel holds
            variants = () if plan.replan is None or args.no_replan else (
                plan.replan.envelope.memory_variants_mb)  # fmt: skip
            check_cpu_scale(args.cpu_scale, scale, min((plan.memory_mb, *variants)))
        ceiling_mb = None
        if args.memory_ceiling is not None:
            ceiling_mb = parse_ceiling_mb(args.memory_ceiling)
            check_memory_ceiling(plan, ceiling_mb)
        out_dir = run_dir(plan.job, args.out, REPO_ROOT / "runs")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    options = Options(
        invocation_limit_s=limit_s,
        cpu_scale=scale,
        out_dir=out_dir,
        s3=args.s3,
        max_attempts=max_attempts,
        quiet=args.quiet,
        iterations_per_invocation=per_invocation,
        workload=args.workload,
        memory_ceiling_mb=ceiling_mb,
        replan=not args.no_replan,
    )
    try:
        run(plan, options)
    except RunFolderBusy as err:  # refused before anything in the folder was touched
        print(f"error: {err}", file=sys.stderr)
        return 2
    except EmulatorError as err:
        print(f"emulator: run failed: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # e.g. ENOSPC writing logs or the report
        print(
            f"emulator: run failed: cannot write {err.filename or 'a file'}: {err.strerror or err}",
            file=sys.stderr,
        )
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
