"""One pipeline stage's training step (GPipe), for a worker event with a `stage`.

Stage s of S holds blocks [first_block, stop_block) of the model (functions.blocks) and is its
own data-parallel group over those parameters: functions.worker runs the same BSP loop, the
same Exchange (PS or S3, the stage's own endpoints and prefixes) and the same checkpoints and
links as for a one-stage plan, and calls `StageStep.step` where it would compute a gradient.

A step is GPipe's: the replica's local batch (the one-stage worker's batch for its rank) cut
into M micro-batches, all M forwards, then all M backwards. Stage 0 reads the data, the others
take the previous stage's activation from S3 (functions.boundary); the last stage computes the
loss of each micro-batch scaled by 1/M, so the M gradients it accumulates sum to the gradient of
the local batch's mean loss, exactly what the one-stage worker computes; each stage sends its
input's gradient back and accumulates its own parameters' gradients over the M micro-batches.
No micro-batch is in flight across an iteration boundary, so a stage killed mid-iteration and
re-invoked recomputes that iteration from the objects still in S3 and the exchange's state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from functions import datasets, models
from functions.blocks import stage_module
from functions.boundary import Boundaries, BoundaryTimings
from functions.polling import cost_balanced_gap_s
from functions.runs import links_prefix
from functions.task import StageTask, WorkerTask


def stage_flat(model: torch.nn.Module, stage: StageTask) -> models.FlatModel:
    """The stage's blocks as one module, its parameters one flat vector (what it syncs)."""
    return models.flat_parameters(stage_module(model, stage.first_block, stage.stop_block))


def needs_data(stage: StageTask) -> bool:
    """Stage 0 reads the samples, the last stage the labels; the others read no shard."""
    return stage.is_first or stage.is_last


def stage_link_record_key(task: WorkerTask, stage: StageTask) -> str:
    """A stage worker's link record: S stages share a rank, so the key names the stage."""
    return (f"{links_prefix(task.job_id, task.run_id)}stage-{stage.index:02d}-"
            f"rank-{task.rank:05d}-link-{task.invocation:05d}.json")  # fmt: skip


