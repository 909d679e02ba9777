"""The worker's side of the PS protocol: push gradients, pull parameters, each with a deadline.

One long-lived TCP connection per PS shard. The flattened parameter/gradient vectors are split
with `wire.shard_bounds`; each shard's slice is a view of the caller's contiguous float32 array,
sent from and received into that memory directly (no copies).
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

import numpy as np

from functions import wire
from functions.wire import MsgType, PSTimeout


@dataclass
class _Shard:
    endpoint: str
    start: int
    stop: int
    sock: socket.socket | None = None
    iteration: int = -1
    initialized: bool = False


@dataclass
class PullTiming:
    """Where a pull's time went: waiting for the slowest worker vs moving bytes."""

    wait_s: float = 0.0
    transfer_s: float = 0.0


@dataclass
class PSClient:
    """Connections from one worker (or a control client, rank -1) to every shard of a job."""

    endpoints: tuple[str, ...]
    job_id: str
    rank: int
    secret: bytes
    total_params: int
    timeout_s: float = 120.0  # longest any single wait may take (a PULL waits for all workers)
    connect_timeout_s: float = 60.0  # retrying refused connections while a PS (re)starts
    # SGD hyper-parameters this worker was told; the PS refuses a worker that disagrees.
    learning_rate: float | None = None
    momentum: float | None = None
    # The run this client belongs to (functions.runs); required of workers by the PS.
    run_id: str | None = None
    run_started: str | None = None
    # The workers each iteration averages over (the worker's event's n_workers); None: the PS's
    # --workers (a control client, or an old worker).
    n_workers: int | None = None
    _shards: list[_Shard] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        for endpoint in self.endpoints:
            wire.parse_endpoint(endpoint)  # fail early on a malformed endpoint
        n = len(self.endpoints)
        if n == 0:
            raise ValueError("ps_endpoints is empty: expected one 'host:port' per PS shard")
        self._shards = []
        for k, endpoint in enumerate(self.endpoints):
            start, stop = wire.shard_bounds(self.total_params, n, k)
            self._shards.append(_Shard(endpoint, start, stop))

    # -- connection ------------------------------------------------------------------------
    def connect(self) -> list[int]:
        """(Re)connect to every shard and authenticate; returns each shard's iteration."""
        self.close()
        for k, shard in enumerate(self._shards):
            shard.sock = self._open(shard.endpoint)
            welcome = self._handshake(shard.sock, k)
            shard.iteration = int(welcome["iteration"])
            shard.initialized = bool(welcome["initialized"])
        return [s.iteration for s in self._shards]

    def _open(self, endpoint: str) -> socket.socket:
        host, port = wire.parse_endpoint(endpoint)
        deadline = time.monotonic() + self.connect_timeout_s
        delay_s = 0.05
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=self.timeout_s)
                wire.tune_socket(sock)
                return sock
            except OSError as exc:
                if time.monotonic() + delay_s > deadline:
                    raise PSTimeout(
                        f"could not connect to PS {endpoint} within "
                        f"{self.connect_timeout_s:.0f} s: {exc}"
                    ) from exc
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, 1.0)

    def _handshake(self, sock: socket.socket, k: int) -> dict[str, object]:
        deadline = time.monotonic() + self.timeout_s
        header = wire.recv_header(sock, deadline)
        wire.expect(header, sock, deadline, MsgType.CHALLENGE)
        nonce = wire.recv_control(sock, header, deadline)
        hello = json.dumps(
            {
                "job_id": self.job_id,
                "rank": self.rank,
                "shard": k,
                "shards": len(self._shards),
                "total_params": self.total_params,
                "learning_rate": self.learning_rate,
                "momentum": self.momentum,
                "run_id": self.run_id,
                "run_started": self.run_started,
                "n_workers": self.n_workers,
            }
        ).encode()
        mac = wire.hello_mac(self.secret, nonce, hello)
        wire.send_frame(sock, MsgType.HELLO, 0, mac + hello, deadline)
        header = wire.recv_header(sock, deadline)
        wire.expect(header, sock, deadline, MsgType.WELCOME)
        return wire.recv_json(sock, header, deadline)

    def close(self) -> None:
        for shard in self._shards:
            if shard.sock is not None:
                shard.sock.close()
                shard.sock = None

    def _sock(self, shard: _Shard) -> socket.socket:
        if shard.sock is None:
            raise wire.PSDisconnected(f"not connected to PS {shard.endpoint}")
        return shard.sock

    @property
    def shard_iterations(self) -> list[int]:
        return [s.iteration for s in self._shards]

    # -- data plane ------------------------------------------------------------------------
    def init_params(self, params: np.ndarray) -> None:
        """Offer the initial parameters to every shard that has none (first offer wins)."""
        deadline = time.monotonic() + self.timeout_s
        for shard in self._shards:
            if shard.initialized:
                continue
            sock = self._sock(shard)
            wire.send_frame(sock, MsgType.INIT, 0, params[shard.start : shard.stop], deadline)
            header = wire.recv_header(sock, deadline)
            wire.expect(header, sock, deadline, MsgType.ACK)
            shard.iteration, shard.initialized = header.iteration, True

    def push(self, iteration: int, grads: np.ndarray) -> None:
        """Send this worker's gradient for `iteration`, slice by slice, to every shard."""
        self._check_vector(grads)
        deadline = time.monotonic() + self.timeout_s
        for shard in self._shards:
            wire.send_frame(
                self._sock(shard),
                MsgType.PUSH,
                iteration,
                grads[shard.start : shard.stop],
                deadline,
            )

    def pull(self, iteration: int, out: np.ndarray) -> PullTiming:
        """Receive the parameters of `iteration` into `out`; waits for the BSP barrier."""
        self._check_vector(out)
        timing = PullTiming()
        deadline = time.monotonic() + self.timeout_s
        for shard in self._shards:  # ask every shard first so their waits overlap
            wire.send_frame(self._sock(shard), MsgType.PULL, iteration, b"", deadline)
        for shard in self._shards:
            sock = self._sock(shard)
            t0 = time.perf_counter()
            header = wire.recv_header(sock, deadline)
            t1 = time.perf_counter()
            wire.expect(header, sock, deadline, MsgType.PARAMS)
            if header.iteration != iteration:
                raise wire.WireError(f"asked for iteration {iteration}, got {header.iteration}")
            wire.recv_payload_into(sock, header, out[shard.start : shard.stop], deadline)
            timing.wait_s += t1 - t0
            timing.transfer_s += time.perf_counter() - t1
            shard.iteration = max(shard.iteration, iteration)
        return timing

    def checkpoint(self) -> list[int]:
        """Ask every shard to checkpoint now; returns the iteration each one saved."""
        return [int(status["checkpoint_iteration"]) for status in self._control(MsgType.CHECKPOINT)]

    def status(self) -> list[dict[str, object]]:
        return self._control(MsgType.STATUS)

    def rollback(self) -> list[int]:
        """Ask every shard to reload the newest checkpoint they all have; their iterations."""
        iterations = [int(status["iteration"]) for status in self._control(MsgType.ROLLBACK)]
        for shard, it in zip(self._shards, iterations, strict=True):
            shard.iteration = it
        return iterations

    def _control(self, kind: MsgType) -> list[dict[str, object]]:
        deadline = time.monotonic() + self.timeout_s
        out = []
        for shard in self._shards:
            sock = self._sock(shard)
            wire.send_frame(sock, kind, 0, b"", deadline)
            header = wire.recv_header(sock, deadline)
            wire.expect(header, sock, deadline, MsgType.ACK)
            out.append(wire.recv_json(sock, header, deadline))
        return out

    def _check_vector(self, vec: np.ndarray) -> None:
        if vec.dtype != np.float32 or vec.shape != (self.total_params,):
            raise ValueError(
                f"vector of {vec.dtype} {vec.shape}, expected float32 ({self.total_params},)"
            )

    def __enter__(self) -> PSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
