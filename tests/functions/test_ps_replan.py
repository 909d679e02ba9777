"""A run that re-plans switches its worker count between links: the PS (`--workers`: the
ceiling) averages each iteration over the count its workers' HELLO names, so n workers then n'
workers at the same global batch match one process training on the same batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from functions import datasets, models, wire, worker
from functions.ps.config import PSConfig
from functions.ps.state import ShardState

from .conftest import endpoints
from .helpers import ps_vector, run_threads, worker_event

GLOBAL_BATCH = 16


def reference_segments(s3: Any, bucket: str, event: dict[str, Any],
                       segments: list[tuple[str, int, int]]) -> np.ndarray:  # fmt: skip
    """One process, torch.optim.SGD(momentum), each iteration's global batch the ranks' batches
    of its segment concatenated; `segments`: (shards prefix, n, iterations) in turn."""
    model = opt = None
    it = 0
    for prefix, n, count in segments:
        manifest = datasets.read_manifest(s3, bucket, prefix)
        shards = [datasets.load_shard(s3, bucket, prefix, r, manifest) for r in range(n)]
        if model is None:
            model = models.build(event["model"], manifest["input_shape"], manifest["classes"],
                                 event["seed"])  # fmt: skip
            opt = torch.optim.SGD(model.parameters(), lr=event["learning_rate"],
                                  momentum=event["momentum"])  # fmt: skip
        for _ in range(count):
            xs, ys = [], []
            for r, (x, y) in enumerate(shards):
                idx = datasets.batch_indices(event["seed"], r, it, GLOBAL_BATCH // n, len(x))
                xs.append(x[idx])
                ys.append(y[idx])
            opt.zero_grad()
            loss = F.cross_entropy(model(torch.from_numpy(np.concatenate(xs))),
                                   torch.from_numpy(np.concatenate(ys)))  # fmt: skip
            loss.backward()
            opt.step()
            it += 1
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()


def _link(servers: list, bucket: str, prefix: str, n: int, start: int, invocation: int,
          iterations: int, total: int) -> list[dict]:  # fmt: skip
    events = [
        worker_event(r, n, endpoints(servers), bucket, dataset_prefix=prefix,
                     local_batch=GLOBAL_BATCH // n, iterations=total, start_iteration=start,
                     invocation=invocation, iterations_per_invocation=iterations)
        for r in range(n)
    ]  # fmt: skip
    results = run_threads(worker.handler, [(e, None) for e in events])
    assert all(r["iteration"] == start + iterations for r in results)
    return events


@pytest.mark.parametrize(("first", "then"), [(2, 4), (4, 2)])
def test_workers_switching_their_count_match_one_process(
    s3: Any, bucket: str, shard_cache: Any, ps_cluster: Any, first: int, then: int
) -> None:
    for n in (first, then):
        datasets.write_shards(s3, "builtin:digits", n, bucket, f"data-n{n}", seed=1)
    servers = ps_cluster(2, 4, learning_rate=0.1, momentum=0.9)  # --workers 4: the ceiling
    events = _link(servers, bucket, f"data-n{first}", first, 0, 0, 3, 6)
    _link(servers, bucket, f"data-n{then}", then, 3, 1, 3, 6)
    assert all(s.state.iteration == 6 and s.state.n == then for s in servers)
    segments = [(f"data-n{first}", first, 3), (f"data-n{then}", then, 3)]
    want = reference_segments(s3, bucket, events[0], segments)
    got = ps_vector(servers)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # and not the run that kept its first count (the check can fail)
    kept = reference_segments(s3, bucket, events[0], [(f"data-n{first}", first, 6)])
    assert not np.allclose(got, kept, rtol=1e-4, atol=1e-5)


def _state(workers: int) -> ShardState:
    cfg = PSConfig(job_id="j", shard=0, shards=1, workers=workers, secret=b"s",
                   learning_rate=0.1, momentum=0.9)  # fmt: skip
    state = ShardState(cfg)
    with state.cond:
        state.adopt(3, np.zeros(3, np.float32), np.zeros(3, np.float32), 0)
    return state


@pytest.mark.parametrize(("first", "then"), [(2, 4), (4, 2)])
def test_a_switch_after_a_link_cut_mid_iteration_trains_as_one_process(
    s3: Any, bucket: str, shard_cache: Any, ps_cluster: Any, first: int, then: int
) -> None:
    """The first count's link ended by its time limit with rank 1's gradient of iteration 3
    pushed and rank 0's not: the new count's workers redo iteration 3 without it (at their own
    local batch) instead of waiting on a rank that is gone."""
    for n in (first, then):
        datasets.write_shards(s3, "builtin:digits", n, bucket, f"data-n{n}", seed=1)
    servers = ps_cluster(2, 4, learning_rate=0.1, momentum=0.9)
    events = _link(servers, bucket, f"data-n{first}", first, 0, 0, 3, 6)
    for server in servers:  # the cut link's leftover, at the first count's local batch
        with server.state.cond:
            size = server.state.params.size
            server.state.add_gradient(1, 3, np.full(size, 100.0, np.float32), first)
    _link(servers, bucket, f"data-n{then}", then, 3, 1, 3, 6)
    assert all(s.state.iteration == 6 and s.state.partials_superseded == 1 for s in servers)
    segments = [(f"data-n{first}", first, 3), (f"data-n{then}", then, 3)]
    want = reference_segments(s3, bucket, events[0], segments)
    np.testing.assert_allclose(ps_vector(servers), want, rtol=1e-4, atol=1e-5)


def test_an_iteration_without_a_count_averages_over_the_ps_workers() -> None:
    state = _state(3)
    with state.cond:
        for rank in range(2):
            state.add_gradient(rank, 0, np.ones(3, np.float32))
        assert state.iteration == 0  # two of --workers 3: waiting
        state.add_gradient(2, 0, np.ones(3, np.float32))
    assert state.iteration == 1 and state.n == 3
    np.testing.assert_allclose(state.params, -0.1 * np.ones(3))


def test_the_momentum_carries_over_a_change_of_count() -> None:
    state = _state(4)
    with state.cond:
        for rank in range(4):
            state.add_gradient(rank, 0, np.full(3, 2.0, np.float32), 4)
        before = state.momentum()
        for rank in range(2):
            state.add_gradient(rank, 1, np.full(3, 2.0, np.float32), 2)
    np.testing.assert_allclose(before, 2.0)
    np.testing.assert_allclose(state.momentum(), 0.9 * 2.0 + 2.0, rtol=1e-6)
    assert state.iteration == 2 and state.n == 2


def test_a_new_count_starts_again_the_iteration_a_cut_link_left_half_pushed() -> None:
    """Two workers' link was cut by its time limit after rank 1 pushed iteration 0; the re-plan
    switched to one worker, whose push must update alone, not wait for a rank that is gone."""
    state = _state(4)
    with state.cond:
        state.add_gradient(1, 0, np.full(3, 5.0, np.float32), 2)  # the cut link's leftover
        assert state.iteration == 0
        assert state.add_gradient(0, 0, np.ones(3, np.float32), 1)
    assert state.iteration == 1 and state.n == 1 and state.partials_superseded == 1
    np.testing.assert_allclose(state.params, -0.1 * np.ones(3))  # rank 0's gradient alone


def test_the_same_rank_under_a_new_count_is_not_taken_for_a_duplicate() -> None:
    state = _state(4)
    with state.cond:
        state.add_gradient(0, 0, np.full(3, 5.0, np.float32), 4)  # local batch of 4 workers
        assert state.add_gradient(0, 0, np.ones(3, np.float32), 2)  # rank 0 of 2: counted
        assert not state.add_gradient(0, 0, np.ones(3, np.float32), 2)  # its retry: duplicate
        state.add_gradient(1, 0, np.ones(3, np.float32), 2)
    assert state.iteration == 1 and state.partials_superseded == 1
    np.testing.assert_allclose(state.params, -0.1 * np.ones(3))


def test_a_rank_beyond_its_count_is_refused() -> None:
    state = _state(4)
    with state.cond:
        state.add_gradient(0, 0, np.ones(3, np.float32), 2)
        with pytest.raises(wire.WireError, match="rank 2 out of range 0..1"):
            state.add_gradient(2, 0, np.ones(3, np.float32), 2)


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(("first", "then"), [(2, 4), (4, 2)])
def test_s3_exchange_workers_switching_their_count_match_one_process(
    s3: Any, bucket: str, shard_cache: Any, first: int, then: int, cut: bool
) -> None:
    """The S3 exchange keeps its reducer count (k = 2) across the switch: its states hold the
    momentum as torch does, so the new count's reducers scale it by their own n. `cut`: the
    first link ended by its time limit with ranks 0 and 1 of the first count's gradients of
    iteration 3 written, which the new count's reducers must not read."""
    from functions import finalize, s3sync
    from functions.task import WorkerTask

    from .test_s3sync import BASE, s3_event

    for n in (first, then):
        datasets.write_shards(s3, "builtin:digits", n, bucket, f"data-n{n}", seed=1)

    def link(n: int, start: int, invocation: int) -> list[dict]:
        events = [
            s3_event(r, n, 2, bucket, dataset_prefix=f"data-n{n}", local_batch=GLOBAL_BATCH // n,
                     iterations=6, start_iteration=start, invocation=invocation,
                     iterations_per_invocation=3)
            for r in range(n)
        ]  # fmt: skip
        results = run_threads(worker.handler, [(e, None) for e in events])
        assert all(r["iteration"] == start + 3 for r in results)
        return events

    events = link(first, 0, 0)
    if cut:
        for part in range(2):
            for rank in range(2):
                s3.put_object(Bucket=bucket, Key=s3sync.grad_key(BASE, 3, part, first, rank),
                              Body=b"\x00" * 8)  # fmt: skip
    link(then, 3, 1)
    iteration, got = finalize.assemble_parameters(s3, WorkerTask.from_event(events[0]))
    assert iteration == 6
    segments = [(f"data-n{first}", first, 3), (f"data-n{then}", then, 3)]
    np.testing.assert_allclose(got, reference_segments(s3, bucket, events[0], segments),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
