"""One parameter-server shard: BSP aggregation and SGD-with-momentum over a slice of the model.

Run as `python -m functions.ps --job-id J --shard 0 --shards 2 --workers 4 --port 0 ...`; it prints
`READY host:port` on stdout once it listens.

State: the shard's parameters for the current iteration t, the parameters of t-1 (kept so a
worker that resumes one iteration behind can still compute its gradient for t-1), the momentum
buffer, and the gradients received for iteration t (one buffer per rank, received into
directly and summed in one cache-blocked pass together with the update once all n are in).
Rules that make restarts safe:

- a gradient for an iteration already applied (i < t), or a second gradient from the same rank
  for the current iteration, is ignored: a worker that died after pushing and recomputes the same
  deterministic batch changes nothing;
- when all n ranks have pushed for t, the average is applied exactly as torch.optim.SGD does
  (buf = momentum·buf + g; p = p − lr·buf, dampening 0, no Nesterov, no weight decay) and t += 1;
- PULL(i) waits until t ≥ i and serves the parameters of i (t or t-1);
- checkpoints (params, momentum, t) go to S3 every N iterations and on request; at start the
  shard restores the newest iteration that *every* shard of the job has checkpointed, so shards
  restarted together agree.

The PS never sees the model: the first authenticated worker sends its shard of the (seeded,
deterministic) initial parameters (INIT). Threads, one per connection: recv_into and numpy
releases the GIL, so the shard keeps up with loopback speeds.

When only some shards restart (a crashed process, a rebooted instance), they come back at the
newest common checkpoint while their peers are further on. A worker that sees shards more than
one iteration apart sends ROLLBACK: every shard reloads that same checkpoint (a no-op for those
already there), drops its other connections so every worker re-syncs, and training repeats the
iterations since the checkpoint with the same deterministic batches. After each checkpoint a
shard deletes its own checkpoints older than the newest common one, so the rollback target is
always there.

The shard never stops accepting: an accept() that fails for lack of file descriptors
(EMFILE/ENFILE) is retried with a back-off and logged once, and at most `max_unauthenticated`
connections may sit in the handshake (each for at most `handshake_timeout_s`; a new one evicts
the oldest), so idle or slow peers cannot exhaust the descriptors. `python -m functions.ps_health`
is the liveness check (a connection must be answered with a CHALLENGE).

A shard serves one run of the job at a time (functions/runs.py): the first HELLO naming a run
enters it, restoring that run's own newest common checkpoint (`<prefix>/<run id>/...`), if any;
a HELLO of a run that started later forgets the parameters, drops the other connections and
enters the newer run; a HELLO or request of an older run is refused. An instance outlives its
runs, so a re-run never resumes the previous run's final iteration.

Each checkpoint carries an HMAC-SHA256 over its key and bytes with the job secret (S3 user
metadata); one that does not verify is refused, logged with its key, and moved aside to
`<key>.rejected`, so every shard's listing skips it and the shard falls back to the newest
common checkpoint that verifies, or starts fresh (waits for INIT) if none does.

Known limit: a periodic checkpoint is uploaded by the thread that completed the iteration, so
it delays that one worker's next pull.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import errno
import hashlib
import hmac
import io
import logging
import math
import os
import re
import resource
import secrets as pysecrets
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from functions import wire
from functions.aws import S3Unreachable, list_keys, naming_s3_failures
from functions.runs import Run, parse_run, run_checkpoint_prefix
from functions.wire import MsgType

LOG = logging.getLogger("functions.ps")
HANDSHAKE_TIMEOUT_S = 5.0  # an unauthenticated peer gets this long to prove itself
MAX_UNAUTHENTICATED = 32  # connections in the handshake at once; a new one evicts the oldest
ACCEPT_BACKOFF_S = (0.05, 1.0)  # first and longest wait after accept() failed
# accept() errors that mean "out of resources, try again later", not "the listener is gone".
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
CHECKPOINT_MAC_META = "ldnn-hmac-sha256"  # S3 user metadata key of a checkpoint's HMAC
UPDATE_BLOCK = 1 << 18  # floats per block of the SGD update (1 MiB per array)
UPDATE_THREADS = max(1, min(4, os.cpu_count() or 1))
# The job id a HELLO must name: provisioner.parse.JOB_NAME_PATTERN (the image does not ship the
# planner; a test holds the two equal). An empty id would admit HELLOs that name no job.
JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,31}")
JOB_ID_FORMS = "1-32 letters, digits or hyphens starting with a letter, e.g. digits-demo"
# Far past any account's Lambda concurrency: a larger count is a typo, and a shard waits for
# every one of them each iteration.
MAX_WORKERS = 100_000
# S3's rule for bucket names (lowercase letters, digits, dots, hyphens; 3-63 characters).
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


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


def sgd_momentum(
    params: np.ndarray,
    scaled_momentum: np.ndarray,
    grad_sum: np.ndarray,
    out: np.ndarray,
    *,
    momentum: np.float32,
    step: np.float32,
) -> None:
    """torch.optim.SGD(momentum) on the mean of n gradients given their sum S, as every shard
    (PS or S3 reducer) applies it: B = n·buf is held, B = m·B + S in place, out = p + step·B
    with step = −lr/n (`out` must not be `params`)."""
    scaled_momentum *= momentum
    scaled_momentum += grad_sum
    np.multiply(scaled_momentum, step, out=out)
    out += params


class ShardState:
    """Parameters, momentum and the pending gradients of one shard, guarded by one condition."""

    def __init__(self, config: PSConfig) -> None:
        self.config = config
        self.cond = threading.Condition()
        self.total_params = 0
        self.iteration = -1  # -1 until INIT or a restored checkpoint
        self.params = np.empty(0, np.float32)
        self.prev_params = np.empty(0, np.float32)
        self.momentum_buf = np.empty(0, np.float32)
        # rank → the gradient buffer it pushed for the current iteration. The buffer is the
        # connection's own receive buffer, lent until the update; see `is_lent`.
        self.pending: dict[int, np.ndarray] = {}
        self._block_sums = [np.empty(UPDATE_BLOCK, np.float32) for _ in range(UPDATE_THREADS)]
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.checkpointed_iteration = -1
        self.updates_applied = 0
        self.duplicates_ignored = 0
        self.generation = 0  # bumped whenever parameters are (re)installed: ends stale waits
        self.update_s = 0.0  # time spent averaging and applying updates (the model's PS term)
        self.rollbacks = 0

    @property
    def received(self) -> set[int]:
        return set(self.pending)

    def is_lent(self, buf: np.ndarray) -> bool:
        """True while `buf` holds a pending gradient (a connection must not receive into it)."""
        return any(pending is buf for pending in self.pending.values())

    @property
    def initialized(self) -> bool:
        return self.iteration >= 0

    @property
    def shard_size(self) -> int:
        return int(self.params.size)

    def adopt(self, total_params: int, params: np.ndarray, momentum: np.ndarray, it: int) -> None:
        """Install parameters (from INIT or a checkpoint). Caller holds the condition."""
        self.total_params = total_params
        self.params = np.ascontiguousarray(params, np.float32).copy()
        self.prev_params = self.params.copy()
        # Held scaled by n (the sum, not the mean, of the gradients goes in): saves a pass.
        self.momentum_buf = np.ascontiguousarray(momentum, np.float32) * np.float32(
            self.config.workers
        )
        self.pending = {}
        self.iteration = it
        self.generation += 1
        self.cond.notify_all()

    def clear(self) -> None:
        """Forget the parameters (a new run starts): back to waiting for INIT or a restore.
        Waits for a later iteration end (the generation changes). Caller holds the condition."""
        self.total_params = 0
        self.params = self.prev_params = self.momentum_buf = np.empty(0, np.float32)
        self.pending = {}
        self.iteration = -1
        self.checkpointed_iteration = -1
        self.generation += 1
        self.cond.notify_all()

    def momentum(self) -> np.ndarray:
        """The momentum buffer as torch.optim.SGD holds it (a copy)."""
        return self.momentum_buf / np.float32(self.config.workers)

    def add_gradient(self, rank: int, it: int, grad: np.ndarray) -> bool:
        """Take one rank's gradient for `it` (by reference); update when all n are in.

        Returns False for a duplicate (already applied, or this rank already counted), which
        is ignored. Caller holds the condition.
        """
        if it < self.iteration or rank in self.pending:
            self.duplicates_ignored += 1
            return False
        if it > self.iteration:
            raise wire.WireError(
                f"gradient for iteration {it} but the shard is at {self.iteration}"
            )
        self.pending[rank] = grad
        if len(self.pending) == self.config.workers:
            self._apply_update()
        return True

    def _apply_update(self) -> None:
        """torch.optim.SGD(momentum) on the averaged gradient; swaps the parameter buffers.

        With g the mean gradient, torch does buf = m·buf + g; p = p − lr·buf. Holding
        B = n·buf and the sum S = n·g gives B = m·B + S; p = p − (lr/n)·B: the same update
        (up to float rounding) with one pass fewer over the shard. The n gradients are summed
        block by block (in rank order, so rounding does not depend on arrival order) inside the
        same cache-sized loop as the update: each buffer is read once.
        """
        started_s = time.perf_counter()
        grads = [self.pending[r] for r in sorted(self.pending)]
        new = self.prev_params  # t-1 is no longer needed once t+1 exists
        size = self.params.size
        # Large shards are split across the CPU's cores (numpy releases the GIL per block).
        parts = max(1, min(UPDATE_THREADS, size // (4 * UPDATE_BLOCK)))
        bounds = [(size * k // parts, size * (k + 1) // parts) for k in range(parts)]
        if parts == 1:
            self._update_range(grads, new, 0, size, self._block_sums[0])
        else:
            futures = [
                self._pool().submit(self._update_range, grads, new, lo, hi, self._block_sums[k])
                for k, (lo, hi) in enumerate(bounds)
            ]
            for future in futures:
                future.result()
        self.prev_params, self.params = self.params, new
        self.iteration += 1
        self.pending = {}
        self.updates_applied += 1
        self.update_s += time.perf_counter() - started_s
        self.cond.notify_all()

    def _update_range(
        self, grads: list[np.ndarray], new: np.ndarray, lo: int, hi: int, block_sum: np.ndarray
    ) -> None:
        """The update on [lo, hi), in cache-sized blocks: the passes hit L2, not memory."""
        momentum = np.float32(self.config.momentum)
        step = np.float32(-self.config.learning_rate / self.config.workers)
        for start in range(lo, hi, UPDATE_BLOCK):
            block = slice(start, min(start + UPDATE_BLOCK, hi))
            if len(grads) == 1:
                grad_sum = grads[0][block]
            else:
                grad_sum = block_sum[: block.stop - block.start]
                np.add(grads[0][block], grads[1][block], out=grad_sum)
                for g in grads[2:]:
                    grad_sum += g[block]
            sgd_momentum(self.params[block], self.momentum_buf[block], grad_sum, new[block],
                         momentum=momentum, step=step)  # fmt: skip

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                UPDATE_THREADS, thread_name_prefix="ps-update"
            )
        return self._executor

    def params_for(self, it: int) -> np.ndarray:
        """Parameters of iteration `it` (t or t-1). Caller holds the condition."""
        if it == self.iteration:
            return self.params
        if it == self.iteration - 1:
            return self.prev_params
        raise wire.WireError(
            f"parameters of iteration {it} are not held (shard at {self.iteration})"
        )


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
    )


class CheckpointRejected(RuntimeError):
    """A checkpoint whose HMAC is missing or does not match its key and bytes."""


def checkpoint_mac(secret: bytes, key: str, body: bytes) -> str:
    """HMAC-SHA256 (hex) of a checkpoint, bound to its key: a file copied under another
    shard's or iteration's key does not verify. The label keeps it apart from handshake MACs."""
    message = b"ldnn-ps-checkpoint\0" + key.encode() + b"\0" + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class CheckpointStore:
    """PS checkpoints in S3: `<prefix>/ps-shard-KKK-of-NNN/iter-TTTTTTTTTT.npz`, each with its
    HMAC (job secret) in the object's user metadata, verified on every load."""

    KEY_RE = re.compile(r"ps-shard-(\d{3})-of-(\d{3})/iter-(\d{10})\.npz$")

    def __init__(self, s3: Any, bucket: str, prefix: str, shards: int, *, secret: bytes) -> None:
        self.s3, self.bucket, self.shards, self.secret = s3, bucket, shards, secret
        self.prefix = prefix.strip("/")

    def key(self, shard: int, iteration: int) -> str:
        base = f"{self.prefix}/" if self.prefix else ""
        return f"{base}ps-shard-{shard:03d}-of-{self.shards:03d}/iter-{iteration:010d}.npz"

    def save(
        self,
        shard: int,
        iteration: int,
        total_params: int,
        params: np.ndarray,
        momentum: np.ndarray,
    ) -> str:
        buf = io.BytesIO()
        np.savez(
            buf,
            params=params,
            momentum=momentum,
            iteration=np.int64(iteration),
            total_params=np.int64(total_params),
        )
        key, body = self.key(shard, iteration), buf.getvalue()
        mac = checkpoint_mac(self.secret, key, body)
        self.s3.put_object(
            Bucket=self.bucket, Key=key, Body=body, Metadata={CHECKPOINT_MAC_META: mac}
        )
        return key

    def iterations_by_shard(self) -> dict[int, set[int]]:
        found: dict[int, set[int]] = {k: set() for k in range(self.shards)}
        base = f"{self.prefix}/" if self.prefix else ""
        for key in list_keys(self.s3, self.bucket, f"{base}ps-shard-"):
            match = self.KEY_RE.search(key)
            if match and int(match.group(2)) == self.shards:
                found.setdefault(int(match.group(1)), set()).add(int(match.group(3)))
        return found

    def latest_common_iteration(self, found: dict[int, set[int]] | None = None) -> int | None:
        """Newest iteration checkpointed by every shard (of `found`, else listed now), or None."""
        sets = list((found if found is not None else self.iterations_by_shard()).values())
        common = set.intersection(*sets) if sets else set()
        return max(common) if common else None

    def prune(
        self, shard: int, keep_from: int, found: dict[int, set[int]] | None = None
    ) -> list[int]:
        """Delete `shard`'s checkpoints older than `keep_from`; returns the iterations deleted.

        Only ever called with `keep_from` = the newest iteration every shard has: restore reads
        exactly that one, and no shard deletes anything at or after it, so a restore in
        progress on another shard still finds its file. `found` is a listing already made.
        """
        listing = found if found is not None else self.iterations_by_shard()
        stale = sorted(i for i in listing.get(shard, set()) if i < keep_from)
        for i in stale:
            self.s3.delete_object(Bucket=self.bucket, Key=self.key(shard, i))
        return stale

    def load(self, shard: int, iteration: int) -> dict[str, np.ndarray]:
        """The checkpoint's arrays; raises CheckpointRejected before parsing unverified bytes."""
        key = self.key(shard, iteration)
        response = self.s3.get_object(Bucket=self.bucket, Key=key)
        body = response["Body"].read()
        mac = response.get("Metadata", {}).get(CHECKPOINT_MAC_META, "")
        if not hmac.compare_digest(checkpoint_mac(self.secret, key, body), str(mac)):
            reason = "has no HMAC" if not mac else "HMAC does not match its key and bytes"
            raise CheckpointRejected(f"s3://{self.bucket}/{key} {reason}")
        with np.load(io.BytesIO(body)) as data:
            return {name: data[name] for name in data.files}

    def quarantine(self, shard: int, iteration: int) -> str:
        """Move a refused checkpoint to `<key>.rejected` (kept for inspection, out of every
        listing, so all shards agree it is gone); returns the new key."""
        key = self.key(shard, iteration)
        self.s3.copy_object(
            Bucket=self.bucket,
            Key=f"{key}.rejected",
            CopySource={"Bucket": self.bucket, "Key": key},
        )
        self.s3.delete_object(Bucket=self.bucket, Key=key)
        return f"{key}.rejected"


