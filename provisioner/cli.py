"""`python -m provisioner plan|frontier|calibrate`: plan a job from a profile and print or chart
it, or refit a profile from a finished run's report.json (provisioner/calibrate.py).

Exit codes: 0 plan found, 2 bad input (one line on stderr), 3 infeasible (one line on stderr),
1 the chart could not be written (e.g. a full disk; one line naming the path, no partial file).
matplotlib is imported inside the frontier command only, so the library stays pure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from functions.oneline import OneLineParser
from provisioner.calibrate import Calibration, calibrate, is_aws_report, report_of_aws_run
from provisioner.catalog import Catalog, load_catalog, read_data_json
from provisioner.envelope import CEILING_FACTOR, MAX_CEILING_FACTOR
from provisioner.files import write_text_atomically
from provisioner.local_ceiling import parse_ceiling_mb, with_memory_ceiling
from provisioner.parse import (
    parse_duration_s,
    parse_iteration_cap,
    parse_job_name,
    parse_slack,
    parse_usd,
)
from provisioner.plan import Goal, load_plan
from provisioner.planner import (
    ARCH_CHOICES,
    Infeasible,
    Limits,
    RunRules,
    emulator_margin_s,
    run_catalog,
)
from provisioner.profile import PROFILE_DIR, load_profile, profile_from_dict
from provisioner.replan_attach import DEFAULT_REPLAN, REPLAN_CHOICES, plan_with_replan
from provisioner.space import SYNC_CHOICES
from provisioner.summary import render_alternatives, render_plan, write_frontier_png

EXIT_OK, EXIT_WRITE_FAILED, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 1, 2, 3


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _iteration_cap(text: str) -> int:
    try:
        return parse_iteration_cap(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _job_name(text: str) -> str:
    try:
        return parse_job_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _output_file(text: str, suffix: str, example: str) -> str:
    """A `suffix` path whose folder exists and is writable (checked before any work is done)."""
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text) or not text.lower().endswith(suffix):
        raise argparse.ArgumentTypeError(f"{text!r} is not a {suffix} file path, e.g. {example}")
    if not os.path.isdir(folder):
        problem = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r}: folder {folder!r} {problem}")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: folder {folder!r} is not writable")
    return text


def png_file(text: str) -> str:
    return _output_file(text, ".png", "frontier.png")


def json_file(text: str) -> str:
    return _output_file(text, ".json", "plan.json")


def _calibrate_parser(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="refit a profile from a finished run's report.json")
    p.add_argument("report", help="runs/<job>/report.json, or an AWS run's report.json")
    p.add_argument("--plan", help="an AWS run's report: the cdk.out/plan.json of the deploy "
                   "that ran it (the report holds the workers' links, not the plan)")  # fmt: skip
    p.add_argument("--profile", help="profile name or path (default: the report's workload)")
    p.add_argument(
        "--out", type=json_file, help="refitted profile (default: <profile>.calibrated.json "
        "beside the report; give profiles/<name>.json to update the committed one)"
    )  # fmt: skip
    p.add_argument(
        "--catalog-out", type=json_file,
        help="suggested catalog override (default: catalog-override.json beside the report)",
    )  # fmt: skip
    p.add_argument("--catalog", help="catalog whose worker<->PS round trip is taken out of the "
                   "bandwidth (default: none, the bandwidth includes round trips)")  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m provisioner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, text in (
        ("plan", "print the cheapest plan for a goal"),
        ("frontier", "write the time-cost Pareto frontier chart"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--workload", required=True, help="profile name or path to a .json")
        p.add_argument("--deadline", help="e.g. 2h, 90m, 1h30m, 5400s, 5400")
        p.add_argument("--budget", help="e.g. 5, $5, 5.00")
        p.add_argument(
            "--slack",
            default=None,
            help="share of the deadline kept in reserve beyond the 90%% interval's upper end, "
            "which plans meet the deadline against: 10%% (default: the catalog's "
            "default_slack if it has one, else 0)",
        )
        p.add_argument("--catalog", default="lambda-2025", help="catalog name or path")
        p.add_argument("--max-memory-mb", type=_positive_int)
        p.add_argument("--max-concurrency", type=_positive_int)
        p.add_argument("--arch", default="any", choices=ARCH_CHOICES)
        p.add_argument("--ps-types", help="comma-separated EC2 types, e.g. c5.large,c5n.xlarge")
        p.add_argument(
            "--sync",
            default="auto",
            choices=SYNC_CHOICES,
            help="gradient exchange: ps (EC2 parameter servers), s3 (through S3, k reducers) or "
            "auto (the better for the goal; the default)",
        )
        p.add_argument("--reserve-concurrency", action="store_true")
        p.add_argument("--job", default="job", type=_job_name, help="job name in the plan")
        p.add_argument("--json", action="store_true", help="print the plan.json document")
        # The rules the emulator will enforce, so a plan for a local run is made under them.
        p.add_argument(
            "--invocation-limit",
            help="plan for invocations this long (the emulator's --invocation-limit, e.g. 8s; "
            "the margin is the emulator's: a quarter of it, at most the catalog's)",
        )
        p.add_argument(
            "--iterations-per-invocation",
            type=_iteration_cap,
            default=0,
            help="plan for invocations that also end after this many iterations (0: no cap)",
        )
        p.add_argument(
            "--memory-ceiling",
            help="the local machine's catalog only: the most MB one function may hold (default: "
            "the catalog's memory_ceiling_mb); a model above it is cut into pipeline stages",
        )
        p.add_argument(
            "--replan",
            default=DEFAULT_REPLAN,
            choices=REPLAN_CHOICES,
            help="re-plan during the run when its pace falls behind the deadline: on (the "
            "default; a deadline goal's one-stage plan, its links cut for the pace checks), off, "
            "or scale-down (also to a cheaper plan when well ahead)",
        )
        p.add_argument(
            "--replan-ceiling",
            type=int,
            default=CEILING_FACTOR,
            help="a re-plan may take up to this many times the plan's workers and memory (default "
            f"{CEILING_FACTOR}, at most {MAX_CEILING_FACTOR}); the worst case grows with it",
        )
        p.add_argument("--out", type=json_file, help="also write the plan.json document here")
        if name == "frontier":
            p.add_argument("--png", required=True, type=png_file, help="output PNG path")
    _calibrate_parser(sub)
    return parser


def read_report(path: str) -> Any:
    """The parsed report.json at `path`; an unreadable or non-JSON file is one ValueError line."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"report {path!r} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"report {path!r} is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"report {path!r} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None


