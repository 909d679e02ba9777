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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
from botocore.exceptions import ClientError

from functions import wire
from functions.aws import resolve_secret
from functions.exchange import StepTiming
from functions.ps.checkpoints import CheckpointStore
from functions.ps.state import sgd_momentum
from functions.task import WorkerTask

T = TypeVar("T")
POLL_FIRST_S = 0.005  # first back-off: an object a peer is writing now is there within ms
# Growth per miss: doubling overshot a wait by up to its own length (a 50 ms wait became up to
# 70 ms: polls at 0, 10, 30, 70 ms), which on 50-130 ms exchanges was most of the error; ×1.5
# overshoots by at most half, for one or two more GETs, and a GET that misses costs
# $0.0004 per 1,000 (catalog s3_usd_per_get), against 12.5× that for the PUT it waits on.
POLL_GROWTH = 1.5
POLL_MAX_S = 0.2  # back-off ceiling: bounds both the request count and the added latency
# An S3 GET's price in Lambda x86 GB-seconds ($0.0004 per 1,000 / $0.0000166667 per GB-s):
# the function time a GET that finds nothing may save before it is not worth sending.
GET_GB_S = 0.0004e-3 / 0.0000166667
GATHER_WINDOW = 4  # gradients a reducer has in flight: memory stays O(partition), not O(n)
DELETE_BATCH = 1000  # keys per DeleteObjects request (the S3 limit)
STATE_KEY_RE = re.compile(r"/state/(\d{10})/(\d{3})$")
GRAD_KEY_RE = re.compile(r"/grad/(\d{10})/(\d{3})/\d{4}$")


class ExchangeTimeout(wire.PSTimeout):
    """An exchange object did not appear within the task's ps_timeout_s. A PSTimeout, so the
    worker loop ends the link the same way in both modes (stopped "ps_timeout")."""


class ExchangeClosed(RuntimeError):
    """The exchange was closed while a wait was in progress (the link is ending)."""


def partition_bounds(total: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) of each of `parts` contiguous partitions, sizes differing by at most one
    (the first total % parts are one longer, as numpy.array_split and the PS shards split)."""
    if parts < 1:
        raise ValueError(f"parts {parts}: expected at least 1")
    return [wire.shard_bounds(total, parts, j) for j in range(parts)]


def exchange_base(prefix: str, job_id: str, run_id: str) -> str:
    """The folder of one run's exchange objects (no trailing '/')."""
    return f"{prefix.strip('/')}/{job_id}/{run_id}"


def grad_key(base: str, iteration: int, part: int, rank: int) -> str:
    return f"{base}/grad/{iteration:010d}/{part:03d}/{rank:04d}"


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


def backoff_delays_s(
    first_s: float = POLL_FIRST_S, growth: float = POLL_GROWTH, max_s: float = POLL_MAX_S
) -> Iterator[float]:
    """The gaps of a wait nothing is known about: first_s, × growth per miss up to max_s."""
    delay_s = first_s
    while True:
        yield delay_s
        delay_s = min(growth * delay_s, max_s)


def expected_delays_s(gap_s: float) -> Iterator[float]:
    """The gaps of a wait whose object is expected now: gap_s, then (it is late: a slow peer,
    a throttled step, whose lateness tells nothing of when it ends) × POLL_GROWTH per miss up
    to POLL_MAX_S, so an outlier costs a few GETs and not one per gap."""
    yield gap_s
    yield from backoff_delays_s(gap_s, POLL_GROWTH, max(gap_s, POLL_MAX_S))


@dataclass(frozen=True)
class Polled(Generic[T]):
    """What a wait found, and the GETs that found nothing before it."""

    value: T
    misses: int
    last_miss_s: float | None  # since the wait began, when the last empty GET was sent
    found_s: float  # since the wait began, when the GET that found it was sent


def poll_for(
    fetch: Callable[[], T | None],
    delays_s: Iterator[float],
    *,
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    first_poll_s: float = 0.0,
) -> Polled[T]:
    """Sleep first_poll_s, then fetch() until it returns a value, sleeping the next of
    `delays_s` after each miss and never past the deadline: one last try at it, then
    ExchangeTimeout. `sleep` returning True means the wait was cancelled (ExchangeClosed)."""
    start = clock()
    deadline = start + timeout_s
    if first_poll_s > 0 and sleep(min(first_poll_s, timeout_s)) is True:
        raise ExchangeClosed(f"stopped waiting for {what}: the exchange was closed")
    misses, last_miss_s = 0, None
    while True:
        sent = clock()
        found = fetch()
        if found is not None:
            return Polled(found, misses, last_miss_s, sent - start)
        misses, last_miss_s = misses + 1, sent - start
        left_s = deadline - clock()
        if left_s <= 0:
            raise ExchangeTimeout(f"{what} did not appear within {timeout_s:g} s")
        if sleep(min(next(delays_s), left_s)) is True:
            raise ExchangeClosed(f"stopped waiting for {what}: the exchange was closed")


def poll(
    fetch: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    first_delay_s: float = POLL_FIRST_S,
    max_delay_s: float = POLL_MAX_S,
    growth: float = POLL_GROWTH,
) -> T:
    """fetch() until it returns a value, backing off exponentially (first_delay_s, × growth per
    miss up to max_delay_s) and never past the deadline: one last try at it, then
    ExchangeTimeout.
    `sleep` returning True means the wait was cancelled (ExchangeClosed)."""
    delays = backoff_delays_s(first_delay_s, growth, max_delay_s)
    return poll_for(fetch, delays, timeout_s=timeout_s, what=what, clock=clock, sleep=sleep).value


