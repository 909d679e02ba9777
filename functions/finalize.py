"""Finalize a job: checkpoint the PS shards, assemble the model, write model.pt and report.json.

`handler(event, context)` takes the worker event of the job (any rank) with its run. It asks each
PS shard for a checkpoint (if the PS is already gone, or in sync mode "s3", where each reducer
checkpoints its partition as a shard, the run's checkpoints in S3 are used),
loads the newest iteration every shard has, concatenates the shards into the full parameter
vector, evaluates on the held-out test split and writes `s3://<artifacts_bucket>/<job_id>/model.pt`
(a state_dict) and `report.json`, whose `workers` are the run's link records (functions.runs).
"""

from __future__ import annotations

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
PER_ITERATION_SERIES = ("step_compute_s",)


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


def checkpoint_shards(task: WorkerTask) -> int:
    """How many parts the run's checkpoints come in: a PS shard's each, or (sync "s3") a
    reducer's partition each, in the same format (functions.s3sync)."""
    return task.reducers if task.sync == "s3" else len(task.ps_endpoints)


def assemble_parameters(s3: Any, task: WorkerTask) -> tuple[int, np.ndarray]:
    """(iteration, full parameter vector) from the newest checkpoint every shard holds."""
    shards = checkpoint_shards(task)
    store = CheckpointStore(
        s3,
        task.artifacts_bucket,
        task.run_checkpoint_prefix,
        shards,
        secret=checkpoint_secret(task),  # a checkpoint that does not verify is refused
    )
    iteration = store.latest_common_iteration()
    if iteration is None:
        raise RuntimeError(
            f"no PS checkpoint in s3://{task.artifacts_bucket}/{task.run_checkpoint_prefix} "
            f"common to all {shards} shards"
        )
    parts = [store.load(k, iteration)["params"] for k in range(shards)]
    return iteration, np.concatenate(parts).astype(np.float32, copy=False)


def worker_records(s3: Any, task: WorkerTask) -> list[dict[str, Any]]:
    """Each rank's links of this run, in order, as the workers recorded them (losses and step
    times left in S3: `losses_key` names each link's record)."""
    prefix = links_prefix(task.job_id, task.run_id)
    by_rank: dict[int, list[dict[str, Any]]] = {}
    # rank and link are zero-padded in the key: sorted is in order
    for key in sorted(list_keys(s3, task.artifacts_bucket, prefix)):
        body = s3.get_object(Bucket=task.artifacts_bucket, Key=key)["Body"].read()
        record = json.loads(body)
        losses = record.pop("losses", [])
        for series in PER_ITERATION_SERIES:
            record.pop(series, None)
        link = {**record, "losses_key": key, "losses_recorded": len(losses)}
        by_rank.setdefault(int(record.get("rank", -1)), []).append(link)
    return [
        {
            "rank": rank,
            "links": links,
            "iterations_run": sum(int(link.get("iterations_run", 0)) for link in links),
            "iteration": links[-1].get("iteration"),
            "loss": links[-1].get("loss"),
        }
        for rank, links in sorted(by_rank.items())
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
    # In s3 mode the reducers checkpointed at the end of their links: there is no PS to ask.
    acked = (
        request_checkpoints(task, timeout_s=min(task.ps_timeout_s, 30.0))
        if task.sync == "ps"
        else None
    )
    iteration, vector = assemble_parameters(s3, task)
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
        "workers": worker_records(s3, task),
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
