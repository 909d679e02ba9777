"""Liveness check of a PS shard: does it still accept a new connection and greet it?

`python -m functions.ps_health HOST:PORT` connects and waits for the CHALLENGE frame every
shard sends first; it needs no secret and sends nothing, so it cannot be abused for more than
any TCP connection can. Exit 0: healthy; 1: not (one line on stdout says why); 2: bad flags.

A shard whose process lives but that cannot accept (out of file descriptors, a dead accept
thread) listens but never greets: the kernel completes the TCP handshake from the listen
backlog, then nothing comes. That is `serving=False` with `listening=True`. A refused
connection means nothing listens (yet): a shard still restoring its checkpoint, or one that
exited, which its supervisor restarts anyway. `--terminate-pid` therefore signals only a
shard that listens and does not serve: the container health check uses it with PID 1 (the PS),
since Docker does not restart an unhealthy container by itself (see stacks/parameter_servers.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from functions import aws, wire
from functions.oneline import OneLineParser
from functions.wire import MsgType

PROBE_TIMEOUT_S = 5.0
ATTEMPTS = 3
RETRY_DELAY_S = 1.0


@dataclass(frozen=True)
class Probe:
    """One connection attempt's outcome."""

    serving: bool  # a CHALLENGE frame arrived
    listening: bool  # the TCP connection was not refused
    reason: str


def probe(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Connect to `endpoint` and read the shard's first frame header within `timeout_s`."""
    host, port = wire.parse_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            header = wire.recv_header(sock, deadline)
    except ConnectionRefusedError as exc:
        return Probe(False, False, f"{endpoint} refused the connection ({exc})")
    except (TimeoutError, wire.PSTimeout):
        return Probe(False, True, f"{endpoint} sent no CHALLENGE within {timeout_s:g} s")
    except (OSError, wire.WireError) as exc:
        return Probe(False, True, f"{endpoint} did not greet: {exc}")
    if header.msg_type != MsgType.CHALLENGE:
        return Probe(False, True, f"{endpoint} sent {header.msg_type.name}, not CHALLENGE")
    return Probe(True, True, f"{endpoint} answered with a CHALLENGE")


def check(endpoint: str, *, attempts: int, timeout_s: float, delay_s: float) -> list[Probe]:
    """Probe until one attempt finds the shard serving, at most `attempts` times; all results."""
    results: list[Probe] = []
    for attempt in range(attempts):
        if attempt:
            time.sleep(delay_s)
        results.append(probe(endpoint, timeout_s))
        if results[-1].serving:
            break
    return results


WAIT_POLL_S = 5.0  # between two rounds of probes while a run waits for its PS
WAIT_MARGIN_S = 15.0  # of the invocation's remaining time, kept to fail with a clear message


class PsNotReady(RuntimeError):
    """The shards named in the message did not greet within the wait."""


def wait_until_serving(endpoints: list[str], *, remaining_s: Callable[[], float | None],
                       sleep: Callable[[float], None] = time.sleep,
                       probe_s: float = PROBE_TIMEOUT_S) -> int:  # fmt: skip
    """Probe every shard until all greet; returns the rounds it took. A run starts its PS
    instances and then waits here: a booting instance refuses or drops connections for a minute
    or more (longer on its first boot, which installs Docker and pulls the image).
    `remaining_s` gives None without a deadline."""
    waiting = list(endpoints)
    rounds = 0
    while waiting:
        rounds += 1
        waiting = [e for e in waiting if not probe(e, probe_s).serving]
        if not waiting:
            break
        left_s = remaining_s()
        if left_s is not None and left_s < WAIT_POLL_S + probe_s * len(waiting) + WAIT_MARGIN_S:
            raise PsNotReady(f"PS shards not serving in time: {', '.join(waiting)}")
        sleep(WAIT_POLL_S)
    return rounds


def wait_handler(event: dict[str, object], context: object) -> dict[str, int]:
    """Lambda entry point of the run's PS wait: `{"ps_endpoints": ["ip:port", …]}`."""
    endpoints = [str(e) for e in event["ps_endpoints"]]  # type: ignore[attr-defined]
    for endpoint in endpoints:
        wire.parse_endpoint(endpoint)
    rounds = wait_until_serving(endpoints, remaining_s=lambda: aws.remaining_s(context))
    return {"shards": len(endpoints), "rounds": rounds}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m functions.ps_health", description=__doc__.splitlines()[0])
    p.add_argument("endpoint", help="HOST:PORT of the shard")
    p.add_argument("--timeout-s", type=float, default=PROBE_TIMEOUT_S, help="per attempt")
    p.add_argument("--attempts", type=int, default=ATTEMPTS, help="unhealthy after this many")
    p.add_argument("--retry-delay-s", type=float, default=RETRY_DELAY_S)
    p.add_argument(
        "--terminate-pid",
        type=int,
        default=0,
        help="SIGTERM this process when every attempt found the shard listening but not serving",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        wire.parse_endpoint(args.endpoint)
        if args.attempts < 1 or not args.timeout_s > 0 or args.retry_delay_s < 0:
            raise ValueError(
                f"--attempts {args.attempts} / --timeout-s {args.timeout_s} / --retry-delay-s "
                f"{args.retry_delay_s}: expected attempts >= 1, timeout > 0, delay >= 0"
            )
    except ValueError as exc:
        print(f"functions.ps_health: error: {exc}", file=sys.stderr)
        return 2
    results = check(
        args.endpoint,
        attempts=args.attempts,
        timeout_s=args.timeout_s,
        delay_s=args.retry_delay_s,
    )
    if results[-1].serving:
        print(f"healthy: {results[-1].reason}")
        return 0
    print(f"unhealthy after {len(results)} attempt(s): {results[-1].reason}")
    if args.terminate_pid and all(r.listening for r in results):
        print(f"listening but not serving: sending SIGTERM to pid {args.terminate_pid}")
        os.kill(args.terminate_pid, signal.SIGTERM)
    return 1


if __name__ == "__main__":
    sys.exit(main())
