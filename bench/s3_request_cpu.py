"""What one S3 request costs the worker's CPU: bare boto3 calls against the worker's exchange.

Calibration reads `network.s3_request_cpu_s` by stepping the worker's own S3 exchange
(`emulator.calibration.s3_probe.measure_request_cpu`). This benchmark shows why: in the same
run, against the same SeaweedFS on 127.0.0.1, it alternates rounds of bare boto3 requests (PUT,
GET, GET of a missing key, in turn: the probe's older loop) with rounds of the exchange's probe,
and reports each one's CPU time per request and their ratio. CPU time, not wall time, so a busy
machine stretches neither much; the ratio is what to read.

    python -m bench.s3_request_cpu [--rounds 5] [--requests 400]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import time
from pathlib import Path
from typing import Any

from bench.outputs import pyplot, save_figure, write_outputs
from emulator.calibration.s3_probe import CPU_OBJECT_BYTES, measure_request_cpu
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint, weed_server

RESULTS = Path(__file__).parent / "results"


def bare_request_cpu_s(endpoint: S3Endpoint, requests: int) -> float:
    """CPU seconds per request of bare boto3 calls: PUT, GET, GET of a missing key, in turn."""
    from botocore.exceptions import ClientError

    client = s3_client_for(endpoint)
    bucket = f"bench-cpu-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=bucket)
    body = os.urandom(CPU_OBJECT_BYTES)

    def one_round(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"o-{i}", Body=body)
        client.get_object(Bucket=bucket, Key=f"o-{i}")["Body"].read()
        with contextlib.suppress(ClientError):
            client.get_object(Bucket=bucket, Key=f"absent-{i}")

    one_round(-1)
    rounds = max(1, requests // 3)
    c0 = time.process_time()
    for i in range(rounds):
        one_round(i)
    return (time.process_time() - c0) / (3 * rounds)


def markdown(rows: list[dict[str, float]], requests: int) -> str:
    bare = statistics.median(r["bare_ms"] for r in rows)
    exchange = statistics.median(r["exchange_ms"] for r in rows)
    lines = [
        "# CPU per S3 request: bare boto3 calls against the worker's exchange",
        "",
        f"`python -m bench.s3_request_cpu --rounds {len(rows)} --requests {requests}`: each round",
        "runs both, one after the other, against one SeaweedFS on 127.0.0.1.",
        "",
        "| round | bare boto3 (ms CPU / request) | exchange (ms CPU / request) | exchange / bare |",
        "|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        lines.append(f"| {i} | {r['bare_ms']:.2f} | {r['exchange_ms']:.2f} | "
                     f"{r['exchange_ms'] / r['bare_ms']:.2f} |")  # fmt: skip
    lines += ["", f"Median: bare {bare:.2f} ms, exchange {exchange:.2f} ms, ratio "
              f"{exchange / bare:.2f}.", ""]  # fmt: skip
    return "\n".join(lines)


def plot(rows: list[dict[str, float]]) -> Any:
    def draw(path: Path) -> None:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs = range(len(rows))
        ax.plot(xs, [r["bare_ms"] for r in rows], "o-", label="bare boto3")
        ax.plot(xs, [r["exchange_ms"] for r in rows], "s-", label="worker's exchange")
        ax.set_xlabel("round")
        ax.set_ylabel("CPU ms per request")
        ax.set_ylim(bottom=0)
        ax.legend()
        save_figure(fig, path)

    return draw


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args(argv)
    rows = []
    with weed_server() as endpoint:
        for _ in range(args.rounds):
            bare = bare_request_cpu_s(endpoint, args.requests)
            exchange = measure_request_cpu(endpoint, args.requests).client_s
            rows.append({"bare_ms": 1e3 * bare, "exchange_ms": 1e3 * exchange})
    text = markdown(rows, args.requests)
    write_outputs(RESULTS, "s3-request-cpu", {"rows": rows, "requests": args.requests}, text,
                  plot(rows))  # fmt: skip
    print(text)


if __name__ == "__main__":
    main()
