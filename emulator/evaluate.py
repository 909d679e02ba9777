"""Held-out accuracy of the final model, computed from the artifacts alone.

The finalize step reports its own accuracy; this re-derives it from what a user would download
(`model.pt` from the artifacts bucket and `test.npz` named by the dataset manifest), so the
report proves the stored model is the trained one, not just that finalize said so.
"""

from __future__ import annotations

import io
from typing import Any

from emulator.records import RunRecord


def held_out_accuracy(record: RunRecord, s3: Any) -> dict[str, Any]:
    """{'accuracy', 'loss', 'samples', 'model_key', 'finalize_accuracy'} for the run's model."""
    import torch

    from functions import datasets, models
    from stacks import events

    plan = record.plan
    bucket, prefix = record.buckets["dataset"], events.shards_prefix(plan)
    manifest = datasets.read_manifest(s3, bucket, prefix)
    x, y = datasets.load_test(s3, bucket, prefix, manifest)
    model_key = f"{plan.job}/model.pt"
    body = s3.get_object(Bucket=record.buckets["artifacts"], Key=model_key)["Body"].read()
    state = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    model = models.build(plan.training.model, manifest["input_shape"], manifest["classes"], 0)
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = float(models.loss_function(plan.training.model)(logits, torch.from_numpy(y)))
        accuracy = float((logits.argmax(1).numpy() == y).mean())
    return {
        "accuracy": accuracy,
        "loss": loss,
        "samples": int(len(x)),
        "model_key": model_key,
        "finalize_accuracy": record.finalize_result.get("test_accuracy"),
    }