def report_date(path: str) -> str:
    """The run's date: the report is written once, when the run ends (UTC)."""
    return dt.datetime.fromtimestamp(os.stat(path).st_mtime, dt.UTC).date().isoformat()


def report_profile(report: Any, path: str) -> str:
    """The profile a report is a run of: the one it names, else the only one of its model and
    dataset in profiles/ (a run report names the model and dataset, not always the profile),
    the one without blocks where the others are its copies with blocks (digits-mlp-blocks:
    the same whole-model figures, the model's cut added)."""
    plan = report.get("plan") if isinstance(report, dict) else None
    if not isinstance(plan, dict):
        return "?"  # calibrate() names what is wrong with such a report
    if isinstance(plan.get("workload"), str):
        return str(plan["workload"])
    model, dataset = plan.get("model"), plan.get("dataset")
    matches, plain = [], []
    for candidate in sorted(PROFILE_DIR.glob("*.json")):
        try:
            doc = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a profile that cannot be read is no candidate; --profile names it
        if isinstance(doc, dict) and (doc.get("model"), doc.get("dataset")) == (model, dataset):
            matches.append(candidate.stem)
            plain += [] if "blocks" in doc else [candidate.stem]
    if len(matches) > 1 and len(plain) == 1:
        return plain[0]
    if len(matches) != 1:
        found = ", ".join(matches) or "none"
        raise ValueError(
            f"report {path!r} is a run of {model} on {dataset} and names no profile "
            f"(profiles of it: {found}): give --profile"
        )
    return matches[0]


def _calibration(args: argparse.Namespace) -> tuple[Calibration, str, str]:
    """(calibration, profile path, override path) of `calibrate`, everything checked first."""
    report = read_report(args.report)
    if is_aws_report(report):
        if args.plan is None:
            raise ValueError(
                f"report {args.report!r} is an AWS run's report (the workers' links, no plan): "
                "give --plan, the cdk.out/plan.json of the deploy that ran it"
            )
        report = report_of_aws_run(report, load_plan(Path(args.plan)), args.report)
    name = args.profile or report_profile(report, args.report)
    if name == "?":
        profile_doc: dict[str, Any] = {}
    else:
        _, profile_doc = read_data_json(name, PROFILE_DIR, "profile")
        profile_from_dict(profile_doc)  # a bad profile fails here, naming its field
    rtt_s = 0.0 if args.catalog is None else load_catalog(args.catalog).function_ps_rtt_s
    result = calibrate(profile_doc, report, args.report, report_date(args.report), rtt_s)
    folder = os.path.dirname(os.path.abspath(args.report))
    out = args.out or os.path.join(folder, f"{result.profile['name']}.calibrated.json")
    override = args.catalog_out or os.path.join(folder, "catalog-override.json")
    if os.path.abspath(args.report) in {os.path.abspath(out), os.path.abspath(override)}:
        raise ValueError(f"output {args.report!r} is the report itself: give another --out")
    return result, out, override


