"""cfn-lint on the synthesized templates for a matrix of contexts: no errors, no warnings except
the CDK-internal ones listed below with the reason we accept them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

# Warnings that come from CDK's own template shapes, not from choices made in stacks/.
IGNORED_RULES = {
    # CDK adds an explicit DependsOn on a role that a GetAtt already implies (Lambda and
    # Step Functions roles, CDK's custom-resource providers). Redundant, harmless.
    "W3005": "redundant DependsOn that CDK emits next to a GetAtt",
}
# Regions: the templates are env-agnostic; lint them against a few where the services exist.
REGIONS = ["us-east-1", "eu-west-1"]

MATRIX = [
    {"deadline": "2h"},  # demo workload, new dataset bucket, builtin data
    {"deadline": "30m", "workload": "paper-cifar10-mobilenetv2", "dataset": "synthetic-cifar:2000"},
    {"deadline": "10m", "workload": "paper-cifar10-mobilenetv2", "dataset": "synthetic-cifar:2000"},
    {"deadline": "1h", "workload": "cifar10-resnet18", "dataset": "synthetic-cifar:2000",
     "arch": "arm64"},
    {"deadline": "30m", "dataset": "s3://users-data/digits", "arch": "x86_64",
     "reserve_concurrency": "true"},  # imported dataset
]  # fmt: skip


@pytest.mark.parametrize("context", MATRIX, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_templates_lint_clean(synth: Any, context: dict[str, Any]) -> None:
    result = synth(**context)
    assert result.code == 0, result.stderr
    templates = sorted(Path(result.outdir).glob("*.template.json"))
    sync = json.loads((Path(result.outdir) / "plan.json").read_text())["plan"]["sync"]
    assert len(templates) == (3 if sync == "ps" else 2)  # an S3 plan has no PS stack
    assert lint_problems(templates) == []


def lint_problems(templates: list[Path]) -> list[str]:
    """cfn-lint's findings on `templates`, less the ignored rules and informational ones."""
    return [
        f"{path.name}: {match.rule.id} {match.message} (line {match.linenumber})"
        for path in templates
        for match in lint_file(path, ManualArgs(regions=REGIONS))
        if match.rule.id not in IGNORED_RULES and not match.rule.id.startswith("I")
    ]
