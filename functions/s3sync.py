"""Sync mode "s3": workers exchange gradients through S3 objects only, no PS.

LambdaML's ScatterReduce through storage, generalised to k reducers (1 <= k <= n), with the
transfers pipelined. The flat parameter vector is cut into k contiguous partitions; rank j < k
reduces partition j. In iteration t every worker PUTs its k gradient partitions, reducer j GETs
the n gradients of partition j as they appear, averages them, applies SGD with momentum exactly
as a PS shard does, and PUTs one state object (params then momentum, float32) for t+1; every
worker then reads the k param halves with Range GETs. Keys (under the run's exchange base):

    grad/{t:010d}/{j:03d}/{rank:04d}    a worker's gradient partition j of iteration t
    state/{t:010d}/{j:03d}              partition j's params and momentum at iteration t

The hot path never LISTs (a LIST at a link's start finds where the run is). Reducer j deletes
its partition's gradients of t and its state of t-1 once state t+1 is written (one
DeleteObjects): at most two states per partition remain, and momentum lives in them, so a
re-invoked reducer resumes exactly. At the end of each link reducer j also writes partition j
in the PS checkpoint format (functions.ps.CheckpointStore, shard j of k): finalize and a run
whose exchange objects expired read the same files in both modes. See docs/CONTRACTS.md.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from functions import wire
from functions.aws import resolve_secret
from functions.exchange import StepTiming
from functions.polling import (
    POLL_FIRST_S,
    ArrivalEstimate,
    cost_balanced_gap_s,
    poll,
    poll_for,
)
from functions.ps.checkpoints import CheckpointStore
from functions.ps.state import sgd_momentum
from functions.s3requests import RequestCounts, counted_delete, counted_get
from functions.task import WorkerTask

GATHER_WINDOW = 4  # gradients a reducer has in flight: memory stays O(partition), not O(n)
STATE_KEY_RE = re.compile(r"/state/(\d{10})/(\d{3})$")
GRAD_KEY_RE = re.compile(r"/grad/(\d{10})/(\d{3})/\d{4}/\d{4}$")


def partition_bounds(total: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) of each of `parts` contiguous partitions, sizes differing by at most one
    (the first total % parts are one longer, as numpy.array_split and the PS shards split)."""
    if parts < 1:
        raise ValueError(f"parts {parts}: expected at least 1")
    return [wire.shard_bounds(total, parts, j) for j in range(parts)]


def exchange_base(prefix: str, job_id: str, run_id: str) -> str:
    """The folder of one run's exchange objects (no trailing '/')."""
    return f"{prefix.strip('/')}/{job_id}/{run_id}"


def grad_key(base: str, iteration: int, part: int, n_workers: int, rank: int) -> str:
    """A rank's gradient partition of an iteration, under the count it averages over: a link cut
    mid-iteration by its time limit may leave one behind, and when a re-plan switches the count
    the new workers' reducers must not read it (its local batch was the old count's)."""
    return f"{base}/grad/{iteration:010d}/{part:03d}/{n_workers:04d}/{rank:04d}"


def state_key(base: str, iteration: int, part: int) -> str:
    return f"{base}/state/{iteration:010d}/{part:03d}"


def states_by_part(keys: Iterable[str], parts: int) -> dict[int, set[int]]:
    """Partition → the iterations whose state object is among `keys`."""
    found: dict[int, set[int]] = {j: set() for j in range(parts)}
    for key in keys:
        match = STATE_KEY_RE.search(key)
        if match and int(match.group(2)) < parts:
            found[int(match.group(2))].add(int(match.group(1)))
    return found


def resume_iteration(states: dict[int, set[int]]) -> int | None:
    """The newest iteration every partition has a state of (None: none, a fresh run).

    Partitions are never more than one apart (a reducer writes t+1 only after every worker
    read all of t), so this is the lowest iteration some worker may still have to compute.
    """
    common = set.intersection(*states.values()) if states else set()
    return max(common) if common else None


def stale_keys(keys: Iterable[str], base: str, part: int, newest: int) -> list[str]:
    """Partition `part`'s leftovers once its newest state is `newest`: gradients of earlier
    iterations and states before newest - 1 (a reducer killed before its clean-up)."""
    out = []
    for key in keys:
        grad, state = GRAD_KEY_RE.search(key), STATE_KEY_RE.search(key)
        old_grad = grad and int(grad.group(2)) == part and int(grad.group(1)) < newest
        old_state = state and int(state.group(2)) == part and int(state.group(1)) < newest - 1
        if old_grad or old_state:
            out.append(key)
    return [k for k in out if k.startswith(f"{base}/")]