def run_calibrate(args: argparse.Namespace) -> int:
    """`calibrate`: write the refitted profile and the catalog override, print what changed."""
    try:
        result, out, override = _calibration(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    outputs = [(out, result.profile)]
    if result.catalog_override:
        outputs.append((override, result.catalog_override))
    for path, doc in outputs:
        try:
            write_text_atomically(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            print(f"error: cannot write {path!r}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE_FAILED
    print(f"calibrated {result.profile['name']} from {args.report}")
    print("\n".join(f"  {line}" for line in result.changes))
    print(f"profile written to {out}")
    if result.catalog_override:
        print(f"catalog override written to {override}")
    return EXIT_OK


def run_rules_catalog(catalog: Catalog, args: argparse.Namespace) -> Catalog:
    """The catalog under the emulator's rules when --invocation-limit or a cap is given."""
    if args.invocation_limit is None and not args.iterations_per_invocation:
        return catalog
    limit_s = float(catalog.invocation_timeout_s)
    if args.invocation_limit is not None:
        try:
            limit_s = parse_duration_s(args.invocation_limit)
        except ValueError as exc:
            raise ValueError(f"--invocation-limit: {exc}") from None
        if limit_s > catalog.invocation_timeout_s:
            raise ValueError(
                f"--invocation-limit {args.invocation_limit!r} exceeds catalog {catalog.name}'s "
                f"{catalog.invocation_timeout_s} s limit"
            )
    rules = RunRules(
        invocation_limit_s=limit_s,
        safety_margin_s=emulator_margin_s(limit_s, catalog),
        max_iterations_per_invocation=args.iterations_per_invocation,
    )
    return run_catalog(catalog, rules)


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "calibrate":
        return run_calibrate(args)
    try:
        if args.deadline is None and args.budget is None:
            raise ValueError("give --deadline (e.g. 2h) or --budget (e.g. 5) or both")
        goal = Goal(
            deadline_s=None if args.deadline is None else parse_duration_s(args.deadline),
            budget_usd=None if args.budget is None else parse_usd(args.budget),
            slack=None if args.slack is None else parse_slack(args.slack),
        )
        ps_types = None
        if args.ps_types is not None:  # `--ps-types ''` names none: refused with the others
            ps_types = tuple(t.strip() for t in args.ps_types.split(",") if t.strip())
        limits = Limits(
            max_memory_mb=args.max_memory_mb,
            max_concurrency=args.max_concurrency,
            arch=args.arch,
            ps_types=ps_types,
            reserve_concurrency=args.reserve_concurrency,
            sync=args.sync,
        )
        profile = load_profile(args.workload)
        catalog = run_rules_catalog(load_catalog(args.catalog), args)
        if args.memory_ceiling is not None:
            catalog = with_memory_ceiling(catalog, parse_ceiling_mb(args.memory_ceiling))
        result = plan_with_replan(
            profile,
            catalog,
            goal,
            limits,
            args.job,
            replan=args.replan,
            ceiling=args.replan_ceiling,
            frontier_points=12 if args.command == "frontier" or args.json else 0,
        )
    except Infeasible as exc:
        print(f"infeasible: {exc}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out:
        try:
            write_text_atomically(args.out, result.to_json())
        except OSError as exc:
            print(f"error: cannot write {args.out!r}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE_FAILED
    if args.json:
        sys.stdout.write(result.to_json())
    else:
        print(render_plan(result.plan))
        print(render_alternatives(result))
    if args.command == "frontier":
        try:
            write_frontier_png(result, args.png)
        except OSError as exc:
            print(f"error: cannot write {args.png!r}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_WRITE_FAILED
        if not args.json:
            print(f"frontier: {len(result.frontier)} points written to {args.png}")
    return EXIT_OK


def main() -> None:
    try:
        code = run()
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    raise SystemExit(code)
