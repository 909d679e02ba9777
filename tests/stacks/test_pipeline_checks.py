"""cdk-nag and cfn-lint on a pipelined plan's stacks (2 and 3 stages, PS and S3 sync), as
tests/stacks/test_nag.py and test_cfn_lint.py run them on one-stage plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.job import add_job_stacks
from stacks.nag import unacknowledged_findings
from tests.stacks.pipeline_plans import pipelined_plan
from tests.stacks.test_cfn_lint import lint_problems
from tests.stacks.test_s3_sync import build_app
from tests.stacks.test_stacks import DIGITS


@pytest.mark.parametrize("stages,sync", [(2, "ps"), (3, "ps"), (2, "s3"), (3, "s3")])
def test_a_pipelined_plan_is_nag_and_cfn_lint_clean(stages: int, sync: str,
                                                     tmp_path: Path) -> None:  # fmt: skip
    app, _ = build_app(pipelined_plan(stages, sync=sync), outdir=str(tmp_path))
    assert unacknowledged_findings(app) == []
    app.synth()
    templates = sorted(tmp_path.glob("*.template.json"))
    assert len(templates) == (3 if sync == "ps" else 2)
    assert lint_problems(templates) == []


def test_a_pipelined_plan_bound_to_an_account_has_no_unacknowledged_findings() -> None:
    from tests.stacks.conftest import new_app
    from tests.stacks.test_machine_image import ENV, LOOKUP_KEY

    app = new_app({LOOKUP_KEY: "ami-0aaaaaaaaaaaaaaaa"})
    add_job_stacks(app, plan=pipelined_plan(3), nag=False, env=ENV, dataset=DIGITS)
    assert unacknowledged_findings(app) == []
