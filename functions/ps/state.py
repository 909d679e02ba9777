"""The shard's state under BSP: parameters of t and t-1, the momentum buffer, and the gradients
pushed for t, summed and applied (`sgd_momentum`) once all n ranks are in. n is the count the
iteration's workers name (a run that re-plans changes it between iterations), at most the
PS's --workers, which it is for a worker that names none."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time

import numpy as np

from functions import wire
from functions.ps.config import PSConfig

UPDATE_BLOCK = 1 << 18  # floats per block of the SGD update (1 MiB per array)
UPDATE_THREADS = max(1, min(4, os.cpu_count() or 1))


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
        self.partials_superseded = 0  # iterations a re-plan's new count started again
        self.generation = 0  # bumped whenever parameters are (re)installed: ends stale waits
        self.update_s = 0.0  # time spent averaging and applying updates (the model's PS term)
        self.rollbacks = 0
        self.n = config.workers  # the workers the current iteration averages over

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
        self.momentum_buf = np.ascontiguousarray(momentum, np.float32) * np.float32(self.n)
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
        return self.momentum_buf / np.float32(self.n)

    def _average_over(self, n: int) -> None:
        """Average the next update over `n` workers: the momentum is held scaled by the count
        (B = n·buf), so it is rescaled with it. Caller holds the condition, no gradient pending."""
        if n != self.n and self.momentum_buf.size:
            self.momentum_buf *= np.float32(n / self.n)
        self.n = n

    def add_gradient(self, rank: int, it: int, grad: np.ndarray, n: int | None = None) -> bool:
        """Take one rank's gradient for `it` (by reference); update when all n are in (`n`:
        the worker's count, None: the PS's --workers). The first gradient of an iteration sets
        its n; a worker naming another n starts the iteration again over its own.

        Returns False for a duplicate (already applied, or this rank already counted), which
        is ignored. Caller holds the condition.
        """
        n = self.config.workers if n is None else n
        if it > self.iteration:
            raise wire.WireError(
                f"gradient for iteration {it} but the shard is at {self.iteration}"
            )
        if it == self.iteration and self.pending and n != self.n:
            # Every worker of a link names the same count, so another count is the next
            # segment's: the pending gradients are what a link cut mid-iteration (its time
            # limit) left before a re-plan switched the count. The pace check runs only after
            # every link of a segment has returned, so none of their workers is left, and the
            # new count's workers redo the iteration at their own local batch.
            self.partials_superseded += 1
            self.pending = {}
        if it < self.iteration or rank in self.pending:
            self.duplicates_ignored += 1
            return False
        if not self.pending:
            self._average_over(n)
        if rank >= n:
            raise wire.WireError(f"rank {rank} out of range 0..{n - 1}")
        self.pending[rank] = grad
        if len(self.pending) == self.n:
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
        step = np.float32(-self.config.learning_rate / self.n)
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

    def close(self) -> None:
        """Wake every waiter and let the update threads go (the server stops). Caller holds
        the condition."""
        self.cond.notify_all()
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def params_for(self, it: int) -> np.ndarray:
        """Parameters of iteration `it` (t or t-1). Caller holds the condition."""
        if it == self.iteration:
            return self.params
        if it == self.iteration - 1:
            return self.prev_params
        raise wire.WireError(
            f"parameters of iteration {it} are not held (shard at {self.iteration})"
        )
