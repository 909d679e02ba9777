"""The S3 exchange's billed requests per iteration: measured on the emulator against priced.

Each configuration (workload, n, memory, k, with or without `--cpu-scale auto`) is planned and
trained by the emulator as bench.predict runs a case (real SeaweedFS, PS-less workers held to
their CPU share); the report's requests per iteration (emulator.report.exchange_figures) are
the measured GETs, PUTs and empty GETs, next to the model's for this machine.

    .venv/bin/python -m bench.s3_requests --out bench/results/s3-requests.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.predict.cases import Case
from bench.predict.run_case import measure

# Across n 2..10, k 1..3, two workloads, with and without `--cpu-scale auto`, and a run of two
# links (a link's first iteration polls cold).
CASES = (
    Case("digits-mlp", 3, 640, 0, 120, sync="s3", reducers=1, cpu_scale="auto"),
    Case("digits-mlp", 7, 768, 0, 100, sync="s3", reducers=2),
    Case("digits-mlp", 4, 448, 0, 150, 75, sync="s3", reducers=2),
    Case("synthetic-cifar-cnn", 5, 1152, 0, 15, sync="s3", reducers=3),
    Case("synthetic-cifar-cnn", 2, 1024, 0, 20, sync="s3", reducers=1, cpu_scale="auto"),
    Case("synthetic-cifar-cnn", 10, 1024, 0, 8, sync="s3", reducers=3),
    # not among the runs the steady misses' figures were read from
    Case("synthetic-cifar-cnn", 3, 1536, 0, 12, sync="s3", reducers=2, cpu_scale="auto"),
    Case("digits-mlp", 10, 1024, 0, 60, sync="s3", reducers=3),
)


def row(case: Case, measured: dict[str, Any]) -> dict[str, Any]:
    """The requests of one run: measured and priced per iteration, GETs' ratio."""
    req = measured["requests_per_iteration"] or {}
    got, want = req.get("measured", {}), req.get("predicted_local", {})
    return {
        "case": case.label,
        "n": case.n,
        "reducers": case.reducers,
        "memory_mb": measured["memory_mb"],
        "cpu_scale": case.cpu_scale,
        "iterations": measured["iterations"],
        "links": measured["links"],
        "measured": got,
        "priced": want,
        "get_ratio": got.get("get", 0.0) / want["get"] if want.get("get") else None,
        "total_s": {
            t: measured["terms"]["total"][f]
            for t, f in (("measured", "measured_s"), ("predicted_local", "predicted_local_s"))
        },
        "run_s": measured["run_s"],
    }


def table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """Markdown: each configuration's GETs per iteration, measured in a run priced by the model
    before (BEFORE) and in one priced by the model after (AFTER), each against both prices.
    The runtime is the same in both: their measured columns differ by the host's noise only
    (the price of a cpu-scale-auto run is the report's at the cores it got, so it too may
    differ a little between the runs)."""
    head = (
        "| configuration | iterations (links) | GETs measured: run 1, run 2 | priced before "
        "| measured / priced before | priced after | measured / priced after | total s "
        "measured / predicted (run 2) |\n|---|---|---|---|---|---|---|---|\n"
    )
    old = {r["case"]: r for r in before}
    lines = []
    for r in after:
        b = old.get(r["case"])
        if b is None:
            continue
        got = (b["measured"]["get"], r["measured"]["get"])
        was, now = b["priced"]["get"], r["priced"]["get"]
        total = r.get("total_s") or {}
        lines.append(
            f"| {r['case']} | {r['iterations']} ({max(r['links'])}) | "
            f"{got[0]:.1f}, {got[1]:.1f} | {was:.1f} | "
            f"{got[0] / was:.2f}, {got[1] / was:.2f} | {now:.1f} | "
            f"**{got[0] / now:.2f}, {got[1] / now:.2f}** | "
            f"{total.get('measured', float('nan')):.1f} / "
            f"{total.get('predicted_local', float('nan')):.1f} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results .json")
    parser.add_argument("--cases", default="", help="comma-separated indices into CASES")
    parser.add_argument(
        "--table",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="print the markdown table of two results files and run nothing",
    )
    args = parser.parse_args(argv)
    if args.table:
        rows = [json.loads(p.read_text())["rows"] for p in args.table]
        print(table(*rows), end="")
        return
    from emulator.s3server import weed_server

    picked = [CASES[int(i)] for i in args.cases.split(",")] if args.cases else list(CASES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:
        for i, case in enumerate(picked):
            result = measure(case, endpoint, Path(tmp) / f"case{i}")
            rows.append(row(case, result))
            print(json.dumps(rows[-1]), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
