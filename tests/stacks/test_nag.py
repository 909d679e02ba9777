"""cdk-nag AwsSolutions (v3, a Validations plugin): no finding left unacknowledged.

Run over the app as synthesized for each dataset kind and both architectures, plus a negative
case proving the check does report a finding when one is introduced.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_s3 as s3

from stacks.context import DatasetSource
from stacks.job import add_job_stacks
from stacks.nag import unacknowledged_findings
from tests.stacks.conftest import make_plan, new_app


@pytest.mark.parametrize(
    "context",
    [
        {"deadline": "2h"},
        {"deadline": "1h", "workload": "cifar10-resnet18",
         "dataset": "synthetic-cifar:2000", "arch": "arm64"},
        {"deadline": "30m", "dataset": "s3://users-data/digits", "arch": "x86_64",
         "reserve_concurrency": "true"},
    ],
)  # fmt: skip
def test_no_unacknowledged_findings(synth: Any, context: dict[str, Any]) -> None:
    result = synth(**context)
    assert result.code == 0, result.stderr
    assert unacknowledged_findings(result.app) == []


def test_local_dataset_upload_has_no_unacknowledged_findings(tmp_path: Any) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.npz").write_bytes(b"not really npz; uploaded as is")
    app = new_app()
    add_job_stacks(
        app,
        plan=make_plan(),
        nag=False,
        dataset=DatasetSource(kind="local", spec=str(folder), path=str(folder)),
    )
    assert unacknowledged_findings(app) == []


def test_a_deploy_bound_to_an_account_and_region_has_no_unacknowledged_findings() -> None:
    """`cdk deploy` binds the stacks to the CLI's account and region, and cdk-nag then prints
    concrete ARNs in its finding ids: acknowledgements written for `<AWS::Region>` alone made
    every real deploy's synth fail (found by deploying to a local AWS API)."""
    from tests.stacks.test_machine_image import ENV, LOOKUP_KEY

    app = new_app({LOOKUP_KEY: "ami-0aaaaaaaaaaaaaaaa"})
    add_job_stacks(app, plan=make_plan(), nag=False, env=ENV, dataset=DatasetSource(
        kind="builtin", spec="builtin:digits", name="digits"))  # fmt: skip
    assert unacknowledged_findings(app) == []


def test_an_unacknowledged_finding_is_reported() -> None:
    app = new_app()
    add_job_stacks(
        app,
        plan=make_plan(),
        dataset=DatasetSource(kind="builtin", spec="builtin:digits", name="digits"),
        nag=False,
    )
    s3.Bucket(Stack(app, "careless"), "Plain")  # no logging, no TLS-only policy
    findings = unacknowledged_findings(app)
    assert "AwsSolutions-S1 at careless/Plain/Resource" in findings
    assert "AwsSolutions-S10 at careless/Plain/Resource" in findings


def test_synth_itself_fails_on_an_unacknowledged_finding(tmp_path: Any) -> None:
    app = new_app(outdir=str(tmp_path))
    add_job_stacks(
        app,
        plan=make_plan(),
        dataset=DatasetSource(kind="builtin", spec="builtin:digits", name="digits"),
    )  # registers the nag plugin
    s3.Bucket(Stack(app, "careless"), "Plain")
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed: .*AwsSolutions-S1"):
        app.synth()
    report = (tmp_path / "validation-report.json").read_text()
    assert "AwsSolutions-S10" in report and "careless/Plain" in report
