"""The command's options, checked once (every bad one a single line), and what each mode does:
measure a grid, re-score an earlier one, or render a results file's table again."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.predict.cases import FIXED, PLANNED, Case
from bench.predict.heldout import WORKLOADS, Draws
from bench.predict.heldout_results import PROTOCOL, render_any, write_heldout
from bench.predict.rescore import rescore
from bench.predict.rounds import Bench, Grid, Instruments, Repeats
from bench.predict.rows import median_row
from emulator import cpu
from functions.oneline import OneLineParser


@dataclass(frozen=True)
class Lab:
    """Where a run writes and what it measures with (bench.predict hands in its own names)."""

    results: Path
    quick: tuple[Case, ...]
    instruments: Instruments
    load_catalog: Callable[[str], Any]
    measure_platform: Callable[[list[str], Path], dict[str, Path]]
    keep_platform: Callable[[list[str], Path], dict[str, Path]]
    weed_server: Callable[[], AbstractContextManager[Any]]
    write_results: Callable[[list[dict[str, Any]], dict[str, Any], str], str]
    # the held-out protocol's: its draw (count, seed, the local catalog's file), this host as
    # the results name it, and where its results go (the host's folder)
    draw: Callable[[int, int, Path], Draws]
    host: Callable[[], dict[str, Any]]
    write_heldout: Callable[[list[dict[str, Any]], dict[str, Any], Path], str]


DEFAULT_REPEATS = 3
HELDOUT_REPEATS = 2


def parser() -> argparse.ArgumentParser:
    """Every option of `python -m bench.predict`."""
    p = OneLineParser(prog="python -m bench.predict")
    p.add_argument("--quick", action="store_true", help="three rows (a smoke run)")
    p.add_argument("--only", help="run only this workload's rows")
    p.add_argument(
        "--planned", action="store_true", help="run only the rows the planner sizes for a deadline"
    )
    p.add_argument(
        "--repeats",
        type=int,
        help=f"runs per case; each term's median counts (default {DEFAULT_REPEATS}, "
        f"{HELDOUT_REPEATS} with --held-out)",
    )
    p.add_argument(
        "--held-out",
        type=int,
        metavar="N",
        help="N configurations drawn at random from a wide space instead of the fixed grid; "
        "results under bench/results/hosts/<host-id>/predict-heldout.*",
    )
    p.add_argument(
        "--seed", type=int, help="with --held-out: the draw's seed (default: a fresh one, recorded)"
    )
    p.add_argument(
        "--precision",
        type=float,
        metavar="P",
        help="after the repeats, run again round the cases whose median total may still stray "
        "more than P (median_error, from the measured totals alone), up to --max-repeats runs "
        "a case, for at most --extra-minutes",
    )
    p.add_argument("--max-repeats", type=int, default=12, help="with --precision: most runs a case")
    p.add_argument(
        "--extra-minutes",
        type=float,
        default=30.0,
        help="with --precision: no extra round starts a workload's cases after this long",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="take catalog/local.json and profiles/ as they are (no calibration or profiling)",
    )
    p.add_argument(
        "--no-anchor",
        action="store_true",
        help="predict every round from the profiles measured at the start (no re-anchoring)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--rescore",
        action="store_true",
        help="measure nothing: predict an earlier run's rows again with the current model",
    )
    mode.add_argument(
        "--rescore-held-out",
        type=Path,
        metavar="HELDOUT_JSON",
        help="measure nothing: predict a held-out run's rows (bench/results/hosts/<host-id>/"
        "predict-heldout.json) again with the current model; writes predict-heldout-rescored.* "
        "beside it",
    )
    mode.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS_JSON",
        help="measure nothing: write the table (.md) of a results file (.json) again beside it",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="with --rescore: a catalog figure changed for the re-scoring, a number or points "
        "[[x, y], ...] (repeatable)",
    )
    p.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="WORKLOAD=PATH",
        help="with --rescore: this profile in place of the run's start profile of the workload, "
        "anchored by the readings the run kept (a re-profile checked on measurements already "
        "taken; repeatable)",
    )
    p.add_argument(
        "--anchor-weight",
        type=float,
        metavar="W",
        help="with --rescore: build each run's anchored profile again, moved W of the way "
        "(in log speed) to its anchor's reading (0: the profile as measured, 1: the reading)",
    )
    return p


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """The options, or a ValueError naming the first bad one in one line."""
    checked_heldout(args)
    if args.repeats is None:
        args.repeats = DEFAULT_REPEATS if args.held_out is None else HELDOUT_REPEATS
    if args.repeats < 1:
        raise ValueError(f"bad --repeats {args.repeats}: expected a whole number ≥ 1")
    if args.precision is not None and not 0.0 < args.precision < 1.0:
        raise ValueError(
            f"bad --precision {args.precision:g}: expected a fraction above 0, below 1"
        )
    if args.max_repeats < args.repeats:
        raise ValueError(
            f"bad --max-repeats {args.max_repeats}: expected at least --repeats ({args.repeats})"
        )
    if args.extra_minutes < 0:
        raise ValueError(f"bad --extra-minutes {args.extra_minutes:g}: expected minutes ≥ 0")
    rescore_only = (
        ("--set", repr(args.set[0]) if args.set else None),
        ("--profile", repr(args.profile[0]) if args.profile else None),
        ("--anchor-weight", None if args.anchor_weight is None else f"{args.anchor_weight:g}"),
    )
    given = [(flag, value) for flag, value in rescore_only if value is not None]
    # a held-out run's re-scoring takes the anchor weight (its anchors built again) and
    # catalog what-ifs (--set), not another start profile
    heldout_ok = args.rescore_held_out is not None and all(
        flag in ("--anchor-weight", "--set") for flag, _ in given
    )
    if given and not args.rescore and not heldout_ok:
        raise ValueError(f"bad {given[0][0]} {given[0][1]}: only a re-scoring (--rescore) takes it")
    if args.anchor_weight is not None and not 0.0 <= args.anchor_weight <= 1.0:
        raise ValueError(
            f"bad --anchor-weight {args.anchor_weight:g}: expected a number from 0 to 1"
        )
    return args


def checked_heldout(args: argparse.Namespace) -> None:
    """--held-out and --seed: a count ≥ 1, a seed ≥ 0, and no option of the fixed grid."""
    if args.seed is not None and args.held_out is None:
        raise ValueError(f"bad --seed {args.seed}: only a held-out run (--held-out N) takes it")
    if args.held_out is None:
        return
    if args.held_out < 1:
        raise ValueError(f"bad --held-out {args.held_out}: expected a whole number ≥ 1")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"bad --seed {args.seed}: expected a whole number ≥ 0")
    grid_only = (
        ("--quick", args.quick),
        ("--planned", args.planned),
        ("--only", args.only),
        ("--rescore", args.rescore),
        ("--rescore-held-out", args.rescore_held_out),
        ("--render", args.render),
    )
    for flag, value in grid_only:
        if value:
            raise ValueError(
                f"bad --held-out {args.held_out}: it draws its own configurations, so {flag} "
                "does not apply"
            )


def main(argv: list[str] | None, lab: Lab) -> int:
    """Parse and check the options, then render, re-score or measure as they ask."""
    args = checked(parser().parse_args(argv))
    command = "python -m bench.predict " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.render is not None:
        print(render_any(args.render))
        return 0
    if args.rescore_held_out is not None:
        print(rescore_heldout(args.rescore_held_out, command, args.anchor_weight, args.set))
        return 0
    repeats = Repeats(args.repeats, args.precision, args.max_repeats, args.extra_minutes)
    if args.held_out is not None:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        print(measure_heldout(lab, args.held_out, seed, command, repeats, reuse=args.reuse,
                              anchored=not args.no_anchor))  # fmt: skip
        return 0
    cases: tuple[Case, ...] = lab.quick if args.quick else FIXED + PLANNED
    if args.planned:
        cases = tuple(c for c in cases if c.planned)
    if args.only:
        cases = tuple(c for c in cases if c.workload == args.only)
    name = (
        "predict"
        + ("-quick" if args.quick else "")
        + ("-planned" if args.planned else "")
        + (f"-{args.only}" if args.only else "")
    )
    if args.rescore:
        rows, meta = rescore(lab.results, name, command, args.set, args.anchor_weight, args.profile)
        print(lab.write_results(rows, meta, f"{name}-rescored"))
        return 0
    print(measure_grid(lab, cases, name, command, repeats, reuse=args.reuse,
                       anchored=not args.no_anchor))  # fmt: skip
    return 0


def rescore_heldout(
    source: Path,
    command: str,
    anchor_weight: float | None = None,
    settings: list[str] | None = None,
) -> str:
    """A held-out run's rows predicted again with the current model from the platform figures
    it kept, held to its measurements, written beside it as predict-heldout-rescored.*; with
    `anchor_weight`, each anchored profile built again from the readings it kept (so a change
    to how an anchor moves a profile is re-scored too); with `settings`, its catalogs changed
    (a figure the run's calibration did not read yet, asked as a what-if)."""
    if source.suffix != ".json" or not source.is_file():
        raise ValueError(
            f"bad --rescore-held-out {str(source)!r}: expected a held-out run's results file, "
            "bench/results/hosts/<host-id>/predict-heldout.json"
        )
    rows, meta = rescore(
        source.parent, source.stem, command, settings=settings, anchor_weight=anchor_weight
    )
    return write_heldout(rows, meta, source.parent, f"{source.stem}-rescored")


def measure_grid(
    lab: Lab,
    cases: tuple[Case, ...],
    name: str,
    command: str,
    repeats: Repeats,
    reuse: bool,
    anchored: bool,
) -> str:
    """Measure the platform (or keep it, `reuse`), run the cases round by round, and write the
    rows with how they were made under `name`; the table."""
    platform = lab.results / f"{name}-platform"
    profiles = prepare_platform(lab, sorted({c.workload for c in cases}), platform, reuse)
    rows, meta = run_rounds(lab, cases, profiles, platform, repeats, anchored)
    meta.update(platform=platform_text(lab, platform, reuse), command=command)
    return lab.write_results(rows, meta, name)


def measure_heldout(
    lab: Lab, count: int, seed: int, command: str, repeats: Repeats, reuse: bool, anchored: bool
) -> str:
    """The held-out protocol: measure the platform (or keep it), draw `count` configurations
    with `seed` for it, run them round by round as the grid's, and write the rows under this
    host's folder; the table."""
    host = lab.host()
    folder = lab.results / "hosts" / host["id"]
    platform = folder / "predict-heldout-platform"
    profiles = prepare_platform(lab, list(WORKLOADS), platform, reuse)
    draws = lab.draw(count, seed, platform / "local.json")
    rows, meta = run_rounds(lab, tuple(draws.cases), profiles, platform, repeats, anchored)
    meta.update(protocol=PROTOCOL, host=host, held_out=draws.record(), command=command,
                platform=platform_text(lab, platform, reuse))  # fmt: skip
    return lab.write_heldout(rows, meta, folder)


def prepare_platform(
    lab: Lab, workloads: list[str], platform: Path, reuse: bool
) -> dict[str, Path | None]:
    """The catalog and profiles a run measures (or takes as they are, `reuse`) and uses, copied
    to `platform` beside its results, where a re-scoring reads them; the profile per workload."""
    if reuse:
        lab.load_catalog("local")  # fail in one line before any server starts if not calibrated
        return dict(lab.keep_platform(workloads, platform))
    return dict(lab.measure_platform(workloads, platform))


def platform_text(lab: Lab, platform: Path, reuse: bool) -> str:
    """Where the run's platform figures came from, as its table says."""
    try:
        kept = f"bench/results/{platform.relative_to(lab.results)}/"
    except ValueError:
        kept = str(platform)
    if reuse:
        return f"catalog/local.json and profiles/ as they were (--reuse), kept in {kept}"
    return f"calibrated and profiled at the start of this run ({kept})"


def run_rounds(
    lab: Lab,
    cases: tuple[Case, ...],
    profiles: dict[str, Path | None],
    platform: Path,
    repeats: Repeats,
    anchored: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The cases run round by round on the platform prepared; their rows, and how they were
    made (the results' meta, less the command)."""
    catalog = lab.load_catalog("local")
    with tempfile.TemporaryDirectory() as tmp, lab.weed_server() as endpoint:
        bench = Bench(cases, profiles, catalog, platform, Path(tmp), endpoint, anchored,
                      lab.instruments)  # fmt: skip
        grid = Grid(bench).run(repeats)
    runs = grid.runs()
    rows = [median_row(r) for r in runs]
    meta: dict[str, Any] = {
        "machine": cpu.this_machine(),
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "cpu_share": rows[0]["cpu_share"] if rows else "",
        "repeats": repeats.repeats,
        "anchors": grid.anchors(),
        "loop_anchors": grid.loop_anchors(),
    }
    if repeats.precision is not None:
        meta["precision"] = {
            "median_error": repeats.precision,
            "max_repeats": repeats.cap,
            "extra_minutes": repeats.extra_minutes,
            "runs": [len(r) for r in runs],
        }
    return rows, meta
