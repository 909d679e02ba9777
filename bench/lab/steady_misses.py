"""The S3 exchange's steady waits of held-out rows, measured against priced: per row, the empty
GETs the model prices for a link's cold iterations, and what is left of the measured ones per
steady wait beside what the model prices a steady wait.

`python -m bench.lab.steady_misses H/history/seed2*/predict-heldout.json` (H: a host's folder
under bench/results/hosts) prices each S3 row again with the current model and its run's
platform files (as --rescore-held-out does), once as it is and once with no steady misses, so
the cold part is the second and a steady wait's share is (measured − cold) / steady waits. A
lab probe: nothing it prints is a figure a plan reads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from unittest import mock


def steady_waits(row: dict[str, Any]) -> int:
    """The waits s3exchange.s3_exchange_misses prices as steady: past each link's first two
    iterations (s3_cold_iterations), 2·n·k an iteration."""
    from provisioner.s3exchange import s3_cold_iterations

    its = int(row["iterations"])
    steady_its = its - int(s3_cold_iterations(its, max(row["links"])))
    return steady_its * 2 * int(row["n"]) * int(row["reducers"])


def row_line(row: dict[str, Any], platform: Path) -> str:
    import provisioner.s3exchange as sx
    from bench.predict.rescore import predicted_terms
    from provisioner import load_catalog

    catalog = load_catalog(str(platform / row["catalog"]))
    profile = str(platform / row["profile"])
    its = int(row["iterations"])
    priced = predicted_terms(row, profile, catalog)["requests"]["get_miss"] * its
    # no steady misses in the price alone (the CPU floor's count, local_s3's, stays: the
    # exchange's time, and with it the cold waits, as priced)
    with (
        mock.patch.object(sx, "STEADY_LATE_SHARE", 0.0),
        mock.patch.object(sx, "shared_steady_misses_per_wait", lambda n, cores: 0.0 * n),
    ):
        cold = predicted_terms(row, profile, catalog)["requests"]["get_miss"] * its
    measured = row["requests_per_iteration"]["measured"]["get_miss"] * its
    waits = steady_waits(row)
    share = "–" if not waits else f"{(measured - cold) / waits:.2f} / {(priced - cold) / waits:.2f}"
    return (f"| {row['case']} | {float(row['worker_cores']):.2f} | {its} | {measured:.0f} | "
            f"{priced:.0f} | {cold:.0f} | {waits} | {share} |")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lab.steady_misses")
    p.add_argument("results", type=Path, nargs="+", help="held-out predict-heldout.json files")
    args = p.parse_args(argv)
    print("| configuration | cores a worker | iterations | empty GETs measured | priced | "
          "of them cold | steady waits | a steady wait: measured / priced |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for source in args.results:
        platform = source.parent / "predict-heldout-platform"
        for row in json.loads(source.read_text())["rows"]:
            if row.get("sync") == "s3" and row.get("requests_per_iteration"):
                print(row_line(row, platform))


if __name__ == "__main__":
    main()
