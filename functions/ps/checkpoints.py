"""A shard's checkpoints: the S3 format with its integrity MAC (`CheckpointStore`), and when a
shard writes, restores, rolls back to and prunes them for the run it serves (`Checkpointer`)."""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import re
import threading
from typing import Any

import numpy as np

from functions import wire
from functions.aws import list_keys
from functions.ps.config import PSConfig
from functions.ps.state import ShardState
from functions.runs import Run, run_checkpoint_prefix

LOG = logging.getLogger(__name__)
CHECKPOINT_MAC_META = "ldnn-hmac-sha256"  # S3 user metadata key of a checkpoint's HMAC


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


class Checkpointer:
    """The checkpoints of the run a shard serves. One lock orders every write, restore,
    rollback and change of run: none interleaves with another."""

    def __init__(self, config: PSConfig, state: ShardState, s3: Any = None) -> None:
        self.config = config
        self.state = state
        if config.artifacts_bucket and s3 is None:
            from functions.aws import s3_client

            s3 = s3_client()
        self._s3 = s3
        self._lock = threading.Lock()
        self.run: Run | None = None  # the run served; set by `enter_run`
        self.superseded_runs = 0  # runs this shard left for a newer one
        self.restored_iteration: int | None = None
        self.store = self._store_for(None)

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

    # -- runs ------------------------------------------------------------------------------
    def enter_run(self, run: Run) -> bool:
        """Serve `run` from now on; True when it replaced the run served (or none was).

        The run already served is kept (False); a newer one replaces it: its parameters are
        forgotten and the newer run's own newest checkpoint, if any, restored; an older one is
        refused with AuthError."""
        with self._lock:  # one switch at a time, never during an upload or a restore
            current = self.run
            if current == run:
                return False
            if current is not None and run < current:
                raise wire.AuthError(f"run {run} was superseded by run {current} on this PS")
            self.run, self.store = run, self._store_for(run)
            with self.state.cond:
                self.state.clear()
            if current is not None:
                self.superseded_runs += 1
                LOG.warning("shard %d: run %s supersedes run %s", self.config.shard, run, current)
            self.restored_iteration = self._restore_locked()
        return True

    def check_run(self, run: Run | None) -> None:
        """A connection authenticated for `run` may go on only while that run is served."""
        if run is not None and run != self.run:
            raise wire.AuthError(f"run {run} was superseded by run {self.run} on this PS")

    # -- restore ---------------------------------------------------------------------------
    def restore(self) -> int | None:
        """Load the newest checkpoint every shard has; returns its iteration or None."""
        with self._lock:  # never interleaved with an upload or another restore
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

    def rollback(self) -> tuple[int, bool]:
        """ROLLBACK: go to the newest common checkpoint unless already there; returns the
        shard's iteration afterwards and whether the state changed. Several workers asking at
        once roll back once: the check and the load share a lock.
        """
        if self.store is None:
            raise wire.WireError("ROLLBACK without checkpoints (no artifacts bucket)")
        with self._lock:
            target = self.store.latest_common_iteration()
            with self.state.cond:
                if target is None or target == self.state.iteration:
                    return self.state.iteration, False
            restored = self._adopt_newest_verified(target)
            with self.state.cond:
                if restored is None:  # every candidate was refused: keep what is held
                    return self.state.iteration, False
                target = restored
                self.state.rollbacks += 1
        LOG.warning("shard %d rolled back to common checkpoint %d", self.config.shard, target)
        return target, True

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

    # -- write -----------------------------------------------------------------------------
    def checkpoint(self) -> int:
        """Write the current state to S3 unless this iteration is already there."""
        if self.store is None:
            return self.state.iteration
        with self._lock:
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
            self._prune()
            return it

    def _prune(self) -> None:
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

    def after_push(self, it_before: int) -> None:
        """The periodic checkpoint (every `checkpoint_every` iterations), when a PUSH moved the
        shard on from `it_before`."""
        every = self.config.checkpoint_every
        it_after = self.state.iteration
        if every > 0 and it_after != it_before and it_after % every == 0:
            self.checkpoint()
