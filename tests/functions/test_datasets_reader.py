"""A model file's own `read_dataset(path) -> (x, y)`: data in a format the project does not read,
local and on S3, through the prepare step; its mistakes named in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import datasets, models
from functions.model_spec import defines_function

READER_MODEL = '''
import json
from pathlib import Path

import numpy as np
from torch import nn


def build(input_shape, classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), classes))


def read_dataset(path):
    """JSON lines of {"features": [...], "label": k}: a format the project does not read."""
    p = Path(path)
    rows = [json.loads(line) for f in sorted(p.glob("*.jsonl") if p.is_dir() else [p])
            for line in f.read_text().splitlines()]
    return np.array([r["features"] for r in rows]), np.array([r["label"] for r in rows])
'''


def _jsonl(folder: Path, rows: int = 12) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f'{{"features": [{i}, {2 * i}, {3 * i}], "label": {i % 3}}}' for i in range(rows)]
    (folder / "part-0.jsonl").write_text("\n".join(lines))
    return folder


@pytest.fixture
def reader(tmp_path: Path) -> Any:
    (tmp_path / "m.py").write_text(READER_MODEL)
    fn = models.dataset_reader("m.py:build", root=tmp_path)
    assert fn is not None and defines_function("m.py:build", "read_dataset", root=tmp_path)
    return fn


def test_the_zoo_and_a_file_without_one_bring_no_reader(tmp_path: Path) -> None:
    assert models.dataset_reader("mlp") is None
    assert not defines_function("mlp", "read_dataset")
    (tmp_path / "plain.py").write_text("def build(s, c):\n    return None\n")
    assert models.dataset_reader("plain.py:build", root=tmp_path) is None
    (tmp_path / "broken.py").write_text("def build(:\n")
    assert not defines_function("broken.py:build", "read_dataset", root=tmp_path)  # not parsed


def test_a_local_folder_is_read_by_the_files_reader_and_sharded(
    s3: Any, bucket: str, tmp_path: Path, reader: Any
) -> None:
    folder = _jsonl(tmp_path / "data")
    data = datasets.read_source(str(folder), reader=reader)
    assert data.x.dtype == np.float32 and data.x.shape == (12, 3) and data.y.dtype == np.int64
    assert data.y.tolist() == [i % 3 for i in range(12)]
    manifest = datasets.write_shards(s3, str(folder), 2, bucket, "jl", test_fraction=0,
                                     reader=reader)  # fmt: skip
    assert manifest["input_shape"] == [3] and manifest["classes"] == 3
    assert manifest["train_samples"] == 12


def test_an_s3_prefix_is_copied_locally_for_the_reader_and_the_copy_removed(
    s3: Any, bucket: str, tmp_path: Path, reader: Any, shard_cache: Path
) -> None:
    folder = _jsonl(tmp_path / "data")
    s3.upload_file(str(folder / "part-0.jsonl"), bucket, "source/part-0.jsonl")
    remote = datasets.read_source(f"s3://{bucket}/source", s3=s3, reader=reader)
    local = datasets.read_source(str(folder), reader=reader)
    assert np.array_equal(remote.x, local.x) and np.array_equal(remote.y, local.y)
    one = datasets.read_source(f"s3://{bucket}/source/part-0.jsonl", s3=s3, reader=reader)
    assert np.array_equal(one.y, local.y)  # one object named by its key
    # a warm Lambda keeps /tmp: no copy of the user's data is left in it, read or refused
    s3.put_object(Bucket=bucket, Key="bad/part-0.jsonl", Body=b"not json")
    with pytest.raises(datasets.DatasetError, match="read_dataset failed"):
        datasets.read_source(f"s3://{bucket}/bad", s3=s3, reader=reader)
    assert not list(shard_cache.parent.glob("ldnn-source-*"))


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ("raise ValueError('no such column')",
         "the model file's read_dataset failed: ValueError: no such column"),
        ("return np.zeros(4), np.zeros(4, int)",
         "read_dataset returned x is float64 shaped (4,), expected numbers with samples first"),
        ("return np.zeros((4, 2)), np.array([0.5, 1, 0, 1])",
         "read_dataset returned y is float64 shaped (4,), expected one class index ≥ 0 per sample"),
        ("return np.zeros((4, 2)), np.array([0, 1, 0])",
         "read_dataset returned x has 4 samples but y has 3"),
        ("return np.zeros((4, 2)), np.zeros(4, int)",
         "read_dataset returned every sample has one class; a classifier needs 2 classes or more"),
    ],
)  # fmt: skip
def test_a_reader_that_gets_it_wrong_is_named_in_one_line(
    tmp_path: Path, returned: str, problem: str
) -> None:
    source = f"import numpy as np\n\ndef read_dataset(path):\n    {returned}\n"
    (tmp_path / "m.py").write_text(source)
    fn = models.dataset_reader("m.py:build", root=tmp_path)
    assert fn is not None
    with pytest.raises(datasets.DatasetError) as err:
        datasets.read_source(str(tmp_path), reader=fn)
    assert str(err.value) == f"bad source {str(tmp_path)!r}: {problem}"
