"""Finalize: PS checkpoints → full model.pt + report.json in S3; also against seaweedfs."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from functions import datasets, finalize, models, worker
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer

from .conftest import SECRET, endpoints
from .helpers import ps_vector, run_threads, worker_event


def _load_model(s3: Any, bucket: str, event: dict[str, Any]) -> np.ndarray:
    body = s3.get_object(Bucket=bucket, Key=f"{event['job_id']}/model.pt")["Body"].read()
    manifest = datasets.read_manifest(s3, bucket, event["dataset_prefix"])
    model = models.build(event["model"], manifest["input_shape"], manifest["classes"], 0)
    model.load_state_dict(torch.load(io.BytesIO(body), weights_only=True))
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()


def test_finalize_writes_model_and_report(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    digits(2)
    iterations = 12
    servers = ps_cluster(
        2,
        2,
        learning_rate=0.1,
        momentum=0.9,
        artifacts_bucket=bucket,
        checkpoint_prefix="ckpt",
        checkpoint_every=5,
    )
    events = [
        worker_event(r, 2, endpoints(servers), bucket, iterations=iterations) for r in range(2)
    ]
    results = run_threads(worker.handler, [(e, None) for e in events])
    report = finalize.handler({**events[0], "results": results})
    assert report["iteration"] == iterations and report["complete"]
    assert report["ps_checkpoint_acks"] == [iterations, iterations]
    assert 0.0 <= report["test_accuracy"] <= 1.0 and report["test_samples"] > 0
    np.testing.assert_array_equal(_load_model(s3, bucket, events[0]), ps_vector(servers))
    stored = json.loads(s3.get_object(Bucket=bucket, Key="job-test/report.json")["Body"].read())
    assert stored["iteration"] == iterations and len(stored["workers"]) == 2


def test_finalize_returns_a_bounded_summary_however_long_the_links(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    """Step Functions holds the return value to 256 KiB: the per-iteration series stay in the
    links' records and the workers' links in report.json (a 15,000-iteration run of 3 workers
    returned 448 KB and failed the Finalize state)."""
    digits(2)
    servers = ps_cluster(2, 2, learning_rate=0.1, momentum=0.9, artifacts_bucket=bucket,
                         checkpoint_prefix="ckpt", checkpoint_every=5)  # fmt: skip
    events = [worker_event(r, 2, endpoints(servers), bucket, iterations=6) for r in range(2)]
    results = run_threads(worker.handler, [(e, None) for e in events])
    long = 20_000  # what the links of a long run record: one loss and one step time each
    for result in results:
        key = result["record_key"]
        record = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        record["losses"] = [[i, 2.302585] for i in range(long)]
        record["step_compute_s"] = [0.003125] * long
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(record).encode())
    summary = finalize.handler(events[0])
    assert len(json.dumps(summary)) < 8 * 1024
    assert summary["workers"] == 2 and summary["report_key"] == "job-test/report.json"
    stored = json.loads(s3.get_object(Bucket=bucket, Key="job-test/report.json")["Body"].read())
    links = [link for w in stored["workers"] for link in w["links"]]
    assert [link["losses_recorded"] for link in links] == [long, long]
    assert not [link for link in links if "losses" in link or "step_compute_s" in link]


def test_finalize_uses_s3_checkpoints_when_the_ps_is_gone(
    s3: Any, bucket: str, digits: Any, ps_cluster: Any
) -> None:
    digits(2)
    servers = ps_cluster(
        2,
        2,
        learning_rate=0.1,
        momentum=0.9,
        artifacts_bucket=bucket,
        checkpoint_prefix="ckpt",
        checkpoint_every=4,
    )
    events = [worker_event(r, 2, endpoints(servers), bucket, iterations=9) for r in range(2)]
    run_threads(worker.handler, [(e, None) for e in events])
    for server in servers:
        server.stop()
    # Rank 0 asked for a checkpoint when it finished, so iteration 9 is in S3.
    report = finalize.handler({**events[0], "ps_timeout_s": 1.0})
    assert report["ps_checkpoint_acks"] is None
    assert report["iteration"] == 9
    np.testing.assert_array_equal(_load_model(s3, bucket, events[0]), ps_vector(servers))


def test_training_and_finalize_against_seaweedfs(
    weed_endpoint: str, tmp_path: Path, monkeypatch: Any
) -> None:
    from functions.aws import s3_client

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    s3 = s3_client()
    s3.create_bucket(Bucket="weed-job")
    datasets.write_shards(s3, "builtin:digits", 2, "weed-job", "data", seed=1)
    servers = []
    try:
        for k in range(2):
            server = ParameterServer(
                PSConfig(
                    job_id="job-test",
                    shard=k,
                    shards=2,
                    workers=2,
                    secret=SECRET.encode(),
                    learning_rate=0.1,
                    momentum=0.9,
                    artifacts_bucket="weed-job",
                    checkpoint_prefix="ckpt",
                    checkpoint_every=3,
                )
            )
            server.start()
            servers.append(server)
        events = [
            worker_event(r, 2, endpoints(servers), "weed-job", iterations=6) for r in range(2)
        ]
        run_threads(worker.handler, [(e, None) for e in events])
        report = finalize.handler(events[0])
    finally:
        for server in servers:
            server.stop()
    assert report["iteration"] == 6
    np.testing.assert_array_equal(_load_model(s3, "weed-job", events[0]), ps_vector(servers))
