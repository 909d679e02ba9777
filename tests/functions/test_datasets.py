"""Dataset shards in S3 (moto server on 127.0.0.1): sources, equal shards, manifest, cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import datasets


def test_digits_shards_are_equal_disjoint_and_described(
    s3: Any, bucket: str, shard_cache: Path
) -> None:
    manifest = datasets.write_shards(s3, "builtin:digits", 3, bucket, "d", seed=0)
    assert manifest["input_shape"] == [1, 8, 8] and manifest["classes"] == 10
    assert manifest["synthetic"] is False
    assert manifest["test_samples"] == round(1797 * 0.2)
    per = manifest["samples_per_shard"]
    assert per == (1797 - manifest["test_samples"]) // 3
    assert datasets.read_manifest(s3, bucket, "d") == manifest
    seen = []
    for rank in range(3):
        x, y = datasets.load_shard(s3, bucket, "d", rank, manifest)
        assert x.shape == (per, 1, 8, 8) and x.dtype == np.float32 and y.shape == (per,)
        seen.append(x.reshape(per, -1))
    x_test, _ = datasets.load_test(s3, bucket, "d", manifest)
    rows = np.concatenate([*seen, x_test.reshape(len(x_test), -1)])
    # No sample is in two shards (digits has a few duplicate images, so compare counts).
    assert len(rows) == 1797 - manifest["dropped_samples"]


def test_shard_is_cached_and_size_checked(s3: Any, bucket: str, shard_cache: Path) -> None:
    manifest = datasets.write_shards(s3, "builtin:digits", 2, bucket, "d", seed=0)
    x1, _ = datasets.load_shard(s3, bucket, "d", 1, manifest)
    s3.delete_object(Bucket=bucket, Key="d/shard-00001.npz")
    x2, _ = datasets.load_shard(s3, bucket, "d", 1, manifest)  # served from the /tmp cache
    assert np.array_equal(x1, x2)
    huge = {**manifest, "shards": [{**manifest["shards"][0], "bytes": 600 * 1024 * 1024}]}
    with pytest.raises(datasets.DatasetError, match="does not fit ephemeral storage of 512 MB"):
        datasets.load_shard(s3, bucket, "d", 0, huge, ephemeral_storage_mb=512)


def test_synthetic_npz_folder_and_s3_sources(
    s3: Any, bucket: str, tmp_path: Path, shard_cache: Path
) -> None:
    manifest = datasets.write_shards(s3, "synthetic-cifar:50", 2, bucket, "syn", seed=0)
    assert manifest["synthetic"] is True and manifest["input_shape"] == [3, 32, 32]
    source = tmp_path / "source"  # beside the shard cache, not holding it
    source.mkdir()
    x, y = np.ones((10, 4), np.uint8) * 255, np.arange(10) % 2
    np.savez(source / "a.npz", x=x, y=y)
    np.savez(source / "b.npz", x=x, y=y)
    one = datasets.write_shards(s3, str(source / "a.npz"), 2, bucket, "one", test_fraction=0)
    assert one["train_samples"] == 10 and one["input_shape"] == [4]
    both = datasets.write_shards(s3, str(source), 2, bucket, "both", test_fraction=0)
    assert both["train_samples"] == 20
    xs, _ = datasets.load_shard(s3, bucket, "both", 0, both)
    assert xs.max() == 1.0  # uint8 images scaled to [0, 1]
    s3.upload_file(str(source / "a.npz"), bucket, "raw/a.npz")
    from_s3 = datasets.write_shards(s3, f"s3://{bucket}/raw/", 1, bucket, "s3src", test_fraction=0)
    assert from_s3["train_samples"] == 10


def test_batches_are_a_pure_function_of_seed_rank_iteration() -> None:
    a = datasets.batch_indices(1, 0, 5, 8, 20)
    assert np.array_equal(a, datasets.batch_indices(1, 0, 5, 8, 20))
    assert not np.array_equal(a, datasets.batch_indices(1, 1, 5, 8, 20))
    epoch = np.concatenate([datasets.batch_indices(1, 0, i, 5, 20) for i in range(4)])
    assert sorted(epoch) == list(range(20))  # one epoch visits every sample once


def test_bad_source_and_cli_one_line_error(s3: Any, bucket: str) -> None:
    with pytest.raises(datasets.DatasetError, match="^bad source 'nope': expected builtin:digits"):
        datasets.write_shards(s3, "nope", 2, bucket, "x")
    with pytest.raises(datasets.DatasetError, match="cannot fill 5000 shards"):
        datasets.write_shards(s3, "builtin:digits", 5000, bucket, "x")
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "functions.datasets",
            "shard",
            "--source",
            "synthetic-cifar:x",
            "--shards",
            "2",
            "--bucket",
            bucket,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2
    assert cli.stderr.strip() == (
        "functions.datasets: error: bad source 'synthetic-cifar:x': "
        "expected synthetic-cifar:<samples> with samples from 1 to 60000"
    )
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "functions.datasets",
            "shard",
            "--source",
            "builtin:digits",
            "--shards",
            "2",
            "--bucket",
            bucket,
            "--prefix",
            "cli",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert datasets.read_manifest(s3, bucket, "cli")["n_shards"] == 2


def test_prepare_writes_every_layout_once(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that re-plans prepares the shards of every worker count it may take, from the same
    data and seed; a layout already there is not written again."""
    layouts = [{"n_shards": 2, "dataset_prefix": "j/shards-n2"},
               {"n_shards": 4, "dataset_prefix": "j/shards-n4"}]  # fmt: skip
    event = {"source": "builtin:digits", "n_shards": 2, "dataset_bucket": bucket,
             "dataset_prefix": "j/shards-n2", "seed": 5, "layouts": layouts}  # fmt: skip
    written = []
    real = datasets.write_shards
    monkeypatch.setattr(datasets, "write_shards",
                        lambda s3_, src, n, b, at, **kw: written.append((n, at))
                        or real(s3_, src, n, b, at, **kw))  # fmt: skip
    manifest = datasets.prepare_handler(event)
    assert manifest["n_shards"] == 2 and written == [(2, "j/shards-n2"), (4, "j/shards-n4")]
    four = datasets.read_manifest(s3, bucket, "j/shards-n4")
    assert (four["n_shards"], four["seed"]) == (4, 5)
    # the same data split another way: the same test set, the training samples in equal shards
    # (a remainder of fewer than n samples is left out)
    assert four["test_samples"] == manifest["test_samples"]
    assert 0 <= manifest["samples_per_shard"] * 2 - four["samples_per_shard"] * 4 < 4
    written.clear()
    datasets.prepare_handler(event)  # a retried prepare step
    assert written == [(2, "j/shards-n2")]


@pytest.mark.parametrize(
    "layouts",
    [{"n_shards": 2}, [{"n_shards": 0, "dataset_prefix": "x"}], [{"n_shards": 2}],
     [{"n_shards": 2, "dataset_prefix": ""}], [{"n_shards": True, "dataset_prefix": "x"}]],
)  # fmt: skip
def test_prepare_refuses_bad_layouts_in_one_line_and_writes_nothing(
    s3: Any, bucket: str, layouts: Any
) -> None:
    event = {"source": "builtin:digits", "n_shards": 2, "dataset_bucket": bucket,
             "dataset_prefix": "p", "layouts": layouts}  # fmt: skip
    with pytest.raises(datasets.DatasetError, match="^prepare event .*layouts") as err:
        datasets.prepare_handler(event)
    assert "\n" not in str(err.value) and "expected a list of" in str(err.value)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
