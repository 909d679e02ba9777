"""A pipeline's boundary objects: activations forward and their gradients back, through S3.

Boundary b sits between stage b and stage b+1. Stage s PUTs `act` on boundary s and `grad` on
boundary s-1; it GETs `act` of boundary s-1 and `grad` of boundary s with the S3 exchange's
deadline-bounded poll (functions.polling: each recurring wait learns when its object tends to
arrive), and deletes what it read once the iteration's stage sync is done. Keys
(docs/CONTRACTS.md, "Pipeline stage"):

    exchange_base(f"{boundary_prefix}/b{b:02d}", job_id, run_id)
        + f"/{kind}/{iteration:010d}/{micro:04d}/{replica:04d}"

A body is one tensor in numpy's .npy format (shape and dtype travel with the bytes, and
np.load with allow_pickle=False reads nothing but an array). No LIST: every key is known.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from functions.polling import ArrivalEstimate, poll_for
from functions.s3requests import RequestCounts, counted_delete, counted_get
from functions.s3sync import exchange_base

KINDS = ("act", "grad")  # an activation going forward, its gradient coming back


def boundary_key(
    prefix: str, job_id: str, run_id: str, boundary: int, kind: str, iteration: int,
    micro: int, replica: int,
) -> str:  # fmt: skip
    """The key of one micro-batch's tensor crossing `boundary` (the contract's layout)."""
    if kind not in KINDS:
        raise ValueError(f"boundary object kind {kind!r}: expected one of {KINDS}")
    base = exchange_base(f"{prefix.strip('/')}/b{boundary:02d}", job_id, run_id)
    return f"{base}/{kind}/{iteration:010d}/{micro:04d}/{replica:04d}"


def encode_tensor(array: np.ndarray) -> bytes:
    """One tensor as .npy bytes."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def decode_tensor(body: bytes, what: str) -> np.ndarray:
    """The tensor of .npy bytes; ValueError naming the object if they are not one."""
    try:
        array: np.ndarray = np.load(io.BytesIO(body), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{what}: not a .npy tensor ({exc})") from None
    return array


@dataclass
class BoundaryTimings:
    """One iteration's boundary seconds: waiting for a peer stage's object to appear, and
    moving bytes (uploads, and downloads once the object answered)."""

    wait_s: float = 0.0
    transfer_s: float = 0.0

    def add(self, other: BoundaryTimings) -> None:
        self.wait_s += other.wait_s
        self.transfer_s += other.transfer_s


@dataclass
class Boundaries:
    """One stage worker's boundary objects (replica `replica` of its stage)."""

    s3: Any
    bucket: str
    prefix: str
    job_id: str
    run_id: str
    replica: int
    timeout_s: float
    gap_s: float  # a learned wait's poll gap (functions.polling.cost_balanced_gap_s)
    counts: RequestCounts = field(default_factory=RequestCounts)
    # Each recurring wait's arrival, by (kind, micro-batch): one wait of each per iteration.
    _arrivals: dict[tuple[str, int], ArrivalEstimate] = field(default_factory=dict, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)

    def key(self, boundary: int, kind: str, iteration: int, micro: int) -> str:
        return boundary_key(self.prefix, self.job_id, self.run_id, boundary, kind, iteration,
                            micro, self.replica)  # fmt: skip

    def put(self, boundary: int, kind: str, iteration: int, micro: int,
            array: np.ndarray) -> float:  # fmt: skip
        """Upload one tensor; the seconds it took."""
        t0 = time.perf_counter()
        key = self.key(boundary, kind, iteration, micro)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=encode_tensor(array))
        self.counts.add("put")
        return time.perf_counter() - t0

    def take(
        self, boundary: int, kind: str, iteration: int, micro: int
    ) -> tuple[np.ndarray, BoundaryTimings]:
        """The tensor once a peer stage has put it (deadline: timeout_s, then ExchangeTimeout)
        and where the time went: until the GET that found it answered is waiting, the rest
        (its body and decoding) is transfer."""
        t0 = time.perf_counter()
        key = self.key(boundary, kind, iteration, micro)
        arrival = self._arrivals.setdefault((kind, micro), ArrivalEstimate(self.gap_s))
        polled = poll_for(
            lambda: self._get(key),
            arrival.delays_s(),
            timeout_s=self.timeout_s,
            what=f"s3://{self.bucket}/{key}",
            sleep=self._stop.wait,
            first_poll_s=arrival.first_poll_s or 0.0,
        )
        arrival.learn(polled)
        body, answered = polled.value
        array = decode_tensor(body, f"s3://{self.bucket}/{key}")
        return array, BoundaryTimings(answered - t0, time.perf_counter() - answered)

    def delete(self, inbound: list[tuple[int, str]], iteration: int, micros: int) -> None:
        """Delete micro-batches 0..micros-1 of one iteration on each (boundary, kind) of
        `inbound`, in one request (keys already gone cost nothing more)."""
        keys = [self.key(b, kind, iteration, m) for b, kind in inbound for m in range(micros)]
        counted_delete(self.s3, self.bucket, keys, self.counts)

    def close(self) -> None:
        """Waits in flight end at their next back-off (the link is ending)."""
        self._stop.set()

    def _get(self, key: str) -> tuple[bytes, float] | None:
        """(body, when the GET answered), or None while the key is not there."""
        return counted_get(self.s3, self.bucket, key, self.counts)