class ParameterServer:
    """A TCP server for one shard; `start()` binds and serves in background threads."""

    def __init__(self, config: PSConfig, s3: Any = None) -> None:
        self.config = config
        self.state = ShardState(config)
        self.store: CheckpointStore | None = None
        self.run: Run | None = None  # the run served; set by `enter_run`
        self.superseded_runs = 0  # runs this shard left for a newer one
        if config.artifacts_bucket and s3 is None:
            from functions.aws import s3_client

            s3 = s3_client()
        self._s3 = s3
        self.store = self._store_for(None)
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        # Connections still in the handshake, oldest first (a dict keeps insertion order).
        self._unauthenticated: dict[socket.socket, None] = {}
        self._conns_lock = threading.Lock()
        self._ckpt_lock = threading.Lock()
        self.rejected_connections = 0
        self.truncated_frames = 0
        self.evicted_handshakes = 0
        self.accept_errors = 0
        self._accept_errors_logged: set[int] = set()  # errnos already logged (once each)
        self.restored_iteration: int | None = None
        self.address: tuple[str, int] = (config.host, config.port)

    # -- runs ------------------------------------------------------------------------------
    def _store_for(self, run: Run | None) -> CheckpointStore | None:
        """The checkpoints of `run` (the job's prefix itself before any run is known)."""
        if not self.config.artifacts_bucket:
            return None
        base = self.config.checkpoint_prefix
        return CheckpointStore(
            self._s3,
            self.config.artifacts_bucket,
            run_checkpoint_prefix(base, run.id) if run is not None else base,
            self.config.shards,
            secret=self.config.secret,
        )

    def enter_run(self, run: Run, keep: socket.socket | None = None) -> None:
        """Serve `run` from now on: the run already served is kept; a newer one replaces it (its
        parameters are forgotten, its connections but `keep` dropped, and the newer run's own
        newest checkpoint, if any, restored); an older one is refused with AuthError."""
        with self._ckpt_lock:  # one switch at a time, never during an upload or a restore
            current = self.run
            if current == run:
                return
            if current is not None and run < current:
                raise wire.AuthError(f"run {run} was superseded by run {current} on this PS")
            self.run, self.store = run, self._store_for(run)
            with self.state.cond:
                self.state.clear()
            if current is not None:
                self.superseded_runs += 1
                LOG.warning("shard %d: run %s supersedes run %s", self.config.shard, run, current)
            self.restored_iteration = self._restore_locked()
        with self._conns_lock:
            others = [c for c in self._conns if c is not keep and c not in self._unauthenticated]
        for conn in others:  # their threads see the connection end (a later request is refused)
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _check_run(self, run: Run | None) -> None:
        """A connection authenticated for `run` may go on only while that run is served."""
        if run is not None and run != self.run:
            raise wire.AuthError(f"run {run} was superseded by run {self.run} on this PS")

    # -- lifecycle -------------------------------------------------------------------------
    def restore(self) -> int | None:
        """Load the newest checkpoint every shard has; returns its iteration or None."""
        with self._ckpt_lock:  # never interleaved with an upload or another restore
            return self._restore_locked()

    def _restore_locked(self) -> int | None:
        """`restore` for a caller that holds the checkpoint lock."""
        if self.store is None:
            return None
        it = self._adopt_newest_verified()
        if it is None:
            LOG.info(
                "shard %d: no verified common checkpoint of run %s, waiting for INIT",
                self.config.shard,
                self.run,
            )
        return it

    def rollback(self, keep: socket.socket | None = None) -> int:
        """ROLLBACK: go to the newest common checkpoint unless already there; returns the
        shard's iteration afterwards. Every connection but `keep` is dropped when the state
        changed, so each worker re-syncs (a PULL waiting for a later iteration ends too).
        Several workers asking at once roll back once: the check and the load share a lock.
        """
        if self.store is None:
            raise wire.WireError("ROLLBACK without checkpoints (no artifacts bucket)")
        with self._ckpt_lock:
            target = self.store.latest_common_iteration()
            with self.state.cond:
                if target is None or target == self.state.iteration:
                    return self.state.iteration
            restored = self._adopt_newest_verified(target)
            with self.state.cond:
                if restored is None:  # every candidate was refused: keep what is held
                    return self.state.iteration
                target = restored
                self.state.rollbacks += 1
        LOG.warning("shard %d rolled back to common checkpoint %d", self.config.shard, target)
        with self._conns_lock:
            others = [c for c in self._conns if c is not keep]
        for conn in others:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        return target

    def _adopt_newest_verified(self, newest: int | None = None) -> int | None:
        """Install the newest common checkpoint whose HMAC verifies; its iteration, or None.

        `newest`: the newest common iteration when the caller has just listed it (one LIST
        fewer). A refused one is logged with its key and quarantined, which removes it from
        every shard's listing: the next candidate is one that all shards still hold. Caller
        holds the checkpoint lock.
        """
        assert self.store is not None
        it = newest if newest is not None else self.store.latest_common_iteration()
        while it is not None:
            try:
                self._adopt_checkpoint(it)
                return it
            except CheckpointRejected as exc:
                moved = self.store.quarantine(self.config.shard, it)
                LOG.error(
                    "shard %d refused checkpoint %s; moved to %s, falling back to an older one",
                    self.config.shard,
                    exc,
                    moved,
                )
            it = self.store.latest_common_iteration()
        return None

    def _adopt_checkpoint(self, it: int) -> None:
        """Install this shard's checkpoint of `it`. Caller holds the checkpoint lock."""
        assert self.store is not None
        data = self.store.load(self.config.shard, it)
        with self.state.cond:
            self.state.adopt(int(data["total_params"]), data["params"], data["momentum"], it)
            self.state.checkpointed_iteration = it
        LOG.info("shard %d restored iteration %d from checkpoint", self.config.shard, it)

    def start(self) -> tuple[str, int]:
        if self.config.run is not None:
            self.enter_run(self.config.run)
        listener = socket.create_server((self.config.host, self.config.port), reuse_port=False)
        listener.settimeout(0.2)
        self._listener = listener
        self.address = listener.getsockname()[:2]
        thread = threading.Thread(target=self._accept_loop, name="ps-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self.address

    def stop(self) -> None:
        """Stop accepting, close every connection, join the accept thread (no checkpoint)."""
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        with self._conns_lock:
            for conn in list(self._conns):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        with self.state.cond:
            self.state.cond.notify_all()
            if self.state._executor is not None:
                self.state._executor.shutdown(wait=False)
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept_loop(self) -> None:
        """Accept until stopped. No error ends the loop: a shard that cannot accept is alive
        but useless (no worker, status query or finalize gets in, and no restart fires)."""
        assert self._listener is not None
        backoff_s = ACCEPT_BACKOFF_S[0]
        while not self._stop.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._stop.is_set():  # stop() closed the listener
                    break
                self._note_accept_error(exc, backoff_s)
                # The connection stays in the kernel's backlog; it is accepted once a
                # descriptor is free (a handshake times out or a peer leaves).
                self._stop.wait(backoff_s)
                backoff_s = min(2 * backoff_s, ACCEPT_BACKOFF_S[1])
                continue
            backoff_s = ACCEPT_BACKOFF_S[0]
            self._admit(conn, peer)

    def _note_accept_error(self, exc: OSError, backoff_s: float) -> None:
        """Count every failed accept(); log each kind once (it may repeat thousands of times)."""
        self.accept_errors += 1
        code = exc.errno or 0
        if code in self._accept_errors_logged:
            return
        self._accept_errors_logged.add(code)
        soft_fds, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        kind = "out of resources" if code in RESOURCE_ERRNOS else "unexpected error"
        LOG.error(
            "shard %d cannot accept a connection (%s: %s; open-file limit %d, %d connections "
            "held); retrying with back-off from %.2f s, further errors counted in STATUS "
            "accept_errors",
            self.config.shard,
            kind,
            exc,
            soft_fds,
            len(self._conns),
            backoff_s,
        )

    def _admit(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        """Serve `conn` in its own thread; past the cap, the oldest unauthenticated connection
        is dropped (an honest client authenticates in one round trip, an idle one never does)."""
        with self._conns_lock:
            self._conns.add(conn)
            self._unauthenticated[conn] = None
            evicted = []
            while len(self._unauthenticated) > self.config.max_unauthenticated:
                oldest = next(iter(self._unauthenticated))
                del self._unauthenticated[oldest]
                evicted.append(oldest)
            self.evicted_handshakes += len(evicted)
        for old in evicted:  # its thread sees the connection end and closes it
            with contextlib.suppress(OSError):
                old.shutdown(socket.SHUT_RDWR)
        thread = threading.Thread(
            target=self._serve_conn, args=(conn, peer), daemon=True, name=f"ps-conn-{peer[1]}"
        )
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to serve it: refuse this one, keep accepting
            self._note_accept_error(OSError(errno.EAGAIN, str(exc)), 0.0)
            with self._conns_lock:
                self._conns.discard(conn)
                self._unauthenticated.pop(conn, None)
            conn.close()

    # -- checkpoints -----------------------------------------------------------------------
    def checkpoint(self) -> int:
        """Write the current state to S3 unless this iteration is already there."""
        if self.store is None:
            return self.state.iteration
        with self._ckpt_lock:
            with self.state.cond:
                st = self.state
                if not st.initialized or st.checkpointed_iteration == st.iteration:
                    return st.iteration
                # Copies taken under the lock: the next update may start while we upload.
                it, total = st.iteration, st.total_params
                params, momentum = st.params.copy(), st.momentum()
            key = self.store.save(self.config.shard, it, total, params, momentum)
            with self.state.cond:
                self.state.checkpointed_iteration = max(self.state.checkpointed_iteration, it)
            LOG.info(
                "shard %d checkpointed iteration %d to s3://%s/%s",
                self.config.shard,
                it,
                self.config.artifacts_bucket,
                key,
            )
            self._prune_checkpoints()
            return it

    def _prune_checkpoints(self) -> None:
        """Keep this shard's checkpoints from the newest common one on (storage stays bounded).

        A failure here costs only storage, so it is logged and the run goes on.
        """
        assert self.store is not None
        try:
            found = self.store.iterations_by_shard()  # one LIST serves both (the model's one)
            common = self.store.latest_common_iteration(found)
            if common is not None:
                deleted = self.store.prune(self.config.shard, common, found)
                if deleted:
                    LOG.info(
                        "shard %d deleted %d checkpoint(s) older than iteration %d",
                        self.config.shard,
                        len(deleted),
                        common,
                    )
        except Exception as exc:  # noqa: BLE001  # storage housekeeping must not stop training
            LOG.warning("shard %d could not prune old checkpoints: %s", self.config.shard, exc)

    def _maybe_periodic_checkpoint(self, it_before: int) -> None:
        every = self.config.checkpoint_every
        it_after = self.state.iteration
        if every > 0 and it_after != it_before and it_after % every == 0:
            self.checkpoint()

    # -- one connection --------------------------------------------------------------------
    def _serve_conn(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        rank = None
        try:
            wire.tune_socket(conn)
            with naming_s3_failures():  # a checkpoint, restore or rollback reaches S3
                rank, total, buf, run = self._handshake(conn)
                with self._conns_lock:
                    self._unauthenticated.pop(conn, None)
                buffers = [buf]  # receive buffers; usually one (see _receive_buffer)
                while not self._stop.is_set():
                    self._serve_request(conn, rank, total, buffers, run)
        except S3Unreachable as exc:
            # The client that asked (or whose push completed the iteration) fails with the
            # cause; checkpoints already in S3 are untouched (a PUT is all or nothing).
            LOG.error("shard %d: checkpoint storage failed: %s", self.config.shard, exc)
            self._try_send_error(conn, str(exc))
        except wire.PSDisconnected:
            # Before the handshake this is a liveness probe or an evicted peer: not news.
            level = logging.INFO if rank is not None else logging.DEBUG
            LOG.log(level, "rank %s from %s:%s disconnected", rank, *peer)
        except (wire.WireError, wire.PSTimeout, wire.RemoteError, ValueError) as exc:
            self.rejected_connections += 1
            LOG.warning("closing connection from %s:%s (rank %s): %s", *peer, rank, exc)
            self._try_send_error(conn, str(exc))
        except OSError as exc:
            LOG.info("connection from %s:%s ended: %s", *peer, exc)
        except Exception as exc:  # noqa: BLE001  # a bug must cost one connection, not a thread
            self.rejected_connections += 1
            LOG.error("internal error serving %s:%s (rank %s): %r", *peer, rank, exc)
            self._try_send_error(conn, f"internal error: {type(exc).__name__}")
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
                self._unauthenticated.pop(conn, None)
            conn.close()

    def _try_send_error(self, conn: socket.socket, message: str) -> None:
        with contextlib.suppress(OSError, wire.PSTimeout, wire.PSDisconnected):
            wire.send_frame(conn, MsgType.ERROR, 0, message.encode()[:1024], time.monotonic() + 1.0)

    def _handshake(self, conn: socket.socket) -> tuple[int, int, np.ndarray, Run | None]:
        cfg, st = self.config, self.state
        deadline = time.monotonic() + cfg.handshake_timeout_s
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
        rank, total = hello.rank, hello.total_params
        hyper = (hello.learning_rate, hello.momentum)
        if rank >= 0 and hyper != (None, None) and hyper != (cfg.learning_rate, cfg.momentum):
            # Both sides are told the SGD hyper-parameters; a mismatch is a deployment bug.
            raise wire.WireError(
                f"worker expects learning rate/momentum {hyper}, this PS runs "
                f"{(cfg.learning_rate, cfg.momentum)}"
            )
        if not -1 <= rank < cfg.workers:
            raise wire.WireError(f"rank {rank} out of range -1..{cfg.workers - 1}")
        if hello.shard != cfg.shard or hello.shards != cfg.shards:
            raise wire.WireError(
                f"client expects shard {hello.shard}/{hello.shards}, "
                f"this is shard {cfg.shard}/{cfg.shards}"
            )
        if hello.run is not None:
            self.enter_run(hello.run, keep=conn)  # may restore from S3: the reply waits for it
            deadline = max(deadline, time.monotonic() + cfg.handshake_timeout_s)
        with st.cond:
            if st.initialized and total and total != st.total_params:
                raise wire.WireError(f"model of {total} parameters, this job has {st.total_params}")
            start, stop = wire.shard_bounds(total or st.total_params, cfg.shards, cfg.shard)
            if (stop - start) * 4 > cfg.max_shard_mb * 1e6:
                raise wire.WireError(f"shard of {stop - start} floats exceeds --max-shard-mb")
            welcome = {
                "iteration": st.iteration,
                "initialized": st.initialized,
                "shard_size": stop - start,
                "total_params": st.total_params or total,
            }
        wire.send_json(conn, MsgType.WELCOME, welcome["iteration"], welcome, deadline)
        # The receive buffer is allocated once per connection; control clients need none.
        buf = np.empty(stop - start if rank >= 0 and total else 0, np.float32)
        LOG.info(
            "rank %d of run %s authenticated (shard at iteration %d)", rank, hello.run, st.iteration
        )
        return rank, total, buf, hello.run

    def _receive_buffer(self, kind: MsgType, it: int, buffers: list[np.ndarray]) -> np.ndarray:
        """A buffer of this connection that holds no pending gradient; checks the iteration
        before a single payload byte is read.

        Under BSP a worker pushes i+1 only after pulling i+1, i.e. after the update that
        released its previous buffer, so one buffer suffices; only a duplicate push (same rank,
        same iteration) needs a second one.
        """
        st = self.state
        with st.cond:
            if kind == MsgType.PUSH and not st.initialized:
                raise wire.WireError("PUSH before the shard was initialised")
            if kind == MsgType.PUSH and it > st.iteration:
                raise wire.WireError(
                    f"gradient for iteration {it} but the shard is at {st.iteration}"
                )
            for buf in buffers:
                if not st.is_lent(buf):
                    return buf
        buffers.append(np.empty_like(buffers[0]))
        return buffers[-1]

    def _serve_request(
        self,
        conn: socket.socket,
        rank: int,
        total: int,
        buffers: list[np.ndarray],
        run: Run | None,
    ) -> None:
        cfg, st = self.config, self.state
        header = wire.recv_header(conn, time.monotonic() + cfg.idle_timeout_s)
        self._check_run(run)  # a request that arrives after its run was superseded is refused
        deadline = time.monotonic() + cfg.idle_timeout_s
        kind, it = header.msg_type, header.iteration
        if kind in (MsgType.INIT, MsgType.PUSH):
            if rank < 0 or buffers[0].size == 0:
                raise wire.WireError(f"{kind.name} from a control connection")
            buf = self._receive_buffer(kind, it, buffers)
            try:
                wire.recv_payload_into(conn, header, buf, deadline)
            except wire.PSDisconnected:
                self.truncated_frames += 1  # the partial gradient is dropped, never summed
                raise
            # One pass, no temporary: the sum is NaN/inf iff an element is (or it overflows).
            if not np.isfinite(np.sum(buf)):
                raise wire.WireError(
                    f"{kind.name} for iteration {it} holds NaN or inf (or overflows float32)"
                )
            with st.cond:
                before = st.iteration
                if kind == MsgType.INIT:
                    if not st.initialized:
                        st.adopt(total, buf, np.zeros_like(buf), 0)
                        LOG.info(
                            "shard %d initialised by rank %d (%d floats)", cfg.shard, rank, buf.size
                        )
                else:
                    st.add_gradient(rank, it, buf)
            if kind == MsgType.INIT:
                # Iteration 0 in S3 at once: a shard that restarts before the first periodic
                # checkpoint then has a common checkpoint to roll every shard back to.
                self.checkpoint()
                wire.send_frame(conn, MsgType.ACK, st.iteration, b"", deadline)
            else:
                self._maybe_periodic_checkpoint(before)
        elif kind == MsgType.PULL:
            self._serve_pull(conn, it)
        elif kind == MsgType.CHECKPOINT:
            wire.recv_control(conn, header, deadline)
            done_it = self.checkpoint()
            wire.send_json(
                conn,
                MsgType.ACK,
                done_it,
                {**self.status(), "checkpoint_iteration": done_it},
                deadline,
            )
        elif kind == MsgType.STATUS:
            wire.recv_control(conn, header, deadline)
            wire.send_json(conn, MsgType.ACK, st.iteration, self.status(), deadline)
        elif kind == MsgType.ROLLBACK:
            wire.recv_control(conn, header, deadline)
            done_it = self.rollback(keep=conn)
            wire.send_json(conn, MsgType.ACK, done_it, self.status(), deadline)
        else:
            raise wire.WireError(f"unexpected {kind.name} frame from a worker")

    def _serve_pull(self, conn: socket.socket, it: int) -> None:
        st = self.state
        deadline = time.monotonic() + self.config.wait_timeout_s
        with st.cond:
            generation = st.generation
            while st.iteration < it and st.generation == generation and not self._stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise wire.PSTimeout(
                        f"PULL({it}) waited {self.config.wait_timeout_s:.0f} s; "
                        f"shard still at {st.iteration}"
                    )
                st.cond.wait(min(remaining, 1.0))
            if self._stop.is_set():
                raise wire.PSDisconnected("server stopping")
            if st.iteration < it:  # the wait ended because the shard rolled back
                raise wire.PSDisconnected(f"shard rolled back to iteration {st.iteration}")
            params = st.params_for(it)
        # Sent outside the lock: under BSP nobody can overwrite this buffer until this very
        # worker pushes its next gradient (see module docstring).
        wire.send_frame(
            conn, MsgType.PARAMS, it, params, time.monotonic() + self.config.idle_timeout_s
        )

    def status(self) -> dict[str, Any]:
        st = self.state
        return {
            "shard": self.config.shard,
            "iteration": st.iteration,
            "total_params": st.total_params,
            "shard_size": st.shard_size,
            "received": sorted(st.received),
            "updates_applied": st.updates_applied,
            "duplicates_ignored": st.duplicates_ignored,
            "checkpointed_iteration": st.checkpointed_iteration,
            "rollbacks": st.rollbacks,
            "update_s": round(st.update_s, 6),
            "rejected_connections": self.rejected_connections,
            "truncated_frames": self.truncated_frames,
            "evicted_handshakes": self.evicted_handshakes,
            "accept_errors": self.accept_errors,
            "run_id": self.run.id if self.run is not None else None,
            "superseded_runs": self.superseded_runs,
        }


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag gives one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]  # argparse returns NoReturn
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m functions.ps", description=__doc__.splitlines()[0])
    p.add_argument("--job-id", required=True)
    p.add_argument("--shard", type=int, default=0, help="this shard's index (0-based)")
    p.add_argument("--shards", type=int, default=1, help="number of PS shards of the job")
    p.add_argument("--workers", type=int, required=True, help="n: gradients per BSP iteration")
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 on EC2)")
    p.add_argument("--port", type=int, default=0, help="0 lets the OS choose (see READY line)")
    p.add_argument("--secret-ref", required=True, help="env:NAME or a Secrets Manager id/ARN")
    p.add_argument("--model", default="", help="model zoo key (recorded, for logs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learning-rate", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--artifacts-bucket", default="", help="empty: no checkpoints")
    p.add_argument("--checkpoint-prefix", default="")
    p.add_argument("--checkpoint-every", type=int, default=0, help="iterations; 0 = on request")
    p.add_argument("--idle-timeout-s", type=float, default=900.0)
    p.add_argument("--wait-timeout-s", type=float, default=900.0)
    p.add_argument("--max-shard-mb", type=float, default=4096.0)
    p.add_argument(
        "--handshake-timeout-s",
        type=float,
        default=HANDSHAKE_TIMEOUT_S,
        help="how long a new connection may take to authenticate",
    )
    p.add_argument(
        "--max-unauthenticated",
        type=int,
        default=MAX_UNAUTHENTICATED,
        help="connections in the handshake at once; a new one evicts the oldest",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def config_from_args(args: argparse.Namespace) -> PSConfig:
    """Validate flags; raises ValueError with one line naming the bad value."""
    if not JOB_ID.fullmatch(args.job_id):
        raise ValueError(f"--job-id {args.job_id!r}: expected {JOB_ID_FORMS}")
    if not 1 <= args.workers <= MAX_WORKERS:
        raise ValueError(f"--workers {args.workers}: expected an integer from 1 to {MAX_WORKERS}")
    if args.shards < 1:
        raise ValueError(f"--shards {args.shards}: expected an integer >= 1")
    if not 0 <= args.shard < args.shards:
        raise ValueError(f"--shard {args.shard}: expected 0..{args.shards - 1}")
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port {args.port}: expected 0..65535")
    # `not x > 0` rather than `x <= 0`: NaN compares false both ways and must be refused.
    if not (math.isfinite(args.learning_rate) and args.learning_rate > 0):
        raise ValueError(f"--learning-rate {args.learning_rate}: expected a finite number > 0")
    if not 0 <= args.momentum < 1:
        raise ValueError(f"--momentum {args.momentum}: expected a number in [0, 1)")
    if args.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every {args.checkpoint_every}: expected >= 0")
    for flag in ("idle_timeout_s", "wait_timeout_s", "max_shard_mb", "handshake_timeout_s"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value > 0):
            name = "--" + flag.replace("_", "-")
            raise ValueError(f"{name} {value}: expected a finite number > 0")
    if args.max_unauthenticated < 1:
        raise ValueError(f"--max-unauthenticated {args.max_unauthenticated}: expected >= 1")
    if args.artifacts_bucket:
        _check_artifacts_bucket(args.artifacts_bucket)
    from functions.aws import resolve_secret

    return PSConfig(
        job_id=args.job_id,
        shard=args.shard,
        shards=args.shards,
        workers=args.workers,
        secret=resolve_secret(args.secret_ref),
        host=args.host,
        port=args.port,
        model=args.model,
        seed=args.seed,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
        artifacts_bucket=args.artifacts_bucket,
        checkpoint_prefix=args.checkpoint_prefix,
        checkpoint_every=args.checkpoint_every,
        idle_timeout_s=args.idle_timeout_s,
        wait_timeout_s=args.wait_timeout_s,
        max_shard_mb=args.max_shard_mb,
        handshake_timeout_s=args.handshake_timeout_s,
        max_unauthenticated=args.max_unauthenticated,
    )


def _check_artifacts_bucket(bucket: str) -> None:
    """ValueError unless `bucket` is a bucket name and S3 can be found: an endpoint (local S3)
    or a region (AWS). Checked before listening: without them the shard would serve and then
    fail its first checkpoint."""
    from functions.aws import s3_is_configured

    if not BUCKET_NAME.fullmatch(bucket):
        raise ValueError(
            f"--artifacts-bucket {bucket!r}: expected an S3 bucket name (3-63 lowercase letters, "
            "digits, dots or hyphens), or '' for no checkpoints"
        )
    if not s3_is_configured():
        raise ValueError(
            f"--artifacts-bucket {bucket!r}: no S3 endpoint or region is configured; set "
            "AWS_ENDPOINT_URL_S3 (a local S3) or AWS_REGION, or give '' for no checkpoints"
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s ps %(message)s"
    )
    try:
        config = config_from_args(args)
        server = ParameterServer(config)
        with naming_s3_failures():  # start() restores the newest checkpoint from S3
            host, port = server.start()
    except (ValueError, OSError) as exc:
        print(f"functions.ps: error: {exc}", file=sys.stderr)
        return 2
    except S3Unreachable as exc:
        print(f"functions.ps: error: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    # SIGTERM (EC2 stop, emulator teardown) checkpoints before leaving.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {host}:{port}", flush=True)
    while not stop.wait(0.5):
        pass
    try:
        with naming_s3_failures():
            server.checkpoint()
    except Exception as exc:  # noqa: BLE001  # the exit path must not hide the shutdown
        LOG.error("final checkpoint failed: %s", exc)
    server.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