@dataclass
class StageStep:
    """One stage worker's step: compute its flat gradient of an iteration, boundaries included."""

    task: WorkerTask
    stage: StageTask
    flat: models.FlatModel
    loss_fn: models.LossFn
    boundaries: Boundaries
    x: np.ndarray  # this rank's shard (empty for a middle stage)
    y: np.ndarray
    step_wait_s: list[float] = field(default_factory=list)  # per step: waiting for peers
    step_transfer_s: list[float] = field(default_factory=list)  # per step: boundary bytes

    @classmethod
    def for_task(cls, task: WorkerTask, s3: Any, flat: models.FlatModel,
                 loss_fn: models.LossFn, x: np.ndarray, y: np.ndarray) -> StageStep:  # fmt: skip
        assert task.stage is not None  # the worker calls this for a stage's event only
        boundaries = Boundaries(
            s3,
            task.artifacts_bucket,
            task.stage.boundary_prefix,
            task.job_id,
            task.run_id,
            task.rank,
            task.ps_timeout_s,
            cost_balanced_gap_s(task.memory_mb, task.n_workers * task.stage.count),
        )
        return cls(task, task.stage, flat, loss_fn, boundaries, x, y)

    @property
    def micro_batch(self) -> int:
        return self.task.local_batch // self.stage.micro_batches

    def step(self, iteration: int) -> float | None:
        """The stage's gradient of `iteration` into flat.grads; the local batch's mean loss on
        the last stage (None on the others, which never see it)."""
        timings = BoundaryTimings()
        t0 = time.perf_counter()
        self.forget(iteration - 1)
        timings.transfer_s += time.perf_counter() - t0  # a boundary request, not compute
        self.flat.zero_grad()
        indices = self._indices(iteration)
        kept = [
            self._forward(iteration, m, indices, timings) for m in range(self.stage.micro_batches)
        ]
        loss = self._backward(iteration, kept, timings)
        self.flat.sync_grads()
        self.step_wait_s.append(timings.wait_s)
        self.step_transfer_s.append(timings.transfer_s)
        return loss

    def forget(self, iteration: int) -> None:
        """Delete what this stage read in `iteration` once that iteration's stage sync is done
        (not at once: a stage killed before it synced re-reads them when re-invoked)."""
        inbound = []
        if not self.stage.is_first:
            inbound.append((self.stage.index - 1, "act"))
        if not self.stage.is_last:
            inbound.append((self.stage.index, "grad"))
        if iteration >= 0:
            self.boundaries.delete(inbound, iteration, self.stage.micro_batches)

    def _indices(self, iteration: int) -> np.ndarray | None:
        """The local batch's sample indices, exactly the one-stage worker's for this rank."""
        if not needs_data(self.stage):
            return None
        task = self.task
        return datasets.batch_indices(
            task.seed, task.rank, iteration, task.local_batch, len(self.x)
        )

    def _micro(self, indices: np.ndarray | None, m: int) -> np.ndarray:
        assert indices is not None  # only stages that read data ask
        return indices[m * self.micro_batch : (m + 1) * self.micro_batch]

    def _forward(self, iteration: int, m: int, indices: np.ndarray | None,
                 timings: BoundaryTimings) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Micro-batch m's forward: (its input, its output; the last stage's scaled loss)."""
        stage = self.stage
        if stage.is_first:
            inputs = torch.from_numpy(self.x[self._micro(indices, m)])
        else:
            array, took = self.boundaries.take(stage.index - 1, "act", iteration, m)
            timings.add(took)
            inputs = torch.from_numpy(array).requires_grad_()
        out = self.flat.model(inputs)
        if stage.is_last:
            labels = torch.from_numpy(self.y[self._micro(indices, m)])
            # A loss that is a mean over its samples (the default cross-entropy; a model file's
            # own must be one to be pipelined): the M equal micro-batches' means over M sum to
            # the batch's mean.
            return inputs, self.loss_fn(out, labels) / stage.micro_batches
        activation = out.detach().numpy()
        timings.transfer_s += self.boundaries.put(stage.index, "act", iteration, m, activation)
        return inputs, out

    def _backward(self, iteration: int, kept: list[tuple[torch.Tensor, torch.Tensor]],
                  timings: BoundaryTimings) -> float | None:  # fmt: skip
        """All M backwards in micro-batch order, each input's gradient sent back at once."""
        stage, loss = self.stage, 0.0
        for m, (inputs, out) in enumerate(kept):
            if stage.is_last:
                out.backward()
                loss += float(out.detach())
            else:
                grad, took = self.boundaries.take(stage.index, "grad", iteration, m)
                timings.add(took)
                out.backward(torch.from_numpy(grad))
            if not stage.is_first:
                assert inputs.grad is not None  # the input required grad
                sent = self.boundaries.put(
                    stage.index - 1, "grad", iteration, m, inputs.grad.numpy()
                )
                timings.transfer_s += sent
        return loss if stage.is_last else None

    def timings(self) -> dict[str, float]:
        """The link's boundary seconds, added to the worker's timings."""
        return {
            "boundary_wait_s": round(sum(self.step_wait_s), 6),
            "boundary_transfer_s": round(sum(self.step_transfer_s), 6),
        }

    def summary(self) -> dict[str, Any]:
        """What the link's bounded summary adds: the stage and its boundary requests."""
        return {"stage": self.stage.index, "boundary_requests": self.boundaries.counts.as_dict()}

    def steps(self) -> dict[str, list[float]]:
        """The link record's per-step boundary seconds (beside each step's compute)."""
        return {
            "step_boundary_wait_s": [round(s, 6) for s in self.step_wait_s],
            "step_boundary_transfer_s": [round(s, 6) for s in self.step_transfer_s],
        }

    def last_step_boundary_s(self) -> float:
        """The last step's boundary seconds: not compute."""
        return self.step_wait_s[-1] + self.step_transfer_s[-1] if self.step_wait_s else 0.0
