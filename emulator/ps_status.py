"""Ask a PS shard where training is, as a control client (rank -1), for the progress bar.

Workers report only when an invocation ends; the PS knows the current iteration at all times,
and how long its updates took (the model's PS aggregation term).
This uses the runtime's own wire protocol and handshake (`functions.wire`), authenticated with
the job's secret like any worker; a control connection never pushes or pulls.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from functions import wire
from functions.wire import MsgType


def query_status(
    endpoint: str, *, job_id: str, shard: int, shards: int, secret: bytes, timeout_s: float = 2.0
) -> dict[str, Any]:
    """The shard's STATUS object (iteration, updates_applied, ...); raises OSError/wire errors."""
    host, port = wire.parse_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        header = wire.recv_header(sock, deadline)
        wire.expect(header, sock, deadline, MsgType.CHALLENGE)
        nonce = wire.recv_control(sock, header, deadline)
        hello = json.dumps(
            {"job_id": job_id, "rank": -1, "shard": shard, "shards": shards, "total_params": 0}
        ).encode()
        wire.send_frame(
            sock, MsgType.HELLO, 0, wire.hello_mac(secret, nonce, hello) + hello, deadline
        )
        header = wire.recv_header(sock, deadline)
        wire.expect(header, sock, deadline, MsgType.WELCOME)
        wire.recv_json(sock, header, deadline)
        wire.send_json(sock, MsgType.STATUS, 0, {}, deadline)
        header = wire.recv_header(sock, deadline)
        wire.expect(header, sock, deadline, MsgType.ACK)
        return wire.recv_json(sock, header, deadline)


def current_iteration(endpoint: str, *, job_id: str, shards: int, secret: bytes) -> int | None:
    """Shard 0's iteration (all shards move together under BSP), or None if it cannot say."""
    try:
        status = query_status(endpoint, job_id=job_id, shard=0, shards=shards, secret=secret)
    except (OSError, wire.WireError, wire.RemoteError, ValueError):
        return None
    iteration = status.get("iteration")
    return int(iteration) if isinstance(iteration, int) and iteration >= 0 else None


def update_seconds(endpoints: list[str], *, job_id: str, secret: bytes) -> float | None:
    """The PS aggregation the model predicts, measured: the slowest shard's total update time
    (shards update in parallel). None if a shard cannot say."""
    seconds = []
    for shard, endpoint in enumerate(endpoints):
        try:
            status = query_status(
                endpoint, job_id=job_id, shard=shard, shards=len(endpoints), secret=secret
            )
        except (OSError, wire.WireError, wire.RemoteError, ValueError):
            return None
        value = status.get("update_s")
        if not isinstance(value, int | float):
            return None
        seconds.append(float(value))
    return max(seconds, default=None)
