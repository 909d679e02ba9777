"""The local catalog's init_cores_by_n read from finished runs' start-ups.

`make calibrate` measures how many cores n cold starts at once effectively get by starting n
bare runners that import torch (emulator.calibration.runner_probe.measure_init_cores): a few
rounds of a figure that varies by a third from one round to the next. Every emulator run
measures the same thing on the real start-up (imports, the model's build, the handler's first
lines), so a grid of runs holds many more readings: `python -m bench.lab.catalog_from_runs
--init-cores-from RUNS...` writes them into the catalog, as `--slack-from` does the slack.

The rule (`cores_by_n`): within one source (a bench.predict results file, or the run reports
under one path) and one workload, t₁ is the median start-up of its one-worker runs and t_n the
median at n workers; the cores at n are n·t₁/t_n (as calibrate reads them), their median over
the sources and workloads, within [1, the machine's cores]. A source's own t₁ because runs
hours apart ran at different speeds (README: the latest grid); a workload's own because a
MobileNetV2 build takes longer than the MLP's.

Why: a catalog whose bare runners read 1.50 cores at n = 4 (1.75 at 2, 1.84 at 8), and every
grid on it over-predicted the CNN's and MobileNetV2's start-ups at n = 4 by 0.4-1.0 s.
Read from two of the three kept grids and re-scored on the third, the rule moved each grid's
total from 0.949 / 0.827 to 0.957 / 0.874, 0.952 / 0.829 to 0.959 / 0.846 and 0.947 / 0.842 to
0.947 / 0.844 (mean / worst; README: the latest grid).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lab import finished_runs
from bench.lab.finished_runs import machine_named, positive

# A run's start-up reading: (source, workload, workers, start-up s, machine or None)
Startup = tuple[str, str, int, float, str | None]


@dataclass(frozen=True)
class InitCores:
    """The cores per n the runs call for, and what they were read from."""

    by_n: tuple[tuple[int, float], ...]
    readings: int  # (source, workload, n) medians behind by_n
    startups: int  # start-ups read: a run report's, or a bench.predict row's median

    def source(self, paths: Sequence[str]) -> str:
        """The catalog figure's method: the rule and where it was read."""
        return (
            f"bench/lab/init_cores.py from {self.startups} start-ups of finished runs (a run's, "
            f"or a bench.predict row's median; {', '.join(paths)}): per source and workload "
            f"n·t₁/t_n, t the median start-up at 1 and at n workers; per n the median of these "
            f"({self.readings} in all), within [1, cores]"
        )


def report_startups(doc: dict[str, Any], source: str) -> dict[str, Startup]:
    """An emulator run report's start-up, by run id: none for an unfinished run or one that
    measured none. Its workload is its model, dataset and batch (a report names no profile)."""
    if doc.get("status") != "done":
        return {}
    term: dict[str, Any] = next(
        (t for t in doc.get("terms", []) if isinstance(t, dict) and t.get("term") == "startup"),
        {},
    )
    plan = doc.get("plan") or {}
    startup, n = positive(term.get("measured_s")), plan.get("n_workers")
    if startup is None or not isinstance(n, int) or n < 1:
        return {}
    workload = f"{plan.get('model')}/{plan.get('dataset')}/batch {plan.get('local_batch')}"
    machine = machine_named((doc.get("emulation") or {}).get("machine"))
    return {str(doc.get("run_id")): (source, workload, n, startup, machine)}


def bench_startups(doc: dict[str, Any], source: str) -> dict[str, Startup]:
    """A bench.predict results file's rows: each row's median start-up, by row, on the machine
    its meta names."""
    machine = machine_named((doc.get("meta") or {}).get("machine"))
    out = {}
    for i, row in enumerate(doc["rows"]):
        startup = positive(((row.get("terms") or {}).get("startup") or {}).get("measured_s"))
        n = row.get("n")
        if startup is not None and isinstance(n, int) and n >= 1:
            out[f"{source}#{i}"] = (source, str(row.get("workload")), n, startup, machine)
    return out


def startups_in(path: Path) -> dict[str, Startup]:
    """The start-ups in a run report, a folder of them (searched through; one source), or a
    bench.predict results file (finished_runs.documents). ValueError naming the path when it
    holds none."""
    source = str(path)
    found: dict[str, Startup] = {}
    for kind, doc in finished_runs.documents(path, "--init-cores-from"):
        reader = report_startups if kind == "report" else bench_startups
        found.update(reader(doc, source))
    if not found:
        raise ValueError(
            f"--init-cores-from {source!r} holds no finished run with a measured start-up"
        )
    return found


def cores_by_n(startups: Iterable[Startup], cores: float) -> InitCores:
    """The cores n cold starts at once get, per n the runs started more than one worker at
    (see module). ValueError where no workload of a source ran both alone and with more."""
    times: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    read = 0
    for source, workload, n, startup_s, _ in startups:
        times[(source, workload)][n].append(startup_s)
        read += 1
    per_n: dict[int, list[float]] = defaultdict(list)
    for by_n in times.values():
        if 1 not in by_n:
            continue
        alone = statistics.median(by_n[1])
        for n, ts in by_n.items():
            if n > 1:
                per_n[n].append(n * alone / statistics.median(ts))
    if not per_n:
        raise ValueError(
            "--init-cores-from: no workload ran both with one worker and with more in one "
            "source, so no start-up at n can be set against one alone"
        )
    by_n_cores = tuple(
        (n, round(min(cores, max(1.0, statistics.median(v))), 3)) for n, v in sorted(per_n.items())
    )
    return InitCores(by_n_cores, sum(len(v) for v in per_n.values()), read)


def startups_from(paths: Iterable[Path], machine: str | None = None) -> list[Startup]:
    """Every run's start-up under `paths`, each run once (a run's report is also copied into
    its artifacts; one run id counts once). With `machine` (cpu.this_machine), only that
    machine's runs and those that name none, as bench.lab.slack reads a slack. ValueError when
    every run found ran on another machine."""
    found: dict[str, Startup] = {}
    for p in paths:
        found.update(startups_in(p))
    return finished_runs.on_machine(
        list(found.values()), lambda startup: startup[4], machine, "--init-cores-from",
        "start-up cores are read from the machine they are for",
    )  # fmt: skip


def with_init_cores(
    catalog: dict[str, Any], by_n: dict[str, Any], single: dict[str, Any]
) -> dict[str, Any]:
    """The catalog document with lambda.init_cores_by_n and lambda.init_cores replaced; pure."""
    section = {**catalog.get("lambda", {}), "init_cores_by_n": by_n, "init_cores": single}
    return {**catalog, "lambda": section}
