"""The local catalog's prediction interval and start-up cores fitted to this machine's runs.

`python -m bench.lab.catalog_from_runs --out catalog/local.json --interval-from RUNS...`
measures nothing: it sets the catalog's prediction_interval (the 5th and 95th percentiles of
measured/predicted total, bench/lab/interval.py) from finished runs' predictions and
measurements, and drops the default_slack policy it replaces; `--slack-from RUNS...` sets a
default_slack from them instead (bench/lab/slack.py, the older rule); `--init-cores-from
RUNS...` sets its start-up cores per n from their start-ups (bench/lab/init_cores.py). Several
may be given at once: every figure is written in one go, or none. RUNS are run reports,
folders of runs, or bench.predict results (bench/lab/finished_runs.py); every other figure
stays as `make calibrate` measured it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lab import init_cores as init_runs
from bench.lab import interval as interval_runs
from bench.lab import slack as slack_runs
from emulator import cpu
from emulator.calibrate import DEFAULT_OUT, check_out
from emulator.calibration.catalog import Provenance, figure, here_today, write_catalog
from emulator.calibration.runner_probe import single_init_cores


def read_catalog_to_update(out: Path, options: str) -> dict[str, Any]:
    """The catalog document at `out` that `options` rewrite. ValueError (one line) when it
    cannot be read."""
    try:
        doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"--out {str(out)!r} cannot be read ({type(err).__name__}): {options} updates a "
            "catalog `make calibrate` wrote"
        ) from None
    return doc


def slack_set(
    catalog: dict[str, Any], runs: Sequence[Path], where: Provenance
) -> tuple[dict[str, Any], slack_runs.Slack]:
    """The catalog with default_slack read from `runs` (bench/lab/slack.py), every other
    figure as it was, and what was read. ValueError (one line) where the runs give none."""
    found = slack_runs.slack_for(slack_runs.ratios_from(runs, where.machine))
    method = found.source([str(r) for r in runs])
    slack = figure(found.slack, "share of the deadline", method, where, "measured")
    return slack_runs.with_slack(catalog, slack), found


def interval_set(
    catalog: dict[str, Any], runs: Sequence[Path], where: Provenance
) -> tuple[dict[str, Any], interval_runs.Interval]:
    """The catalog with prediction_interval read from `runs` (bench/lab/interval.py) in place of
    its default_slack, every other figure as it was, and what was read. ValueError (one line)
    where the runs give none."""
    ratios = slack_runs.ratios_from(runs, where.machine, "--interval-from")
    found = interval_runs.interval_for(ratios)
    method = found.source([str(r) for r in runs])
    unit = "measured/predicted total, 90% of runs"
    value = figure(found.figure_value(), unit, method, where, "measured")
    return interval_runs.with_interval(catalog, value), found


def init_cores_set(
    catalog: dict[str, Any], runs: Sequence[Path], where: Provenance, cores: float
) -> tuple[dict[str, Any], init_runs.InitCores]:
    """The catalog with lambda.init_cores_by_n (and the one init_cores figure read from it,
    single_init_cores) from `runs`' start-ups (bench/lab/init_cores.py), every other figure as
    it was, and what was read. ValueError (one line) where the runs give none."""
    found = init_runs.cores_by_n(init_runs.startups_from(runs, where.machine), cores)
    method = found.source([str(r) for r in runs])
    by_n = figure([[n, c] for n, c in found.by_n], "[n, cores]", method, where, "measured")
    single = round(single_init_cores(found.by_n, int(cores)), 3)
    one = figure(single, "cores", f"the curve at {2 * int(cores)} runners: {method}", where,
               "measured")  # fmt: skip
    return init_runs.with_init_cores(catalog, by_n, one), found


def update_from_runs(args: argparse.Namespace) -> list[str]:
    """--interval-from, --slack-from and --init-cores-from: rewrite the --out catalog's figures
    read from finished runs, in one write after every one was read (a bad RUNS leaves the
    catalog as it was); a line per figure written. ValueError (one line) otherwise."""
    given = [o for o, v in (("--interval-from", args.interval_from),
                            ("--slack-from", args.slack_from),
                            ("--init-cores-from", args.init_cores_from)) if v]  # fmt: skip
    if args.interval_from and args.slack_from:
        raise ValueError(
            "--interval-from and --slack-from both set the deadline's reserve: give one "
            "(--interval-from: the measured spread, which replaces default_slack)"
        )
    catalog = read_catalog_to_update(args.out, " and ".join(given))
    where = here_today()
    said = []
    if args.init_cores_from:
        catalog, cores = init_cores_set(catalog, args.init_cores_from, where, cpu.machine_cores())
        each = ", ".join(f"{c:g} at n = {n}" for n, c in cores.by_n)
        said.append(f"start-up cores {each} from {cores.startups} start-ups")
    if args.slack_from:
        catalog, found = slack_set(catalog, args.slack_from, where)
        said.append(
            f"default_slack {found.slack:.0%} from {found.runs} runs (measured/predicted up to "
            f"{found.highest:.2f}×, 1-in-{slack_runs.TAIL_RUNS} {found.fitted:.2f}×)"
        )
    if args.interval_from:
        catalog, spread = interval_set(catalog, args.interval_from, where)
        said.append(
            f"prediction_interval {spread.low:.2f}-{spread.high:.2f}× (90%) from {spread.runs} "
            f"runs (measured/predicted {spread.lowest:.2f}-{spread.highest:.2f}×); "
            "default_slack dropped"
        )
    write_catalog(catalog, args.out)
    return [f"wrote {args.out}: {line}" for line in said]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.lab.catalog_from_runs", description=__doc__)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="catalog file to update")
    p.add_argument(
        "--interval-from",
        type=Path,
        nargs="+",
        metavar="RUNS",
        help="set the --out catalog's prediction_interval (90%% of measured/predicted totals) "
        "from finished runs, dropping its default_slack (run reports, folders of them, "
        "bench.predict results; bench/lab/interval.py)",
    )
    p.add_argument(
        "--slack-from",
        type=Path,
        nargs="+",
        metavar="RUNS",
        help="set the --out catalog's default_slack from finished runs (run reports, folders "
        "of them, bench.predict results; bench/lab/slack.py)",
    )
    p.add_argument(
        "--init-cores-from",
        type=Path,
        nargs="+",
        metavar="RUNS",
        help="set the --out catalog's start-up cores per n from finished runs' start-ups (run "
        "reports, folders of them, bench.predict results; bench/lab/init_cores.py)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_out(args.out)
        if not (args.interval_from or args.slack_from or args.init_cores_from):
            raise ValueError(
                "nothing to read: give --interval-from RUNS, --slack-from RUNS or "
                "--init-cores-from RUNS"
            )
        print("\n".join(update_from_runs(args)))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
