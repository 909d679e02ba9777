"""The real entry points as a user runs them: the pinned CDK CLI and `python -m tools.plan_diff`.

Needs `node_modules` (`make setup` runs `npm ci` from package-lock.json); everything is offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tools.plan_diff import CDK_CLI, REPO_ROOT, node_env, plan_table, with_tags


def cdk(*args: str) -> subprocess.CompletedProcess[str]:
    assert os.path.exists(CDK_CLI), "node_modules/.bin/cdk is missing: run `make setup`"
    return subprocess.run([CDK_CLI, *args], capture_output=True, text=True, env=node_env(),
                          cwd=REPO_ROOT, timeout=300)  # fmt: skip


def test_cdk_synth_with_a_cli_deadline(tmp_path: Path) -> None:
    result = cdk("synth", "--quiet", "-o", str(tmp_path), "-c", "deadline=90m")
    assert result.returncode == 0, result.stderr
    assert "plan digits-demo: " in result.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())["plan"]
    assert plan["goal"]["deadline_s"] == 5400.0
    # a PS stack only when the plan exchanges through a PS (the digits demo goes through S3)
    stacks = ["data", "ps", "training"] if plan["sync"] == "ps" else ["data", "training"]
    assert sorted(p.name for p in tmp_path.glob("*.template.json")) == [
        f"digits-demo-{s}.template.json" for s in stacks
    ]


def test_cdk_synth_with_bad_context_fails_in_one_line_without_traceback(tmp_path: Path) -> None:
    result = cdk("synth", "--quiet", "-o", str(tmp_path), "-c", "deadline=soon",
                 "-c", "max_concurrency=lots")  # fmt: skip
    assert result.returncode != 0
    assert "error: deadline='soon' is not accepted" in result.stderr
    assert "error: max_concurrency='lots' is not accepted" in result.stderr
    assert "Traceback" not in result.stderr


def test_plan_diff_shows_the_plan_and_template_changes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.plan_diff", "--from", "30m", "--to", "10m",
         "-c", "workload=paper-cifar10-mobilenetv2", "-c", "dataset=synthetic-cifar:2000",
         "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, env=node_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    before = json.loads((tmp_path / "from" / "plan.json").read_text())["plan"]
    after = json.loads((tmp_path / "to" / "plan.json").read_text())["plan"]
    for line in plan_table(before, after)[2:]:
        assert line in result.stdout
    for stack in ("data", "ps", "training"):
        assert f"=== digits-demo-{stack} ===" in result.stdout
    assert "tags on every resource: deadline: 1800s -> 600s" in result.stdout
    if after["ps_count"] > before["ps_count"]:
        assert "[+] AWS::EC2::Instance ParameterServers/Shard1" in result.stdout
    if after["n_workers"] != before["n_workers"]:
        assert f"shards-n{after['n_workers']}" in result.stdout


def test_tag_alignment_changes_only_the_given_tag_values() -> None:
    template = {"Resources": {
        "A": {"Properties": {"Tags": [{"Key": "deadline", "Value": "1800s"},
                                      {"Key": "Name", "Value": "a"}]}},
        "B": {"Properties": {"Tags": {"deadline": "1800s", "other": "x"}}},
        "C": {"Properties": {"Size": 1}},
    }}  # fmt: skip
    aligned = with_tags(template, {"deadline": "600s", "absent": "y"})
    assert aligned["Resources"]["A"]["Properties"]["Tags"] == [
        {"Key": "deadline", "Value": "600s"},
        {"Key": "Name", "Value": "a"},
    ]
    assert aligned["Resources"]["B"]["Properties"]["Tags"] == {"deadline": "600s", "other": "x"}
    assert aligned["Resources"]["C"] == template["Resources"]["C"]
    assert template["Resources"]["A"]["Properties"]["Tags"][0]["Value"] == "1800s"  # a copy