def cost_balanced_gap_s(memory_mb: int, n_workers: int) -> float:
    """The poll gap at which a GET that finds nothing costs what the wait it shortens costs.

    A late poll delays the iteration's critical path (BSP: the last gradient holds the reducer,
    the reducer holds every worker), so the time is billed n times: gap = price of a GET /
    (n · memory_GB · price of a GB-second), clipped to [POLL_FIRST_S, POLL_MAX_S]. The prices'
    ratio is AWS's (catalog lambda-2025: s3_usd_per_get $0.0004 per 1,000, x86 usd_per_gb_s
    $0.0000166667): 12 functions of 384 MB, 5.3 ms; 2 of 1,769 MB, 6.9 ms.
    """
    gap_s = GET_GB_S / (max(1, n_workers) * memory_mb / 1024.0)
    return min(max(gap_s, POLL_FIRST_S), POLL_MAX_S)


@dataclass
class ArrivalEstimate:
    """When one recurring wait's object tends to appear, learned from the previous iterations.

    first_poll_s (since the wait began) is where the next wait sends its first GET. It tracks
    the median arrival: a wait whose first GET missed moves it later, one whose first GET found
    the object moves it earlier, by half a gap, twice as far each time in a row (a shift of D
    is followed within log2(D/gap) waits) and back to half a gap when the direction turns, so
    one slow iteration (a throttled peer) moves it by half a gap only. Moving only to where
    hits were seen would ratchet upward (a hit is seen at the poll after the object appeared);
    a move up never passes the middle of the gap after the last miss. In the steady state
    about every other wait finds its object at the first GET, the others one gap later: at the
    median, a GET that finds nothing and a wait one gap too long cost alike (the gap is
    cost_balanced_gap_s).
    """

    gap_s: float
    first_poll_s: float | None = None
    _step_s: float = field(default=0.0, init=False)  # signed: + later, - earlier

    def delays_s(self) -> Iterator[float]:
        """The gaps after each miss: a back-off while nothing is known, then gap_s."""
        if self.first_poll_s is None:
            return backoff_delays_s()
        return expected_delays_s(self.gap_s)

    def learn(self, polled: Polled[Any]) -> None:
        half_s = self.gap_s / 2.0
        if self.first_poll_s is None:
            # A cold wait: its object came within the back-off's gap before the GET that found it.
            came_after_s = polled.last_miss_s if polled.last_miss_s is not None else 0.0
            self.first_poll_s = (came_after_s + polled.found_s) / 2.0
            return
        if polled.last_miss_s is None:
            step_s = 2.0 * self._step_s if self._step_s < 0 else -half_s
            self.first_poll_s = max(0.0, self.first_poll_s + step_s)
        else:
            step_s = 2.0 * self._step_s if self._step_s > 0 else half_s
            self.first_poll_s = min(self.first_poll_s + step_s, polled.last_miss_s + half_s)
        self._step_s = step_s


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


class RequestCounts:
    """S3 requests of one link by kind, counted from the exchange's threads."""

    KINDS = ("put", "get", "get_miss", "delete", "list")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.KINDS, 0)

    def add(self, kind: str, count: int = 1) -> None:
        with self._lock:
            self._counts[kind] += count

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


@dataclass
class _Partition:
    """The partition this worker reduces: its params and PS-scaled momentum at `iteration`."""

    index: int
    iteration: int
    params: np.ndarray
    scaled_momentum: np.ndarray


def _missing(exc: ClientError) -> bool:
    """A GET of a key that does not exist (yet)."""
    return exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")


def counted_get(
    s3: Any, bucket: str, key: str, counts: RequestCounts, length: int | None = None
) -> tuple[bytes, float] | None:
    """GET (the first `length` bytes), counted (a miss as "get" and "get_miss"); (body, when it
    answered), None while the key is not there."""
    extra = {"Range": f"bytes=0-{length - 1}"} if length is not None else {}
    counts.add("get")
    try:
        response = s3.get_object(Bucket=bucket, Key=key, **extra)
    except ClientError as exc:
        if not _missing(exc):
            raise
        counts.add("get_miss")
        return None
    answered = time.perf_counter()
    return response["Body"].read(), answered


def counted_delete(s3: Any, bucket: str, keys: list[str], counts: RequestCounts) -> None:
    """DELETE `keys` in batches of DELETE_BATCH, one counted request each (keys already gone
    cost nothing more)."""
    for i in range(0, len(keys), DELETE_BATCH):
        batch = [{"Key": k} for k in keys[i : i + DELETE_BATCH]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        counts.add("delete")


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
        if iteration is None:
            iteration = self._seed(params, states)
        self._newest = [max(states[j] | {iteration}) for j in range(self.parts)]
        if self.reduces is not None:
            self._adopt_owned(keys)
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
                self._put, grad_key(self.base, iteration, j, self.rank), grads[lo:hi].tobytes()
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
        keys = [grad_key(self.base, iteration, part.index, r) for r in range(self.n_workers)]
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
        previous = [grad_key(self.base, iteration - 1, j, r) for r in range(self.n_workers)]
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
