"""The local catalog's default_slack measured from finished runs, not set as a policy.

A plan aims at deadline × (1 − slack); a run meets its deadline when it lands no further past
its prediction than 1 / (1 − slack). On this VM the same work costs up to 3× the CPU in spells
of minutes (README: the latest grid), so how far runs land past their prediction is a property
of the machine, like its bandwidth: `python -m bench.lab.catalog_from_runs --slack-from
RUNS...` reads it from finished runs' reports and writes the slack that covers it into the
catalog.

Only the runs of the machine the catalog is for count (ratios_from): a run's report names the
machine it ran on (`emulation.machine`), bench.predict results name theirs in `meta.machine`.

The rule (`slack_for`): the measured/predicted ratio of every run's total, fitted as
log-normal; the slack covers the ratio one run in TAIL_RUNS exceeds under that fit, and never
less than the worst ratio seen; rounded up to a whole percent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lab import finished_runs
from bench.lab.finished_runs import machine_named, positive
from provisioner.parse import MAX_SLACK

# One run in this many lands past the slack under the log-normal fit: a grid's 30 planned runs
# (bench/predict: 6 cases × 5) then all meet their deadlines 97% of the time (policy).
TAIL_RUNS = 1000
TAIL_Z = 3.09  # the standard normal's quantile at 1 − 1/TAIL_RUNS
# Fewer runs than this say little about a tail (policy: a bench.predict grid gives 100+)
MIN_RUNS = 20


@dataclass(frozen=True)
class Slack:
    """The slack a machine's runs call for, and what it was read from."""

    slack: float  # share of the deadline held back
    runs: int
    lowest: float  # measured/predicted ratios of the runs' totals
    highest: float
    p95: float
    fitted: float  # the ratio one run in TAIL_RUNS exceeds (log-normal fit)

    def source(self, paths: Sequence[str]) -> str:
        """The catalog figure's method: what the slack covers and where it was read."""
        return (
            f"bench/lab/slack.py from {self.runs} finished runs ({', '.join(paths)}): "
            f"measured/predicted total {self.lowest:.2f}-{self.highest:.2f}×, 95th percentile "
            f"{self.p95:.2f}×, log-normal 1-in-{TAIL_RUNS} {self.fitted:.2f}×; the slack is "
            f"1 − 1/max(worst, fitted), rounded up to a whole percent"
        )


def slack_for(ratios: Sequence[float]) -> Slack:
    """The slack covering `ratios` (measured/predicted totals of finished runs): see module."""
    if len(ratios) < MIN_RUNS:
        runs = f"{len(ratios)} run{'' if len(ratios) == 1 else 's'}"
        raise ValueError(f"{runs} too few to read a slack from; give {MIN_RUNS} or more")
    logs = [math.log(r) for r in ratios]
    fitted = math.exp(statistics.fmean(logs) + TAIL_Z * statistics.stdev(logs))
    covered = max(max(ratios), fitted)
    slack = max(0.0, math.ceil((1.0 - 1.0 / covered) * 100.0 - 1e-9) / 100.0)
    if slack >= MAX_SLACK:
        raise ValueError(
            f"runs land up to {covered:.2f}× their prediction: a slack of {slack:.0%} is out of"
            f" range (below {MAX_SLACK:.0%}); the model does not describe these runs"
        )
    ordered = sorted(ratios)
    return Slack(
        slack=slack,
        runs=len(ratios),
        lowest=ordered[0],
        highest=ordered[-1],
        p95=ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)],
        fitted=fitted,
    )


def _ratio(predicted: Any, measured: Any) -> float | None:
    p, m = positive(predicted), positive(measured)
    return None if p is None or m is None else m / p


# A run's measured/predicted total and the machine it ran on (None: its report names none, as
# reports of emulators that predate the field do not)
Run = tuple[float, str | None]


def report_ratios(doc: dict[str, Any]) -> dict[str, Run]:
    """An emulator run report's measured/predicted-for-this-machine total and machine, by run
    id: none for an unfinished run or one planned without the local catalog."""
    if doc.get("status") != "done":
        return {}
    total: dict[str, Any] = next(
        (t for t in doc["terms"] if isinstance(t, dict) and t.get("term") == "total"), {}
    )
    ratio = _ratio(total.get("predicted_local_s"), total.get("measured_s"))
    machine = machine_named((doc.get("emulation") or {}).get("machine"))
    return {} if ratio is None else {str(doc.get("run_id")): (ratio, machine)}


def bench_ratios(doc: dict[str, Any], name: str) -> dict[str, Run]:
    """A bench.predict results file's runs: every row's per-run predicted and measured totals
    (rows written before they kept per-run predictions give none), by row and run, on the
    machine its meta names."""
    machine = machine_named((doc.get("meta") or {}).get("machine"))
    out = {}
    for i, row in enumerate(doc["rows"]):
        predicted = row.get("predicted_totals_s") or []
        measured = row.get("measured_totals_s") or []
        if len(predicted) != len(measured):  # not one prediction per run: nothing to pair
            continue
        for j, (p, m) in enumerate(zip(predicted, measured, strict=True)):
            if (r := _ratio(p, m)) is not None:
                out[f"{name}#{i}.{j}"] = (r, machine)
    return out


def ratios_in(path: Path, option: str = "--slack-from") -> dict[str, Run]:
    """The runs in a run report, a folder of them (searched through), or a bench.predict
    results file (finished_runs.documents). ValueError naming the path when it holds none."""
    found: dict[str, Run] = {}
    for kind, doc in finished_runs.documents(path, option):
        found.update(report_ratios(doc) if kind == "report" else bench_ratios(doc, str(path)))
    if not found:
        raise ValueError(
            f"{option} {str(path)!r} holds no finished run predicted for this machine "
            "(a report.json with terms[total].predicted_local_s, or bench.predict results with "
            "predicted_totals_s)"
        )
    return found


def ratios_from(
    paths: Iterable[Path], machine: str | None = None, option: str = "--slack-from"
) -> list[float]:
    """Every run's ratio under `paths`, each run once: a run's report is also copied into its
    artifacts (emulator/report.json), and one run id counts once however often it is found.
    bench.predict results carry no run ids: give them or their runs' reports, not both.

    With `machine` (cpu.this_machine), only that machine's runs: a slack is a figure of the
    machine its catalog describes, so runs another machine ran are left out, and runs that
    name no machine (reports written before they did) are taken as they are. ValueError when
    every run found ran on another machine."""
    found: dict[str, Run] = {}
    for p in paths:
        found.update(ratios_in(p, option))
    mine = finished_runs.on_machine(
        list(found.values()), lambda run: run[1], machine, option,
        "a spread is read from the runs of the machine it is for",
    )  # fmt: skip
    return [ratio for ratio, _ in mine]


def with_slack(catalog: dict[str, Any], figure: dict[str, Any]) -> dict[str, Any]:
    """The catalog document with orchestration.default_slack replaced by `figure`; pure."""
    orchestration = {**catalog.get("orchestration", {}), "default_slack": figure}
    return {**catalog, "orchestration": orchestration}
