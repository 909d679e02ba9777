"""THE correctness test: n BSP workers + sharded PS == one process with the global batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from functions import worker

from .conftest import endpoints
from .helpers import link_losses, ps_vector, reference_params, run_threads, worker_event


@pytest.mark.parametrize(
    ("n_workers", "n_shards", "model"), [(2, 2, "mlp"), (3, 2, "cnn"), (3, 3, "mlp")]
)
def test_bsp_workers_match_single_process_sgd(
    s3: Any,
    bucket: str,
    digits: Any,
    ps_cluster: Any,
    n_workers: int,
    n_shards: int,
    model: str,
) -> None:
    digits(n_workers)
    iterations = 6
    servers = ps_cluster(n_shards, n_workers, learning_rate=0.1, momentum=0.9)
    events = [
        worker_event(r, n_workers, endpoints(servers), bucket, model=model, iterations=iterations)
        for r in range(n_workers)
    ]
    results = run_threads(worker.handler, [(e, None) for e in events])

    assert all(r["done"] and r["iteration"] == iterations for r in results)
    for r in results:  # the contract's return shape, with every timing term
        assert set(r) >= {"done", "iteration", "next_event", "record_key", "timings"}
        assert [it for it, _ in link_losses(s3, bucket, r)] == list(range(iterations))
        assert set(r["timings"]) >= {
            "load_s",
            "compute_s",
            "communication_s",
            "startup_s",
            "wait_s",
            "push_s",
            "pull_transfer_s",
            "total_s",
            "train_cpu_s",
        }
        assert r["timings"]["compute_s"] > 0 and r["next_event"]["start_iteration"] == iterations
        # the loop's CPU seconds and the peak resident set are reported (the workers are
        # threads of one process here, so the CPU is the process's, not one worker's)
        assert r["timings"]["train_cpu_s"] > 0 and r["peak_rss_mb"] > 0
    assert all(s.state.iteration == iterations for s in servers)
    got = ps_vector(servers)
    want = reference_params(s3, bucket, events[0], iterations)
    initial = reference_params(s3, bucket, events[0], 0)
    assert got.shape == want.shape
    # Training moved the parameters, and to the same place as the single process.
    assert np.abs(want - initial).max() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_different_global_batch_would_not_match(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """The comparison above can fail: one iteration fewer is far outside the tolerance."""
    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9)
    events = [worker_event(r, 2, endpoints(servers), bucket, iterations=4) for r in range(2)]
    run_threads(worker.handler, [(e, None) for e in events])
    fewer = reference_params(s3, bucket, events[0], 3)
    assert not np.allclose(ps_vector(servers), fewer, rtol=1e-4, atol=1e-5)


def test_shard_update_matches_torch_sgd_across_update_blocks() -> None:
    """The PS update alone, on a shard larger than one cache block, against torch.optim.SGD."""
    import torch

    from functions.ps.config import PSConfig
    from functions.ps.state import UPDATE_BLOCK, ShardState

    size = 9 * UPDATE_BLOCK + 12_345  # several blocks, and split across threads
    rng = np.random.default_rng(0)
    init = rng.standard_normal(size, dtype=np.float32)
    state = ShardState(
        PSConfig(
            job_id="j", shard=0, shards=1, workers=3, secret=b"s", learning_rate=0.05, momentum=0.8
        )
    )
    with state.cond:  # ShardState's callers hold its condition
        state.adopt(size, init, np.zeros(size, np.float32), 0)
    param = torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt = torch.optim.SGD([param], lr=0.05, momentum=0.8)
    for it in range(4):
        grads = [rng.standard_normal(size, dtype=np.float32) for _ in range(3)]
        with state.cond:
            for rank, grad in enumerate(grads):
                state.add_gradient(rank, it, grad.copy())
        param.grad = torch.from_numpy(np.mean(grads, axis=0, dtype=np.float32))
        opt.step()
    assert state.iteration == 4
    np.testing.assert_allclose(state.params, param.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        state.momentum(), opt.state[param]["momentum_buffer"].numpy(), rtol=1e-5, atol=1e-5
    )