def momentum_step(
    params: np.ndarray,
    scaled_momentum: np.ndarray,
    grad_sum: np.ndarray,
    *,
    learning_rate: float,
    momentum: float,
    workers: int,
) -> None:
    """torch.optim.SGD(momentum) on the mean of `workers` gradients, in place: a PS shard's
    own update (functions.ps.sgd_momentum), so the two modes train alike to the last bit."""
    new = np.empty_like(params)
    sgd_momentum(params, scaled_momentum, grad_sum, new, momentum=np.float32(momentum),
                 step=np.float32(-learning_rate / workers))  # fmt: skip
    params[...] = new


def checkpoint_secret(task: WorkerTask) -> bytes:
    """The key of the checkpoints' HMAC: the job secret; in s3 mode without one, empty. Then
    the HMAC is only a checksum, which is all it can be there: anyone who can write the bucket
    can already write the exchange objects the parameters come from."""
    if task.sync == "s3" and not task.secret_ref:
        return b""
    return resolve_secret(task.secret_ref)


@dataclass
class _Partition:
    """The partition this worker reduces: its params and PS-scaled momentum at `iteration`."""

    index: int
    iteration: int
    params: np.ndarray
    scaled_momentum: np.ndarray


@dataclass
class S3Exchange:
    """One worker's side of the S3 exchange (the Exchange interface of functions.exchange)."""

    s3: Any
    bucket: str
    base: str
    rank: int
    n_workers: int
    bounds: list[tuple[int, int]]
    learning_rate: float
    momentum: float
    timeout_s: float
    checkpoints: CheckpointStore
    clock: Callable[[], float] = time.monotonic
    counts: RequestCounts = field(default_factory=RequestCounts)
    gap_s: float = POLL_FIRST_S  # a learned wait's poll gap (cost_balanced_gap_s)
    # Each recurring wait's arrival, by (kind, index): a reducer's gradient from rank r, a
    # worker's state slice j. Each is waited on once per iteration, so one thread at a time.
    _arrivals: dict[tuple[str, int], ArrivalEstimate] = field(default_factory=dict, init=False)
    _owned: _Partition | None = field(default=None, init=False)
    # Newest state iteration per partition, as listed at the start and written since.
    _newest: list[int] = field(default_factory=list, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _pool: concurrent.futures.ThreadPoolExecutor | None = field(default=None, init=False)

    @classmethod
    def for_task(cls, task: WorkerTask, s3: Any, total_params: int) -> S3Exchange:
        base = exchange_base(task.exchange_prefix, task.job_id, task.run_id)
        store = CheckpointStore(
            s3,
            task.artifacts_bucket,
            task.run_checkpoint_prefix,
            task.reducers,
            secret=checkpoint_secret(task),
        )
        return cls(
            s3,
            task.artifacts_bucket,
            base,
            task.rank,
            task.n_workers,
            partition_bounds(total_params, task.reducers),
            task.learning_rate,
            task.momentum,
            task.ps_timeout_s,
            store,
            gap_s=cost_balanced_gap_s(task.memory_mb, task.n_workers),
        )

    @property
    def parts(self) -> int:
        return len(self.bounds)

    @property
    def total_params(self) -> int:
        return self.bounds[-1][1]

    @property
    def reduces(self) -> int | None:
        """The partition this rank reduces, if any."""
        return self.rank if self.rank < self.parts else None

    def pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            # Room for every upload plus a reducer's gather window: the uploads, submitted
            # first, never queue behind waits for gradients they themselves provide.
            threads = min(64, self.parts + GATHER_WINDOW)
            self._pool = concurrent.futures.ThreadPoolExecutor(threads, "s3sync")
        return self._pool

    # -- requests (each counted) -----------------------------------------------------------
    def _put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        self.counts.add("put")

    def _get(self, key: str, length: int | None) -> tuple[bytes, float] | None:
        """GET (the first `length` bytes); (body, when it answered), None if not there yet."""
        return counted_get(self.s3, self.bucket, key, self.counts, length)

    def _wait_for(
        self, key: str, length: int | None = None, slot: tuple[str, int] | None = None
    ) -> tuple[bytes, float]:
        """GET `key` once it is there. A recurring wait (`slot`) sleeps until its object is
        expected (ArrivalEstimate) and then polls every gap_s; any other backs off from now."""
        what = f"s3://{self.bucket}/{key}"
        if slot is None:
            fetch = lambda: self._get(key, length)  # noqa: E731
            return poll(fetch, timeout_s=self.timeout_s, what=what, clock=self.clock,
                        sleep=self._stop.wait)  # fmt: skip
        arrival = self._arrivals.setdefault(slot, ArrivalEstimate(self.gap_s))
        polled = poll_for(
            lambda: self._get(key, length),
            arrival.delays_s(),
            timeout_s=self.timeout_s,
            what=what,
            clock=self.clock,
            sleep=self._stop.wait,
            first_poll_s=arrival.first_poll_s or 0.0,
        )
        arrival.learn(polled)
        return polled.value

    def _delete(self, keys: list[str]) -> None:
        counted_delete(self.s3, self.bucket, keys, self.counts)

    def _list(self) -> list[str]:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.base}/"
        ):
            self.counts.add("list")
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return keys

    # -- start of a link -------------------------------------------------------------------
    def start(self, params: np.ndarray) -> int:
        """Find the iteration in S3 (seeding state 0, or a checkpoint's, on a fresh exchange),
        load the partition this rank reduces, read the parameters of that iteration."""
        keys = self._list()  # outside the hot path: once per link
        states = states_by_part(keys, self.parts)
        iteration = resume_iteration(states)
        self._newest = [-1] * self.parts  # until known below (a seeded state may set one)
        # A fresh exchange's worker asks the checkpoints even where a peer's state 0 came
        # first: one LIST each, whatever the start order, so the run's bill is what was priced
        # (s3exchange.s3_link_requests); found first, the LISTs were n+k to 2n+k a run.
        if iteration is None or iteration == 0:
            iteration = self._seed(params, states)
        self._newest = [max(states[j] | {iteration}) for j in range(self.parts)]
        if self.reduces is not None:
            self._adopt_owned(keys)
        if iteration > 0:  # at 0 every worker holds the seeded model the states were written from
            self._read_states(iteration, params, recurring=False)  # there already: nothing to learn
        return iteration

    def _seed(self, params: np.ndarray, states: dict[int, set[int]]) -> int:
        """The first iteration of a fresh exchange: the newest checkpoint of the run (the
        exchange objects expired) or 0; this rank's partition's state written if missing."""
        iteration = self.checkpoints.latest_common_iteration()
        self.counts.add("list")
        j = self.reduces
        if j is not None and not states[j]:
            lo, hi = self.bounds[j]
            if iteration is None:
                # Every worker built the same seeded model, so any reducer's copy will do.
                part = _Partition(j, 0, params[lo:hi].copy(), np.zeros(hi - lo, np.float32))
            else:
                saved = self.checkpoints.load(j, iteration)
                self.counts.add("get")
                scaled = saved["momentum"].astype(np.float32) * np.float32(self.n_workers)
                part = _Partition(j, iteration, saved["params"].astype(np.float32), scaled)
            self._write_state(part)
            self._owned = part
        return 0 if iteration is None else iteration

    def _adopt_owned(self, keys: list[str]) -> None:
        """Params and momentum of this rank's partition from its newest state (a re-invoked
        reducer resumes exactly), and the leftovers of a reducer killed mid-clean-up gone."""
        j = self.reduces
        assert j is not None
        newest = self._newest[j]
        if self._owned is None or self._owned.iteration != newest:
            body, _ = self._wait_for(state_key(self.base, newest, j))
            size = self.bounds[j][1] - self.bounds[j][0]
            values = np.frombuffer(body, np.float32)
            if values.size != 2 * size:
                raise ValueError(f"state {newest}/{j}: {values.size} floats, expected {2 * size}")
            scaled = values[size:] * np.float32(self.n_workers)
            self._owned = _Partition(j, newest, values[:size].copy(), scaled)
        stale = stale_keys(keys, self.base, j, newest)
        if stale:
            self._delete(stale)

    # -- one iteration ---------------------------------------------------------------------
    def step(self, iteration: int, grads: np.ndarray, params: np.ndarray) -> StepTiming:
        """Upload the gradient's partitions; reduce this rank's; read the new parameters."""
        t0 = time.perf_counter()
        uploads = [
            self.pool().submit(
                self._put,
                grad_key(self.base, iteration, j, self.n_workers, self.rank),
                grads[lo:hi].tobytes(),
            )
            for j, (lo, hi) in enumerate(self.bounds)
            # A partition already past `iteration` (this worker resumes behind its reducer)
            # needs no gradient: it would only be left behind, never read nor deleted.
            if self._newest[j] <= iteration
        ]
        timing = StepTiming()
        owned = self._owned
        if owned is not None and owned.iteration == iteration:
            timing = self._reduce(owned, iteration)
        for future in uploads:
            future.result()
        pulled = self._pull(iteration + 1, params)
        timing.wait_s += pulled.wait_s
        timing.transfer_s = pulled.transfer_s
        # The uploads run while this rank reduces: push_s is what they added beyond the reduce
        # and the waits, so push + wait + transfer + reduce is the exchange's wall time (timed
        # from the first upload they overlapped and were counted twice).
        spent_s = time.perf_counter() - t0
        timing.push_s = max(0.0, spent_s - timing.wait_s - timing.transfer_s - timing.reduce_s)
        return timing

    def _reduce(self, part: _Partition, iteration: int) -> StepTiming:
        """Sum partition `part`'s n gradients in rank order as they arrive (the next ones in
        flight meanwhile), update, write state t+1, delete what is no longer needed."""
        t0 = time.perf_counter()
        size = part.params.size
        total = np.zeros(size, np.float32)
        keys = [
            grad_key(self.base, iteration, part.index, self.n_workers, r)
            for r in range(self.n_workers)
        ]
        in_flight = {
            r: self.pool().submit(self._wait_for, keys[r], None, ("grad", r))
            for r in range(min(GATHER_WINDOW, self.n_workers))
        }
        blocked_s = 0.0
        for r in range(self.n_workers):
            t1 = time.perf_counter()
            body, _ = in_flight.pop(r).result()
            blocked_s += time.perf_counter() - t1
            if r + GATHER_WINDOW < self.n_workers:
                in_flight[r + GATHER_WINDOW] = self.pool().submit(
                    self._wait_for, keys[r + GATHER_WINDOW], None, ("grad", r + GATHER_WINDOW)
                )
            grad = np.frombuffer(body, np.float32)
            if grad.size != size:
                raise ValueError(f"{keys[r]}: {grad.size} floats, expected {size}")
            total += grad
        momentum_step(
            part.params,
            part.scaled_momentum,
            total,
            learning_rate=self.learning_rate,
            momentum=self.momentum,
            workers=self.n_workers,
        )
        part.iteration = iteration + 1
        # The state's PUT and the DELETE are requests, not arithmetic: timed as communication
        # (push_s, step() takes them as the rest of the wall), as the model prices them.
        reduced_s = time.perf_counter() - t0 - blocked_s
        self._write_state(part)
        self._delete(keys + self._superseded(part.index, iteration))
        return StepTiming(wait_s=blocked_s, reduce_s=reduced_s)

    def _superseded(self, j: int, iteration: int) -> list[str]:
        """What reducer j may delete with iteration's gradients: state t-1 (every worker has
        read state t, as it pushed t, so t-1 is nobody's resume point) and the gradients of
        t-1 again: a worker that resumed behind this partition may have uploaded one after
        the last clean-up, and it finished that upload before pushing t. Deleting keys that
        do not exist costs nothing: it is the same one request."""
        if iteration < 1:
            return []
        previous = [
            grad_key(self.base, iteration - 1, j, self.n_workers, r) for r in range(self.n_workers)
        ]
        return [state_key(self.base, iteration - 1, j), *previous]

    def _write_state(self, part: _Partition) -> None:
        """State object: params then momentum as torch holds it, raw float32."""
        momentum = part.scaled_momentum / np.float32(self.n_workers)
        body = part.params.tobytes() + momentum.astype(np.float32).tobytes()
        self._put(state_key(self.base, part.iteration, part.index), body)
        self._newest[part.index] = part.iteration

    def _pull(self, iteration: int, params: np.ndarray) -> StepTiming:
        """An iteration's wait for the new parameters (a recurring wait: _read_states)."""
        return self._read_states(iteration, params, recurring=True)

    def _read_states(self, iteration: int, params: np.ndarray, recurring: bool) -> StepTiming:
        """The k params halves of `iteration`'s states (Range GETs, all in flight at once):
        wait_s until the last one answered, then transfer_s for the rest of the bytes."""
        t0 = time.perf_counter()
        futures = [
            self.pool().submit(
                self._wait_for,
                state_key(self.base, iteration, j),
                4 * (hi - lo),
                ("state", j) if recurring else None,
            )
            for j, (lo, hi) in enumerate(self.bounds)
        ]
        answered = t0
        for (lo, hi), future in zip(self.bounds, futures, strict=True):
            body, when = future.result()
            values = np.frombuffer(body, np.float32)
            if values.size != hi - lo:
                raise ValueError(f"state {iteration}: {values.size} floats, expected {hi - lo}")
            params[lo:hi] = values
            answered = max(answered, when)
        wait_s = answered - t0
        return StepTiming(wait_s=wait_s, transfer_s=time.perf_counter() - t0 - wait_s)

    # -- end of a link ---------------------------------------------------------------------
    def finish(self, iteration: int, reason: str) -> None:
        """A reducer checkpoints its partition in the PS format (shard j of k), then drops its
        checkpoints older than the newest one every partition has, as a PS shard does."""
        part = self._owned
        if part is None or reason == "ps_timeout":
            return
        momentum = part.scaled_momentum / np.float32(self.n_workers)
        self.checkpoints.save(part.index, part.iteration, self.total_params, part.params, momentum)
        self.counts.add("put")
        found = self.checkpoints.iterations_by_shard()
        self.counts.add("list")
        common = self.checkpoints.latest_common_iteration(found)
        if common is not None:
            self.counts.add("delete", len(self.checkpoints.prune(part.index, common, found)))

    def close(self) -> None:
        self._stop.set()  # waits in flight end at their next back-off
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def request_counts(self) -> dict[str, int] | None:
        return self.counts.as_dict()
