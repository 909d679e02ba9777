"""Rounds and repeats: every case once, then again, so a drift of the machine's speed meets
every case alike; within a round a workload's cases run together, right after its anchors.

Each case runs R times (default 3) and each term's measured figure is the median of its runs:
the same run varies by 10-20% on these machines. With a precision P, rounds go on after the
repeats over the cases whose median may still stray more than P from their typical run
(noise.median_error), up to a cap of runs a case and for at most some extra minutes. The rule
reads the measured totals alone, never a prediction: a case runs again for its noise, not for
how far it lands from its prediction. Five runs of a digits case spread 10-17% leave its median
6-9% adrift, so without it some row of most grids is 10% off whatever the model says
(noise.noise_ceiling).

A Round owns what it measured; the Grid keeps the rounds in order and reads every case's runs
and every anchor from them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.predict.anchors import anchored_figures_of
from bench.predict.cases import Case
from bench.predict.noise import median_error


@dataclass(frozen=True)
class Instruments:
    """What a round measures with: a case's run (run_case.measure), the catalog's and a
    profile's anchors (anchors.anchor_catalog, anchors.anchor_profile) and the prediction from
    the start-of-run profile (rescore.predicted_terms)."""

    measure: Callable[[Case, Any, Path, Path | None, Path | None], dict[str, Any]]
    anchor_catalog: Callable[[Path, Any, Path, Path, int], Path]
    anchor_profile: Callable[[str, Path | None, Path], tuple[Path, dict[str, float]]]
    predicted_terms: Callable[[dict[str, Any], Path | str, Any], dict[str, float]]


@dataclass(frozen=True)
class Bench:
    """What every round of one run reads and none changes."""

    cases: tuple[Case, ...]
    profiles: dict[str, Path | None]  # each workload's start-of-run profile (None: committed)
    catalog: Any  # the start-of-run catalog, which the unanchored prediction is made on
    platform: Path  # <name>-platform/: the start catalog (local.json); rounds write anchors/
    work: Path  # scratch for the runs' outputs and the anchors' readings
    endpoint: Any  # the S3 server every run and anchor uses
    anchored: bool  # False: every round predicts from the start-of-run profiles and catalog
    instruments: Instruments

    @property
    def workloads(self) -> list[str]:
        return sorted({c.workload for c in self.cases})


@dataclass(frozen=True)
class Repeats:
    """How many runs each case gets: `repeats` round every case, then with `precision` more
    rounds over the cases whose median may still stray more than it, up to `cap` runs a case,
    none starting a workload's cases after `extra_minutes`."""

    repeats: int = 3
    precision: float | None = None
    cap: int = 12
    extra_minutes: float = 30.0


@dataclass
class Round:
    """Round k over the cases `indices`: per workload, its anchors read again just before its
    cases (the catalog's once, before the round's first row), then each case once; what it
    measured, by case index."""

    k: int
    indices: list[int]
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    anchors: dict[str, dict[str, float]] = field(default_factory=dict)  # speed factor by share
    loop_anchor: dict[str, float] | None = None  # the round catalog's anchored figures

    def run(
        self, bench: Bench, until: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> Round:
        """Measure the round; no workload's cases start after `until` (an extra round's)."""
        catalog = None
        for w in bench.workloads:
            mine = [i for i in self.indices if bench.cases[i].workload == w]
            if not mine or (until is not None and clock() > until):
                continue
            if bench.anchored and catalog is None:  # before the round's first row
                catalog = self._anchor_catalog(bench)
            profile = self._anchor_profile(bench, w)
            for i in mine:
                self.runs[i] = self._measure(bench, i, profile, catalog)
        return self

    def _anchor_catalog(self, bench: Bench) -> Path:
        anchors = bench.platform / "anchors"
        catalog = bench.instruments.anchor_catalog(
            bench.platform / "local.json", bench.endpoint, bench.work / f"loop-{self.k}",
            anchors / f"local-round{self.k}.json", self.k,
        )  # fmt: skip
        self.loop_anchor = anchored_figures_of(catalog)
        return catalog

    def _anchor_profile(self, bench: Bench, workload: str) -> Path | None:
        base = bench.profiles[workload]
        if not bench.anchored:
            return base
        out = bench.platform / "anchors" / f"{workload}-round{self.k}.json"
        profile, self.anchors[workload] = bench.instruments.anchor_profile(workload, base, out)
        return profile

    def _measure(
        self, bench: Bench, i: int, profile: Path | None, catalog: Path | None
    ) -> dict[str, Any]:
        case = bench.cases[i]
        out = bench.work / f"case-{i}-{self.k}"
        result = bench.instruments.measure(case, bench.endpoint, out, profile, catalog)
        if catalog is not None:
            result["catalog"] = str(catalog.relative_to(bench.platform))
        if bench.anchored and profile is not None:
            result["profile"] = str(profile.relative_to(bench.platform))
            base = bench.profiles[case.workload] or case.workload
            unanchored = bench.instruments.predicted_terms(result, base, bench.catalog)
            result["unanchored_total_s"] = unanchored["total"]
        total = result["accuracy_local"].get("total")
        print(json.dumps({"case": case.label, "repeat": self.k, "total": total}),
              file=sys.stderr, flush=True)  # fmt: skip
        return result


@dataclass
class Grid:
    """One run's rounds, in the order they ran."""

    bench: Bench
    rounds: list[Round] = field(default_factory=list)

    def run(self, repeats: Repeats, clock: Callable[[], float] = time.monotonic) -> Grid:
        """The repeats round every case, then the extra rounds the precision asks for while the
        extra minutes last."""
        everything = list(range(len(self.bench.cases)))
        for k in range(repeats.repeats):  # round the cases: a drift in speed meets them all
            self.rounds.append(Round(k, everything).run(self.bench))
        if repeats.precision is None:
            return self
        until = clock() + 60.0 * repeats.extra_minutes
        k = repeats.repeats
        while clock() < until and (
            wanting := cases_wanting_runs(self.runs(), repeats.precision, repeats.cap)
        ):
            self.rounds.append(Round(k, wanting).run(self.bench, until, clock))
            k += 1
        return self

    def runs(self) -> list[list[dict[str, Any]]]:
        """Every case's runs, round by round."""
        cases = range(len(self.bench.cases))
        return [[r.runs[i] for r in self.rounds if i in r.runs] for i in cases]

    def anchors(self) -> dict[str, list[dict[str, float]]]:
        """Each anchored workload's speed factors, round by round."""
        by_workload = {w: [r.anchors[w] for r in self.rounds if w in r.anchors]
                       for w in self.bench.workloads}  # fmt: skip
        return {w: factors for w, factors in by_workload.items() if factors}

    def loop_anchors(self) -> list[dict[str, float]]:
        """The anchored catalog figures of every round that read them."""
        return [r.loop_anchor for r in self.rounds if r.loop_anchor is not None]


def cases_wanting_runs(runs: list[list[dict[str, Any]]], precision: float, cap: int) -> list[int]:
    """The cases whose median total is not yet within `precision` (median_error) and that have
    fewer than `cap` runs. Read from the measured totals alone, never from a prediction, so a
    case runs again for its noise and not for how far it lands from what was predicted."""
    wanting = []
    for i, case_runs in enumerate(runs):
        totals = [r["terms"]["total"]["measured_s"] for r in case_runs]
        error = median_error([t for t in totals if t])
        if len(case_runs) < cap and (error is None or error > precision):
            wanting.append(i)
    return wanting
