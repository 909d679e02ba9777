"""One prediction-benchmark configuration run on the emulator, term by term and with each
worker's CPU by phase: the probe behind the held-out rows' misses (docs/known-gaps.md).

`python -m bench.lab.one_case synthetic-cifar-mobilenetv2 --n 8 --memory-mb 2176 --iterations 1
--out runs/one-case` plans the row as bench.predict does (on this machine's catalog, or the one
given), runs it with real servers and prints each term predicted and measured, then per worker
its first link's CPU: the imports, the load and build, the loop and the loop's kernel share, its
minor faults and its compute wall. A lab probe: nothing it prints is a figure a plan reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CPU_KEYS = ("init_cpu_s", "setup_cpu_s", "train_cpu_s", "train_system_cpu_s")


def worker_lines(out: Path) -> list[str]:
    """Per worker, its first link's CPU by phase, minor faults and compute wall."""
    lines = []
    for path in sorted(out.rglob("worker-*-link-0-try-1.result.json")):
        timings = json.loads(path.read_text()).get("timings") or {}
        cpu = " ".join(f"{key[:-2]} {timings.get(key, 0.0):.2f}" for key in CPU_KEYS)
        lines.append(f"{path.name.split('-link')[0]}: {cpu} s; "
                     f"{int(timings.get('train_minor_faults', 0))} faults; "
                     f"compute {timings.get('compute_s', 0.0):.2f} s")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> None:
    from bench.predict import measure
    from bench.predict.cases import Case
    from emulator.s3server import weed_server

    p = argparse.ArgumentParser(prog="python -m bench.lab.one_case")
    p.add_argument("workload")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--memory-mb", type=int, required=True)
    p.add_argument("--iterations", type=int, default=0)
    p.add_argument("--ps-count", type=int, default=1)
    p.add_argument("--per-invocation", type=int, default=0, help="iterations a link (0: one link)")
    p.add_argument("--sync", choices=("ps", "s3"), default="ps")
    p.add_argument("--reducers", type=int, default=0)
    p.add_argument("--cpu-scale", choices=("1", "auto"), default="1",
                   help="auto: planned on AWS, run at the cores its memory stands for")  # fmt: skip
    p.add_argument("--profile", type=Path, help="the profile to predict with (default: committed)")
    p.add_argument("--catalog", type=Path, help="the catalog to plan on (default: local)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    case = Case(args.workload, n=args.n, memory_mb=args.memory_mb, iterations=args.iterations,
                ps_count=args.ps_count, sync=args.sync, reducers=args.reducers,
                cpu_scale=args.cpu_scale, per_invocation=args.per_invocation)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    with weed_server() as endpoint:
        row: dict[str, Any] = measure(case, endpoint, args.out, args.profile, args.catalog)
    for term, v in row["terms"].items():
        predicted, measured = v["predicted_local_s"], v["measured_s"]
        print(f"{term:15s} predicted {predicted:6.2f} s, measured {measured:6.2f} s")
    print("\n".join(worker_lines(args.out)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
