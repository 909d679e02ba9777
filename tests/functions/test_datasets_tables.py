"""CSV tables of numeric features and a label column, local and on S3, through the prepare step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import datasets

IRIS = """sepal,petal,species
5.1,1.4,setosa
7.0,4.7,versicolor
6.3,6.0,virginica
4.9,1.4,setosa
6.4,4.5,versicolor
5.8,5.1,virginica
"""


def _table(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_integer_labels_in_the_default_column_round_trip_through_the_shards(
    s3: Any, bucket: str, tmp_path: Path, shard_cache: Path
) -> None:
    rows = "".join(f"{i},{i * 10},{i % 2}\n" for i in range(8))
    table = _table(tmp_path / "t" / "table.csv", "a,b,label\n" + rows)
    manifest = datasets.write_shards(s3, str(table), 2, bucket, "tab", test_fraction=0)
    assert manifest["input_shape"] == [2] and manifest["classes"] == 2
    assert manifest["class_names"] is None  # integer labels name no classes
    for rank in range(2):
        x, y = datasets.load_shard(s3, bucket, "tab", rank, manifest)
        assert x.shape == (4, 2) and x.dtype == np.float32 and y.dtype == np.int64
        assert np.array_equal(x[:, 1], x[:, 0] * 10)  # features in column order
        assert np.array_equal(y, x[:, 0].astype(np.int64) % 2)
    # The folder holding one .csv reads the same.
    assert (
        datasets.write_shards(s3, str(tmp_path / "t"), 2, bucket, "dir", test_fraction=0)[
            "train_samples"
        ]
        == 8
    )


def test_string_labels_in_a_named_column_become_sorted_class_names(tmp_path: Path) -> None:
    table = _table(tmp_path / "iris.csv", "\ufeff" + IRIS)  # a spreadsheet's BOM is no column
    data = datasets.read_source(f"{table}#label=species")
    assert data.class_names == ("setosa", "versicolor", "virginica")
    assert data.y.tolist() == [0, 1, 2, 0, 1, 2]
    assert data.x.shape == (6, 2) and data.x.dtype == np.float32
    assert data.x[0].tolist() == pytest.approx([5.1, 1.4])


def test_an_s3_key_and_an_s3_prefix_read_as_the_local_table_does(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    table = _table(tmp_path / "iris.csv", IRIS)
    s3.upload_file(str(table), bucket, "source/iris.csv")
    local = datasets.read_source(f"{table}#label=species")
    for source in (f"s3://{bucket}/source/iris.csv#label=species",
                   f"s3://{bucket}/source#label=species"):  # fmt: skip
        remote = datasets.read_source(source, s3=s3)
        assert remote.class_names == local.class_names
        assert np.array_equal(remote.x, local.x) and np.array_equal(remote.y, local.y)
    manifest = datasets.write_shards(
        s3, f"s3://{bucket}/source/#label=species", 1, bucket, "s", test_fraction=0
    )
    assert manifest["class_names"] == ["setosa", "versicolor", "virginica"]


def _error(source: Path | str) -> str:
    with pytest.raises(datasets.DatasetError) as info:
        datasets.read_source(str(source))
    return str(info.value)


def test_a_missing_label_column_names_the_columns_there_are(tmp_path: Path) -> None:
    table = _table(tmp_path / "iris.csv", IRIS)
    assert _error(table) == (
        f"bad source '{table}': 'iris.csv' has no column 'label' (its columns: sepal, petal, "
        "species); name the label column with #label=<column>"
    )


def test_a_value_that_is_not_a_number_is_named_by_line_and_column(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.csv", "a,b,label\n1,2,0\n3,x,1\n")
    assert _error(table) == (
        f"bad source '{table}': 't.csv' line 3, column 'b': 'x' is not a number"
    )
    _table(table, "a,b,label\n1,2,0\n3,4,1\n5,nan,1\n")
    assert _error(table) == (
        f"bad source '{table}': 't.csv' line 4, column 'b': 'nan' is not a number"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a,label\n1,0\n2\n", "'t.csv' line 3: the header has 2 columns, this row 1"),
        ("a,label\n1,0\n2,\n", "'t.csv' line 3 has an empty 'label'"),
        ("a,label\n", "'t.csv' has a header and no rows"),
        ("label\n0\n1\n", "'t.csv' has no feature columns besides 'label'"),
        ("a,label\n1,0\n2,0\n", "every sample has label 0; a classifier needs 2 classes or more"),
        ("a,label\n1,x\n2,x\n", "every sample has class 'x'; a classifier needs 2 classes or more"),
    ],
)
def test_a_malformed_table_is_refused_in_one_line(tmp_path: Path, text: str, problem: str) -> None:
    table = _table(tmp_path / "t.csv", text)
    assert _error(table) == f"bad source '{table}': {problem}"


def test_two_tables_in_a_folder_ask_for_one_and_options_are_checked(tmp_path: Path) -> None:
    _table(tmp_path / "a.csv", IRIS)
    _table(tmp_path / "b.csv", IRIS)
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': 2 tables (a.csv, b.csv): name one of them"
    )
    assert _error(f"{tmp_path}/a.csv#target=species") == (
        f"bad source '{tmp_path}/a.csv#target=species': option #target=species is not "
        "accepted; use #label=<column>"
    )


# -- Parquet: the same table rules, read with pyarrow ------------------------------------------
def _parquet(path: Path, columns: dict[str, list[Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def test_a_parquet_table_reads_as_its_csv_does_locally_and_on_s3(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    csv_table = _table(tmp_path / "csv" / "iris.csv", IRIS)
    rows = [line.split(",") for line in IRIS.strip().splitlines()[1:]]
    table = _parquet(tmp_path / "pq" / "iris.parquet", {
        "sepal": [float(r[0]) for r in rows], "petal": [float(r[1]) for r in rows],
        "species": [r[2] for r in rows],
    })  # fmt: skip
    want = datasets.read_source(f"{csv_table}#label=species")
    for source in (f"{table}#label=species", f"{table.parent}#label=species"):
        got = datasets.read_source(source)
        assert got.class_names == want.class_names
        assert np.array_equal(got.x, want.x) and np.array_equal(got.y, want.y)
    s3.upload_file(str(table), bucket, "pq/iris.parquet")
    manifest = datasets.write_shards(
        s3, f"s3://{bucket}/pq/iris.parquet#label=species", 1, bucket, "s", test_fraction=0
    )
    assert manifest["class_names"] == ["setosa", "versicolor", "virginica"]
    assert manifest["input_shape"] == [2] and manifest["train_samples"] == 6


def test_integer_and_boolean_parquet_columns_are_numbers(tmp_path: Path) -> None:
    columns = {"a": [1, 2, 3, 4], "b": [True, False, True, False], "label": [0, 1, 0, 1]}
    table = _parquet(tmp_path / "t.parquet", columns)
    data = datasets.read_source(str(table))
    assert data.x.tolist() == [[1, 1], [2, 0], [3, 1], [4, 0]] and data.class_names is None


@pytest.mark.parametrize(
    ("columns", "problem"),
    [
        ({"a": [1.0, 2.0], "kind": [0, 1]},
         "'t.parquet' has no column 'label' (its columns: a, kind); name the label column with "
         "#label=<column>"),
        ({"a": ["x", "y"], "label": [0, 1]}, "'t.parquet' column 'a' holds string, not numbers"),
        ({"a": [1.0, None], "label": [0, 1]},
         "'t.parquet' row 2, column 'a': None is not a number"),
        ({"a": [1.0, 2.0], "label": [0, None]}, "'t.parquet' row 2 has an empty 'label'"),
    ],
)  # fmt: skip
def test_a_bad_parquet_table_is_named_in_one_line(
    tmp_path: Path, columns: dict[str, list[Any]], problem: str
) -> None:
    table = _parquet(tmp_path / "t.parquet", columns)
    assert _error(table) == f"bad source '{table}': {problem}"
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    junk = _error(tmp_path / "junk.parquet")
    assert "'junk.parquet' is not a Parquet table Arrow reads: " in junk
