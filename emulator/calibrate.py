"""Measure this machine the way catalog/*.json describes AWS; write catalog/local.json.

`python -m emulator.calibrate [--quick] [--out PATH]` runs the project's real pieces on
127.0.0.1 — PS shards (`functions.ps`) reached through the worker's client
(`functions.ps_client`), the SeaweedFS server, the emulator's runner importing the worker
module — and fits the catalog's figures to what they do (emulator/calibration/):

- worker<->PS: push+pull of several model sizes, time = 2·rtt + 2·d/B (λDNN's exchange term):
  B from the fit's slope, rtt from many exchanges of the smallest size; n = 1, 2, 4 clients on
  one shard give the shard's aggregate bandwidth (ps_probe);
- S3: PUT and GET of 64 KB .. 32 MB objects, time = latency + size/B (s3_probe);
- start-up: a cold and a warm invocation through the runner, and the orchestrator's gap
  (runner_probe);
- CPU: the cores, the emulator's CFS period, and the share a busy loop achieves in a CFS group
  (cpu_probe).

The size fits (PS, S3, checkpoint) time every size once a round, so a change of load meets all
sizes alike, and where the time does not grow measurably with size they are taken again with a
larger size and more rounds; after the last attempt the bandwidth is the bound B ≥ d/t of the
largest size, and each figure read from it names that fallback in its source (fits). A fast or
busy machine gets a sound catalog, never a failed calibration.

The result is in the lambda-2025 schema (`load_catalog("local")` reads it; catalog). This module
is the command line only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from emulator.calibration.catalog import (
    REFERENCE_CATALOG,
    build_catalog,
    here_today,
    write_catalog,
)
from emulator.calibration.measurements import measure
from emulator.procs import Interrupted
from provisioner.catalog import CATALOG_DIR

DEFAULT_OUT = CATALOG_DIR / "local.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m emulator.calibrate", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (tests)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="catalog file to write")
    return p.parse_args(argv)


def check_out(out: Path) -> None:
    """ValueError unless `out` is a .json path in an existing, writable folder."""
    if out.suffix != ".json":
        raise ValueError(f"bad --out {str(out)!r}: expected a path ending in .json")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ValueError(f"bad --out {str(out)!r}: folder {str(folder)!r} is not a writable folder")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_out(args.out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # The servers' logs (weed's, the PS shards') are in the work folder: kept when a
    # measurement fails, so the one-line error can point at them.
    work = Path(tempfile.mkdtemp(prefix="calibrate-"))
    try:
        m = measure(args.quick, work)
        shutil.rmtree(work, ignore_errors=True)
        where = here_today()
        reference = json.loads(REFERENCE_CATALOG.read_text(encoding="utf-8"))
        write_catalog(build_catalog(m, reference, where), args.out)
    except Interrupted as stop:
        shutil.rmtree(work, ignore_errors=True)
        print(f"error: calibration stopped by {stop.signal_name}; nothing written", file=sys.stderr)
        return 128 + stop.signum
    except Exception as err:  # noqa: BLE001 - any failed measurement is one line, not a trace
        kept = f" (the servers' logs: {work})" if work.is_dir() else ""
        print(f"error: calibration failed: {type(err).__name__}: {err}{kept}", file=sys.stderr)
        return 1
    print(
        f"wrote {args.out}: worker<->PS {m.ps_mb_s:.0f} MB/s, rtt {m.ps_rtt_s * 1e3:.2f} ms; "
        f"S3 GET {m.s3_get_mb_s:.0f} MB/s; cold start {m.cold_start_s:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
