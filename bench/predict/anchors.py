"""The platform a run predicts on: measured at its start, and read again every round.

At the start, the machine's catalog (`emulator.calibrate`) and every workload's profile
(`emulator.profile`), as λDNN profiles a workload before it predicts: this VM's speed drifts by
up to half between hours, so a profile from another hour predicts another machine. `--reuse`
takes catalog/local.json and profiles/ as they are instead. Either way the figures used are
kept beside the results (<name>-platform/), where a re-scoring reads them.

Every round, just before its rows: each workload's rate at 0.5 and 1 vCPU and its start-up
(emulator.profiling.reading.measure_reading, a few children per share), which moves its profile
to that speed, as the product's `emulator.profile --anchor` does (bench.lab.anchor.ANCHOR_WEIGHT
says why; `--anchor-weight` re-scores at another), each point by the factor at its share. Two
shares, not one: the CNN's runs at 0.56-0.72 vCPU did not speed up with a 1-vCPU reading
alone. And the catalog's loop figures (bench.lab.catalog_anchor.measure_loop_now: the round
trip, the client's CPU share of an exchange, the shard's CPU per exchange), the load's
CPU-bound part (measure_load_now) and an S3 request's CPU (measure_requests_now), which drift
between hours as much as the grids' fits move, written into the round's catalog.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.lab.anchor import write_anchored
from bench.lab.catalog_anchor import (
    LOOP_FIGURES,
    REQUEST_FIGURES,
    load_anchored,
    loop_anchored,
    measure_load_now,
    measure_loop_now,
    measure_requests_now,
    requests_anchored,
)
from emulator.calibration.catalog import here_today, write_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]
# What anchor_catalog reads again each round, as the results' meta keeps it, and the section of
# the catalog each is in.
ANCHORED_FIGURES = {
    **{f: "network" for f in LOOP_FIGURES},
    "load_cpu_s": "lambda",
    **{f: "network" for f in REQUEST_FIGURES},
}


def measure_platform(workloads: list[str], out: Path, repo: Path = REPO_ROOT) -> dict[str, Path]:
    """Calibrate this machine (catalog/local.json) and profile each workload now; a copy of
    every figure used goes to `out`. Returns the profile path per workload."""
    out.mkdir(parents=True, exist_ok=True)
    catalog = repo / "catalog" / "local.json"
    steps = [["emulator.calibrate", "--out", str(catalog)]] + [
        ["emulator.profile", "--workload", w, "--output", str(out / f"{w}.json")] for w in workloads
    ]
    for step in steps:
        print(f"measuring the platform: python -m {' '.join(step)}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "-m", *step], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ValueError(f"python -m {' '.join(step[:3])} failed: {last}")
    shutil.copyfile(catalog, out / "local.json")
    return {w: out / f"{w}.json" for w in workloads}


def keep_platform(workloads: list[str], out: Path, repo: Path = REPO_ROOT) -> dict[str, Path]:
    """Copy catalog/local.json and each workload's committed profile to `out`, as a --reuse
    run takes them; the profile path per workload (the copy)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(repo / "catalog" / "local.json", out / "local.json")
    for w in workloads:
        shutil.copyfile(repo / "profiles" / f"{w}.json", out / f"{w}.json")
    return {w: out / f"{w}.json" for w in workloads}


def anchor_profile(workload: str, base: Path | None, out: Path) -> tuple[Path, dict[str, float]]:
    """Measure the workload's speed now at the anchored shares and write its profile (`base`,
    else the committed one) moved to it at `out`; (the path, the speed factor over the
    profile's per anchored share)."""
    source = base or REPO_ROOT / "profiles" / f"{workload}.json"
    moved = write_anchored(json.loads(source.read_text()), out, f"read just before {out.stem}")
    return out, dict(moved["anchor"]["speed_factor_by_share"])


def anchor_catalog(start: Path, endpoint: Any, work: Path, out: Path, k: int) -> Path:
    """Read the catalog's loop figures now (bench.lab.catalog_anchor.measure_loop_now: the round
    trip, the client's CPU share, the shard's CPU per exchange), the load's CPU-bound part
    (measure_load_now) and an S3 request's CPU (measure_requests_now), and write the catalog
    `start` with them at `out` (checked that it loads, whole or not at all), round k's catalog;
    its path."""
    doc = json.loads(start.read_text())
    work.mkdir(parents=True, exist_ok=True)
    figures = measure_loop_now(endpoint, work, float(doc["network"]["function_ps_mb_s"]["value"]))
    load_cpu_s = measure_load_now(endpoint, work / "load")
    requests = measure_requests_now(endpoint)
    out.parent.mkdir(parents=True, exist_ok=True)
    read = f"round {k}'s anchor of bench.predict, read just before the round"
    where = here_today()
    anchored = load_anchored(loop_anchored(doc, figures, read, where), load_cpu_s, read, where)
    anchored = requests_anchored(anchored, requests, read, where)
    write_catalog(anchored, out)
    return out


def anchored_figures_of(catalog_path: Path) -> dict[str, float]:
    """The anchored figures a round's catalog holds (anchor_catalog), as the results' meta
    keeps them."""
    doc = json.loads(catalog_path.read_text())
    held = {f: doc.get(section, {}).get(f) for f, section in ANCHORED_FIGURES.items()}
    return {f: figure["value"] for f, figure in held.items() if figure is not None}
