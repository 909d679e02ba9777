"""stacks/context.py: every key from CLI strings and cdk.json JSON types; every message's text."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner import parse_duration_s, parse_slack, parse_usd
from stacks.context import ContextError, DatasetSource, read_context

BASE: dict[str, Any] = {
    "workload": "digits-mlp",
    "catalog": "lambda-2025",
    "dataset": "builtin:digits",
    "job": "digits-demo",
    "default_deadline": "2h",
}

DATASET_ACCEPTED = (
    "use builtin:digits, synthetic-cifar:N or synthetic-tokens:N (N from 1 to 60000 samples), "
    "s3://bucket/prefix, or an existing local folder (of .npz files, of class folders of images, "
    "or with one .csv or .parquet table) or .npz, .csv or .parquet file"
)


def read(**values: Any) -> Any:
    merged = {**BASE, **values}
    return read_context(
        {k: v for k, v in merged.items() if v is not ...},
        parse_duration_s=parse_duration_s,
        parse_usd=parse_usd,
        parse_slack=parse_slack,
    )


def errors_of(**values: Any) -> tuple[str, ...]:
    with pytest.raises(ContextError) as info:
        read(**values)
    return info.value.errors


def test_cli_strings_and_json_types_give_the_same_context() -> None:
    from_cli = read(
        deadline="5400",
        max_memory_mb="3008",
        max_concurrency="10",
        reserve_concurrency="true",
        ps_types="c5.large, m5.large",
        arch="arm64",
        slack="10%",
    )
    from_json = read(
        deadline=5400,
        max_memory_mb=3008,
        max_concurrency=10,
        reserve_concurrency=True,
        ps_types=["c5.large", "m5.large"],
        arch="arm64",
        slack=0.1,
    )
    assert from_cli == from_json
    assert from_cli.slack == pytest.approx(0.1)
    assert from_cli.deadline_s == 5400.0
    assert from_cli.max_memory_mb == 3008
    assert from_cli.reserve_concurrency is True
    assert from_cli.ps_types == ("c5.large", "m5.large")


def test_defaults_when_only_cdk_json_values_are_given() -> None:
    ctx = read()
    assert (ctx.deadline_s, ctx.deadline_is_default, ctx.budget_usd) == (7200.0, True, None)
    assert (ctx.arch, ctx.max_memory_mb, ctx.max_concurrency) == ("any", None, None)
    assert ctx.reserve_concurrency is False and ctx.ps_types is None and ctx.slack is None
    assert ctx.dataset == DatasetSource(kind="builtin", spec="builtin:digits", name="digits")


def test_sync_forces_a_mode_or_leaves_the_choice_to_the_planner() -> None:
    assert [read(sync=v).sync for v in ("ps", " s3 ", ...)] == ["ps", "s3", "auto"]


def test_replan_is_on_unless_turned_off_or_to_scale_down() -> None:
    assert [read(replan=v).replan for v in ("on", " off ", "scale-down", ...)] == [
        "on", "off", "scale-down", "on"]  # fmt: skip


def test_budget_alone_does_not_pull_in_the_default_deadline() -> None:
    ctx = read(budget="$2.50")
    assert (ctx.deadline_s, ctx.budget_usd) == (None, 2.5)


def test_dataset_forms(tmp_path: Any) -> None:
    assert read(dataset="synthetic-cifar:5000").dataset.samples == 5000
    s3 = read(dataset="s3://my-data.bucket/cifar/train/").dataset
    assert (s3.kind, s3.bucket, s3.prefix) == ("s3", "my-data.bucket", "cifar/train")
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "part-0.npz").write_bytes(b"")
    local = read_context(
        {**BASE, "dataset": str(folder)},
        parse_duration_s=parse_duration_s,
        parse_usd=parse_usd,
        cwd=str(tmp_path),
    )
    assert (local.dataset.kind, local.dataset.path) == ("local", str(folder))


def test_a_local_folder_without_data_is_rejected(tmp_path: Any) -> None:
    (tmp_path / "empty").mkdir()
    assert local_errors(tmp_path, "empty") == (
        "dataset='empty' is not usable: no .npz files, no class folders of images and no .csv "
        "or .parquet table",
    )


def image_folder(root: Any) -> Any:
    """cat/ and dog/, one 2×2 PNG each (only the names matter to synth)."""
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        (root / name / "a.png").write_bytes(b"")
    return root


def local_errors(cwd: Any, dataset: str) -> tuple[str, ...]:
    with pytest.raises(ContextError) as info:
        read_context({**BASE, "dataset": dataset}, parse_duration_s=parse_duration_s,
                     parse_usd=parse_usd, cwd=str(cwd))  # fmt: skip
    return info.value.errors


def read_local(cwd: Any, dataset: str) -> DatasetSource:
    ctx = read_context({**BASE, "dataset": dataset}, parse_duration_s=parse_duration_s,
                       parse_usd=parse_usd, cwd=str(cwd))  # fmt: skip
    return ctx.dataset


def test_a_local_image_folder_is_uploaded_whole(tmp_path: Any) -> None:
    image_folder(tmp_path / "pets")
    assert read_local(tmp_path, "pets") == DatasetSource(
        kind="local", spec="pets", path=str(tmp_path / "pets")
    )


def test_a_local_csv_is_uploaded_with_its_folder_and_read_by_name(tmp_path: Any) -> None:
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "iris.csv").write_text("a,species\n1,x\n")
    assert read_local(tmp_path, "tables/iris.csv#label=species") == DatasetSource(
        kind="local", spec="tables/iris.csv#label=species", path=str(tmp_path / "tables"),
        source_suffix="/iris.csv#label=species",
    )  # fmt: skip
    assert read_local(tmp_path, "tables").source_suffix == ""  # the folder: its one .csv


def test_an_s3_key_grants_its_folder_and_keeps_the_label_option() -> None:
    s3 = read(dataset="s3://my-data/tables/iris.csv#label=species").dataset
    assert (s3.kind, s3.bucket, s3.prefix) == ("s3", "my-data", "tables")
    assert s3.spec == "s3://my-data/tables/iris.csv#label=species"  # what the prepare step reads


def empty_class(root: Any) -> None:
    image_folder(root / "pets")
    (root / "pets" / "bird").mkdir()


def csv_beside_images(root: Any) -> None:
    image_folder(root / "d")
    (root / "d" / "t.csv").write_text("")


@pytest.mark.parametrize(
    ("make", "dataset", "message"),
    [
        (empty_class, "pets",
         "dataset='pets' is not usable: class folder 'bird' holds no images "
         "(.png, .jpg, .jpeg, .bmp, .gif)"),
        (csv_beside_images, "d/t.csv",
         "dataset='d/t.csv' is not usable: t.csv is uploaded with its folder, which holds other "
         "data too; move it to a folder of its own"),
        (lambda root: image_folder(root / "pets"), "pets#label=kind",
         "dataset='pets#label=kind' is not usable: #label= names a column of a .csv or .parquet "
         "table, and this is not one"),
        (lambda root: image_folder(root / "pets"), "pets#kind",
         "dataset='pets#kind' is not usable: option #kind is not accepted; use #label=<column>"),
    ],
)  # fmt: skip
def test_a_local_dataset_the_prepare_step_could_not_read_is_rejected(
    tmp_path: Any, make: Any, dataset: str, message: str
) -> None:
    make(tmp_path)
    assert local_errors(tmp_path, dataset) == (message,)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"deadline": "2 hours"},
         "deadline='2 hours' is not accepted; use a positive amount: "
         "seconds or e.g. 90m, 2h, 1h30m"),
        ({"deadline": -5},
         "deadline=-5 is not accepted; use a positive amount: seconds or e.g. 90m, 2h, 1h30m"),
        ({"budget": "five"},
         "budget='five' is not accepted; use a positive amount: US dollars, e.g. 5, 2.50 or "
         "$2.50"),
        ({"default_deadline": ...},
         "deadline=None and default_deadline=None give no goal; use -c deadline=2h or "
         "-c budget=5 (or set default_deadline in cdk.json)"),
        ({"workload": ""},
         "workload='' is not accepted; use a profile name (profiles/NAME.json) or a path to a "
         "profile JSON file"),
        ({"catalog": ...},
         "catalog=None is not accepted; use a catalog name (catalog/NAME.json) or a path to a "
         "catalog JSON file"),
        ({"dataset": "mnist"},
         "dataset='mnist' is not accepted; " + DATASET_ACCEPTED),
        ({"dataset": "synthetic-cifar:0"},
         "dataset='synthetic-cifar:0' is not accepted; " + DATASET_ACCEPTED),
        ({"dataset": "synthetic-tokens:0"},
         "dataset='synthetic-tokens:0' is not accepted; " + DATASET_ACCEPTED),
        ({"dataset": "s3://Bad_Bucket/x"},
         "dataset='s3://Bad_Bucket/x' is not accepted; " + DATASET_ACCEPTED),
        ({"arch": "x86"}, "arch='x86' is not accepted; use one of x86_64, arm64, mixed, any"),
        ({"az": "us-east-1"},
         "az='us-east-1' is not accepted; use an availability zone name like us-east-1b"),
        ({"max_memory_mb": "3GB"},
         "max_memory_mb='3GB' is not accepted; use an integer from 128 to 10240"),
        ({"max_memory_mb": 20000},
         "max_memory_mb=20000 is out of range; use an integer from 128 to 10240"),
        ({"max_memory_mb": True},
         "max_memory_mb=True is not accepted; use an integer from 128 to 10240"),
        ({"max_concurrency": "0"},
         "max_concurrency='0' is out of range; use an integer of at least 1"),
        ({"reserve_concurrency": "yes"},
         "reserve_concurrency='yes' is not accepted; use true or false"),
        ({"ps_types": "c5.large,huge"},
         "ps_types='c5.large,huge' is not accepted; use a comma list of EC2 instance types, "
         "e.g. c5.large,m5.large"),
        ({"job": "my_job"},
         "job='my_job' is not a job name; use 1-32 letters, digits or hyphens starting with a "
         "letter, e.g. digits-demo"),
        ({"job": "../../victim"},
         "job='../../victim' is not a job name; use 1-32 letters, digits or hyphens starting "
         "with a letter, e.g. digits-demo"),
        ({"dataset": "synthetic-cifar:99999999999999"},
         "dataset='synthetic-cifar:99999999999999' is not accepted; " + DATASET_ACCEPTED),
        ({"job": "9lives"},
         "job='9lives' is not a job name; use 1-32 letters, digits or hyphens starting with a "
         "letter, e.g. digits-demo"),
        ({"slack": "95%"},
         "slack='95%' is not accepted; use a share of the deadline below 90%, e.g. 10% or 0.1"),
        ({"slack": "lots"},
         "slack='lots' is not accepted; use a share of the deadline below 90%, e.g. 10% or 0.1"),
        ({"deadlin": "2h"},
         "deadlin='2h' is not a context key of this app; accepted keys: arch, az, budget, catalog, "
         "dataset, deadline, default_deadline, job, max_concurrency, max_memory_mb, mode, "
         "profile_iterations, profile_memory, ps_types, replan, replan_ceiling, "
         "reserve_concurrency, slack, sync, workload"),
        ({"sync": "fast"}, "sync='fast' is not accepted; use one of ps, s3, auto"),
        ({"replan": "maybe"},
         "replan='maybe' is not accepted; use one of off, scale-down, on"),
        ({"replan": "ON"}, "replan='ON' is not accepted; use one of off, scale-down, on"),
    ],
)  # fmt: skip
def test_each_message_names_key_value_and_what_is_accepted(
    values: dict[str, Any], message: str
) -> None:
    assert errors_of(**values) == (message,)


def test_all_errors_are_reported_together_one_line_each() -> None:
    errors = errors_of(deadline="soon", arch="sparc", max_concurrency="-1", job="")
    assert [e.split("=", 1)[0] for e in errors] == ["deadline", "job", "arch", "max_concurrency"]
    assert all("\n" not in e for e in errors)


def test_cdk_own_context_keys_are_not_flagged() -> None:
    ctx = read(**{"@aws-cdk/core:newStyleStackSynthesis": True, "aws:cdk:enable-path-metadata":
                  True, "cli-telemetry": False})  # fmt: skip
    assert ctx.job == "digits-demo"


def test_loaders_report_unknown_names_with_the_other_errors() -> None:
    def load(name: str) -> None:
        raise ValueError(f"profile {name!r} not found")

    with pytest.raises(ContextError) as info:
        read_context({**BASE, "workload": "nope", "arch": "sparc"},
                     parse_duration_s=parse_duration_s, parse_usd=parse_usd,
                     loaders={"workload": load})  # fmt: skip
    assert info.value.errors == (
        "workload='nope': profile 'nope' not found",
        "arch='sparc' is not accepted; use one of x86_64, arm64, mixed, any",
    )
