"""A shard's settings (`PSConfig`, one field per flag of `python -m functions.ps`)."""

from __future__ import annotations

from dataclasses import dataclass

from functions.runs import Run

HANDSHAKE_TIMEOUT_S = 5.0  # an unauthenticated peer gets this long to prove itself
MAX_UNAUTHENTICATED = 32  # connections in the handshake at once; a new one evicts the oldest


@dataclass(frozen=True)
class PSConfig:
    """Everything a shard needs; mirrors the CLI flags."""

    job_id: str
    shard: int
    shards: int
    workers: int
    secret: bytes
    host: str = "127.0.0.1"
    port: int = 0
    model: str = ""
    seed: int = 0
    learning_rate: float = 0.01
    momentum: float = 0.9
    artifacts_bucket: str = ""
    checkpoint_prefix: str = ""
    checkpoint_every: int = 0  # iterations between periodic checkpoints; 0 = only on request
    idle_timeout_s: float = 900.0  # an authenticated worker may compute this long between frames
    wait_timeout_s: float = 900.0  # longest a PULL waits for the other workers
    max_shard_mb: float = 4096.0  # bound on a shard's size before INIT fixes it exactly
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    # The run to serve from the start (the emulator and tests know it); None: the first worker's
    # HELLO names it (on EC2 the instance outlives runs, so the run comes with the workers).
    run: Run | None = None
