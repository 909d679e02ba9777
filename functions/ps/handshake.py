"""A connection's handshake: CHALLENGE (a nonce), HELLO (signed with the job secret over the
nonce, every key type-checked, then held against this shard's job, shard and SGD settings),
WELCOME (the shard's iteration and size). Refusals are AuthError or WireError."""

from __future__ import annotations

import logging
import math
import secrets as pysecrets
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np

from functions import wire
from functions.ps.config import PSConfig
from functions.ps.state import ShardState
from functions.runs import Run, parse_run
from functions.wire import MsgType

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hello:
    """A client's HELLO, type-checked (see `parse_hello`)."""

    job_id: str
    rank: int  # -1: a control client (status, checkpoint, rollback); 0..n-1: a worker
    shard: int
    shards: int
    total_params: int  # 0 from a control client
    learning_rate: float | None = None
    momentum: float | None = None
    run: Run | None = None  # required from workers; control clients may omit it
    # the workers this worker's iteration averages over (its event's n_workers: a run that
    # re-plans may change it between iterations); None from an old client: the PS's --workers
    n_workers: int | None = None


def _hello_int(value: dict[str, Any], name: str, default: int | None = None) -> int:
    got = value.get(name, default)
    if got is None:
        raise wire.WireError(f"HELLO lacks {name!r}: expected an integer")
    if type(got) is not int:  # bool is an int subclass, and 1.5 or "1" are not ranks
        raise wire.WireError(f"HELLO {name} {got!r}: expected an integer")
    return got


def _hello_number(value: dict[str, Any], name: str) -> float | None:
    got = value.get(name)
    if got is None:
        return None
    if type(got) not in (int, float) or not math.isfinite(got):
        raise wire.WireError(f"HELLO {name} {got!r}: expected a finite number or null")
    return float(got)


def parse_hello(raw: bytes) -> Hello:
    """The HELLO JSON object with the type of every key checked; raises WireError naming the
    first bad key (a list, a string, a non-integer rank: each is one ERROR frame, no more)."""
    value = wire.parse_json(raw, "HELLO")
    if not isinstance(value, dict):
        raise wire.WireError(f"HELLO must be a JSON object, got a JSON {type(value).__name__}")
    job_id = value.get("job_id")
    if not isinstance(job_id, str):
        raise wire.WireError(f"HELLO job_id {job_id!r}: expected a string")
    total = _hello_int(value, "total_params", 0)
    if total < 0:
        raise wire.WireError(f"HELLO total_params {total}: expected an integer >= 0")
    rank = _hello_int(value, "rank")
    run = None
    if value.get("run_id") is not None or rank >= 0:
        try:
            run = parse_run(value.get("run_id"), value.get("run_started"))
        except ValueError as exc:
            raise wire.WireError(f"HELLO {exc}") from None
    return Hello(
        job_id=job_id,
        rank=rank,
        shard=_hello_int(value, "shard"),
        shards=_hello_int(value, "shards"),
        total_params=total,
        learning_rate=_hello_number(value, "learning_rate"),
        momentum=_hello_number(value, "momentum"),
        run=run,
        n_workers=None if value.get("n_workers") is None else _hello_int(value, "n_workers"),
    )


def authenticate(conn: socket.socket, cfg: PSConfig, deadline: float) -> Hello:
    """Challenge the peer and check its HELLO: the MAC first, then every claim it makes."""
    nonce = pysecrets.token_bytes(wire.NONCE_BYTES)
    wire.send_frame(conn, MsgType.CHALLENGE, 0, nonce, deadline)
    header = wire.recv_header(conn, deadline)
    wire.expect(header, conn, deadline, MsgType.HELLO)
    raw = wire.recv_control(conn, header, deadline)
    if len(raw) <= wire.MAC_BYTES:
        raise wire.AuthError("HELLO too short to carry an HMAC")
    mac, hello_bytes = raw[: wire.MAC_BYTES], raw[wire.MAC_BYTES :]
    if not wire.check_mac(cfg.secret, nonce, hello_bytes, mac):
        raise wire.AuthError("HMAC mismatch: wrong shared secret")
    hello = parse_hello(hello_bytes)
    if hello.job_id != cfg.job_id:
        raise wire.AuthError(f"job id {hello.job_id!r} is not this PS's job")
    rank = hello.rank
    hyper = (hello.learning_rate, hello.momentum)
    if rank >= 0 and hyper != (None, None) and hyper != (cfg.learning_rate, cfg.momentum):
        # Both sides are told the SGD hyper-parameters; a mismatch is a deployment bug.
        raise wire.WireError(
            f"worker expects learning rate/momentum {hyper}, this PS runs "
            f"{(cfg.learning_rate, cfg.momentum)}"
        )
    n = cfg.workers if hello.n_workers is None else hello.n_workers
    if not 1 <= n <= cfg.workers:
        raise wire.WireError(f"n_workers {n} out of range 1..{cfg.workers} (the PS's --workers)")
    if not -1 <= rank < n:
        raise wire.WireError(f"rank {rank} out of range -1..{n - 1}")
    if hello.shard != cfg.shard or hello.shards != cfg.shards:
        raise wire.WireError(
            f"client expects shard {hello.shard}/{hello.shards}, "
            f"this is shard {cfg.shard}/{cfg.shards}"
        )
    return hello


def welcome(
    conn: socket.socket, cfg: PSConfig, st: ShardState, hello: Hello, deadline: float
) -> np.ndarray:
    """Check the model's size against the shard's, send WELCOME; returns the connection's
    receive buffer (allocated once per connection; control clients need none)."""
    rank, total = hello.rank, hello.total_params
    with st.cond:
        if st.initialized and total and total != st.total_params:
            raise wire.WireError(f"model of {total} parameters, this job has {st.total_params}")
        start, stop = wire.shard_bounds(total or st.total_params, cfg.shards, cfg.shard)
        if (stop - start) * 4 > cfg.max_shard_mb * 1e6:
            raise wire.WireError(f"shard of {stop - start} floats exceeds --max-shard-mb")
        reply = {
            "iteration": st.iteration,
            "initialized": st.initialized,
            "shard_size": stop - start,
            "total_params": st.total_params or total,
        }
    wire.send_json(conn, MsgType.WELCOME, reply["iteration"], reply, deadline)
    buf = np.empty(stop - start if rank >= 0 and total else 0, np.float32)
    LOG.info(
        "rank %d of run %s authenticated (shard at iteration %d)", rank, hello.run, st.iteration
    )
    return buf
