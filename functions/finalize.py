"""Finalize a job: checkpoint the PS shards, assemble the model, write model.pt and report.json.

`handler(event, context)` takes the worker event of the job (any rank) with its run. It asks each
PS shard for a checkpoint (if the PS is already gone, or in sync mode "s3", where each reducer
checkpoints its partition as a shard, the run's checkpoints in S3 are used),
loads the newest iteration every shard has, concatenates the shards into the full parameter
vector, evaluates on the held-out test split and writes `s3://<artifacts_bucket>/<job_id>/model.pt`
(a state_dict) and `report.json`, whose `workers` are the run's link records (functions.runs).

A pipelined run gets the same whole-job event (the stacks' `worker_event`: every stage's PS
endpoints, stage by stage, and the job's checkpoint prefix). Its link records, one per
(stage, rank) link, name their stage: the stage count S is one more than the highest. Stage s
checkpoints under `{checkpoint_prefix}/stage-{s:02d}` (its own `reducers`, or its `ps_count` =
endpoints / S shards), and the model's parameters are the stages' vectors in stage order
(a stage's blocks are a contiguous run of the model's, so its flat vector is a contiguous run).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from functions import datasets, models, wire
from functions.aws import list_keys, naming_s3_failures, resolve_secret, s3_client
from functions.ps.checkpoints import CheckpointStore
from functions.ps_client import PSClient
from functions.runs import links_prefix
from functions.s3sync import checkpoint_secret
from functions.task import WorkerTask

LOG = logging.getLogger("functions.finalize")
# Besides the losses, a link record's other series of one entry per iteration: the report
# leaves them in the record (its size grew with the iterations, past Step Functions' limit).
PER_ITERATION_SERIES = ("step_compute_s", "step_boundary_wait_s", "step_boundary_transfer_s")


def request_checkpoints(task: WorkerTask, timeout_s: float = 30.0) -> list[int] | None:
    """Ask every shard to checkpoint now; None if the PS cannot be reached."""
    client = PSClient(
        task.ps_endpoints,
        task.job_id,
        -1,
        resolve_secret(task.secret_ref),
        0,
        timeout_s=timeout_s,
        connect_timeout_s=min(timeout_s, 5.0),
        run_id=task.run_id,
        run_started=task.run_started,
    )
    try:
        client.connect()
        return client.checkpoint()
    except (wire.PSTimeout, wire.PSDisconnected, wire.WireError, wire.RemoteError, OSError) as exc:
        LOG.warning("PS not reachable for a final checkpoint (%s); using checkpoints in S3", exc)
        return None
    finally:
        client.close()


def ask_for_checkpoints(tasks: list[WorkerTask]) -> list[int] | None:
    """Each stage's shards checkpoint now (stage by stage, the acks in the job's endpoint
    order); None if any stage's PS cannot be reached."""
    acks: list[int] = []
    for task in tasks:
        acked = request_checkpoints(task, timeout_s=min(task.ps_timeout_s, 30.0))
        if acked is None:
            return None
        acks += acked
    return acks


def checkpoint_shards(task: WorkerTask) -> int:
    """How many parts the run's checkpoints come in: a PS shard's each, or (sync "s3") a
    reducer's partition each, in the same format (functions.s3sync)."""
    return task.reducers if task.sync == "s3" else len(task.ps_endpoints)


def stage_tasks(task: WorkerTask, stages: int) -> list[WorkerTask]:
    """The whole-job task cut into each stage's: its checkpoint prefix and its own PS shards
    (the job's endpoints list stage 0's shards first, each stage the same count)."""
    if len(task.ps_endpoints) % stages:
        raise ValueError(f"{len(task.ps_endpoints)} PS endpoints: expected a multiple of the "
                         f"{stages} stages (each stage its own shards)")  # fmt: skip
    per_stage = len(task.ps_endpoints) // stages
    return [
        dataclasses.replace(task, checkpoint_prefix=f"{task.checkpoint_prefix}/stage-{s:02d}",
                            ps_endpoints=task.ps_endpoints[s * per_stage:(s + 1) * per_stage])
        for s in range(stages)
    ]  # fmt: skip


def checkpoint_store(s3: Any, task: WorkerTask) -> CheckpointStore:
    """The run's checkpoints of `task`'s shards (a checkpoint that does not verify is refused)."""
    return CheckpointStore(s3, task.artifacts_bucket, task.run_checkpoint_prefix,
                           checkpoint_shards(task), secret=checkpoint_secret(task))  # fmt: skip


def assemble_parameters(s3: Any, task: WorkerTask) -> tuple[int, np.ndarray]:
    """(iteration, full parameter vector) from the newest checkpoint every shard holds."""
    return assemble_stages(s3, [task])


