"""The worker's gradient exchange, one interface for both sync modes (docs/CONTRACTS.md).

`functions.worker` runs one BSP loop and calls an Exchange: `start` adopts the iteration the
shared state is at and fills the parameters, `step` hands over this worker's gradient of an
iteration and fills the parameters of the next, `finish` leaves the link's final state where
finalize and the next link read it. `PSExchange` does this over the PS shards
(functions.ps_client); `functions.s3sync.S3Exchange` through objects in S3.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from functions import wire
from functions.ps_client import PSClient

LOG = logging.getLogger("functions.worker")  # the worker's log: these lines are its story


@dataclass
class StepTiming:
    """Where one exchange's time went (seconds); the worker adds them to its Timings."""

    push_s: float = 0.0  # handing the gradient over (sending, or uploading)
    wait_s: float = 0.0  # waiting for the slowest worker (the BSP barrier)
    transfer_s: float = 0.0  # moving the new parameters once they exist
    reduce_s: float = 0.0  # a reducer's averaging and update (s3 mode; its requests are push_s)


class Exchange(Protocol):
    """What the worker loop needs of a sync mode."""

    def start(self, params: np.ndarray) -> int:
        """The iteration to resume at, with its parameters written into `params`."""
        ...

    def step(self, iteration: int, grads: np.ndarray, params: np.ndarray) -> StepTiming:
        """Contribute `grads` of `iteration`; write the parameters of iteration + 1."""
        ...

    def finish(self, iteration: int, reason: str) -> None:
        """End of a link stopped at `iteration` for `reason`: checkpoint what needs it."""
        ...

    def close(self) -> None: ...

    def request_counts(self) -> dict[str, int] | None:
        """Storage requests this link made (s3 mode), None where they are not counted."""
        ...


class PSInconsistent(RuntimeError):
    """PS shards are more than one iteration apart and a rollback to a common checkpoint did
    not bring them together (no checkpoints); restart all shards of the job."""


@dataclass
class PSExchange:
    """Exchange through the PS shards; the PS is the source of truth for the iteration."""

    client: PSClient
    rank: int

    def start(self, params: np.ndarray) -> int:
        """`_sync`, retried while the PS restarts (until the connect deadline): a connection
        accepted by a dying listener is reset during the handshake."""
        deadline = time.monotonic() + self.client.connect_timeout_s
        delay_s = 0.1
        while True:
            try:
                return self._sync(params)
            except wire.PSDisconnected:
                if time.monotonic() + delay_s > deadline:
                    raise
                time.sleep(delay_s)
                delay_s = min(2 * delay_s, 2.0)

    def _sync(self, params: np.ndarray) -> int:
        """(Re)connect, initialise empty shards, adopt the PS iteration, pull its parameters."""
        client = self.client
        iterations = client.connect()
        if not all(it >= 0 for it in iterations):
            client.init_params(params)
            iterations = client.shard_iterations
        if max(iterations) - min(iterations) > 1:
            iterations = self._rollback(iterations)
        lo = min(iterations)
        # A shard one ahead means this worker died after pushing to it; it keeps t-1's
        # parameters and ignores the duplicate gradient, so resuming at the lowest is exact.
        client.pull(lo, params)
        return lo

    def _rollback(self, iterations: list[int]) -> list[int]:
        """Some shards restarted from their checkpoint while the others went on: all go back
        to the newest checkpoint they share and the iterations since are done again."""
        LOG.warning("rank %d: PS shards at iterations %s; rolling back", self.rank, iterations)
        try:
            iterations = self.client.rollback()
        except wire.RemoteError as exc:  # e.g. a PS without checkpoints cannot roll back
            raise PSInconsistent(f"PS shards are at iterations {iterations}: {exc}") from exc
        if max(iterations) - min(iterations) > 1:
            raise PSInconsistent(
                f"PS shards are at iterations {iterations} and share no checkpoint to roll back"
                " to; restart all shards"
            )
        return iterations

    def step(self, iteration: int, grads: np.ndarray, params: np.ndarray) -> StepTiming:
        t0 = time.perf_counter()
        self.client.push(iteration, grads)
        push_s = time.perf_counter() - t0
        timing = self.client.pull(iteration + 1, params)
        return StepTiming(push_s=push_s, wait_s=timing.wait_s, transfer_s=timing.transfer_s)

    def finish(self, iteration: int, reason: str) -> None:
        if self.rank == 0 and reason != "ps_timeout":
            # Rank 0 has not pushed `iteration` yet, so every shard is exactly there: the
            # checkpoint is consistent across shards.
            self.client.checkpoint()

    def close(self) -> None:
        self.client.close()

    def request_counts(self) -> dict[str, int] | None:
        return None