def assemble_stages(s3: Any, tasks: list[WorkerTask]) -> tuple[int, np.ndarray]:
    """(iteration, full parameter vector) from the newest iteration every shard of every
    stage holds (one task per stage), the stages' vectors in stage order."""
    stores = [checkpoint_store(s3, task) for task in tasks]
    held = [its for store in stores for its in store.iterations_by_shard().values()]
    common = set.intersection(*held) if len(held) == sum(s.shards for s in stores) else set()
    if not common:
        where = ", ".join(f"s3://{t.artifacts_bucket}/{t.run_checkpoint_prefix}" for t in tasks)
        raise RuntimeError(f"no PS checkpoint in {where} common to all "
                           f"{sum(s.shards for s in stores)} shards")  # fmt: skip
    iteration = max(common)
    parts = [store.load(k, iteration)["params"] for store in stores for k in range(store.shards)]
    return iteration, np.concatenate(parts).astype(np.float32, copy=False)


def link_records(s3: Any, task: WorkerTask) -> list[dict[str, Any]]:
    """This run's link records, in key order (stage, rank and link are zero-padded in the key:
    sorted is in order), their per-iteration series left in S3 (`losses_key` names each)."""
    records = []
    for key in sorted(list_keys(s3, task.artifacts_bucket, links_prefix(task.job_id, task.run_id))):
        record = json.loads(s3.get_object(Bucket=task.artifacts_bucket, Key=key)["Body"].read())
        losses = record.pop("losses", [])
        for series in PER_ITERATION_SERIES:
            record.pop(series, None)
        records.append({**record, "losses_key": key, "losses_recorded": len(losses)})
    return records


def stage_count(records: list[dict[str, Any]]) -> int | None:
    """A pipelined run's S (its records name their stage); None for a one-stage run."""
    stages = [int(r["stage"]) for r in records if "stage" in r]
    return max(stages) + 1 if stages else None


def worker_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each worker's links, in order: a worker is a rank, or in a pipelined run a (stage, rank)."""
    by_worker: dict[tuple[int, ...], list[dict[str, Any]]] = {}
    for record in records:
        stage = (int(record["stage"]),) if "stage" in record else ()
        by_worker.setdefault((*stage, int(record.get("rank", -1))), []).append(record)
    return [
        {
            **({"stage": worker[0]} if len(worker) == 2 else {}),
            "rank": worker[-1],
            "links": links,
            "iterations_run": sum(int(link.get("iterations_run", 0)) for link in links),
            "iteration": links[-1].get("iteration"),
            "loss": links[-1].get("loss"),
        }
        for worker, links in sorted(by_worker.items())
    ]


def evaluate(
    model: torch.nn.Module, x: np.ndarray, y: np.ndarray, loss_fn: models.LossFn = F.cross_entropy
) -> dict[str, float]:
    """Held-out loss (the model file's own loss) and accuracy (argmax of the class scores)."""
    if len(x) == 0:
        return {"test_samples": 0}
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = float(loss_fn(logits, torch.from_numpy(y)))
        accuracy = float((logits.argmax(1).numpy() == y).mean())
    return {"test_samples": len(x), "test_loss": loss, "test_accuracy": accuracy}


@naming_s3_failures()
def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    task = WorkerTask.from_event(event)
    s3 = s3_client()
    records = link_records(s3, task)
    stages = stage_count(records)
    tasks = [task] if stages is None else stage_tasks(task, stages)
    # In s3 mode the reducers checkpointed at the end of their links: there is no PS to ask.
    acked = ask_for_checkpoints(tasks) if task.sync == "ps" else None
    iteration, vector = assemble_stages(s3, tasks)
    manifest = datasets.read_manifest(s3, task.dataset_bucket, task.dataset_prefix)
    model = models.build(task.model, manifest["input_shape"], manifest["classes"], task.seed)
    flat = models.flat_parameters(model)
    if vector.size != flat.params.numel():
        raise RuntimeError(
            f"checkpoint holds {vector.size} parameters, model {task.model!r} has "
            f"{flat.params.numel()}"
        )
    with torch.no_grad():
        flat.params.copy_(torch.from_numpy(vector))
    model.eval()
    x_test, y_test = datasets.load_test(s3, task.dataset_bucket, task.dataset_prefix, manifest)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    base = f"{task.job_id}/"
    s3.put_object(Bucket=task.artifacts_bucket, Key=base + "model.pt", Body=buf.getvalue())
    report = {
        "job_id": task.job_id,
        "model": task.model,
        "parameters": int(vector.size),
        "iteration": iteration,
        "iterations_planned": task.iterations,
        "complete": iteration >= task.iterations,
        "ps_checkpoint_acks": acked,
        "dataset": {k: manifest[k] for k in ("source", "synthetic", "train_samples")},
        **evaluate(model, x_test, y_test, models.loss_function(task.model)),
        "model_uri": f"s3://{task.artifacts_bucket}/{base}model.pt",
        "run_id": task.run_id,
        **({"stages": stages} if stages is not None else {}),
        "workers": worker_records(records),
    }
    s3.put_object(
        Bucket=task.artifacts_bucket,
        Key=base + "report.json",
        Body=json.dumps(report, indent=2, sort_keys=True, default=str).encode(),
        ContentType="application/json",
    )
    # The state machine holds the return value to 256 KiB: the workers' links (n × links of
    # them) stay in report.json, the return value says where it is.
    summary = {k: v for k, v in report.items() if k != "workers"}
    return {**summary, "workers": len(report["workers"]), "report_key": base + "report.json"}
