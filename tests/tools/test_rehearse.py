"""tools/rehearse.py's plumbing: moto starts on localhost and stops, the CLI's environment sends
everything to it, and the CLI runs where its context lookups cannot reach the repo.

The rehearsal itself (`make rehearse`, about a minute) runs after the suite in `make test`.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tools.plan_diff import REPO_ROOT
from tools.rehearse import app_dir, cli_env, moto_server
from tools.rehearse_checks import Aws


def test_moto_serves_on_localhost_with_the_fixes_and_stops_on_exit(tmp_path: Path) -> None:
    with moto_server(tmp_path / "moto.log") as url:
        assert url.startswith("http://localhost:")
        aws = Aws(url)
        assert aws("sts").get_caller_identity()["Account"] == "123456789012"
        cf = aws("cloudformation")
        with pytest.raises(cf.exceptions.ChangeSetNotFoundException):  # a fix, so installed
            cf.describe_change_set(StackName="s", ChangeSetName="cdk-deploy-change-set")
    port = urlparse(url).port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("localhost", port), timeout=5).close()


def test_the_cli_environment_has_fake_credentials_and_no_way_to_aws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "CDK_DEFAULT_ACCOUNT"):
        monkeypatch.setenv(name, "from-the-user")
    env = cli_env("http://localhost:4566", tmp_path / "cdk-home")
    aws = {k: v for k, v in env.items() if k.startswith(("AWS_", "CDK_DEFAULT"))}
    assert aws["AWS_ENDPOINT_URL"] == "http://localhost:4566"
    assert aws["AWS_ACCESS_KEY_ID"] == "rehearsal"
    assert "from-the-user" not in aws.values()
    assert env["CDK_HOME"] == str(tmp_path / "cdk-home")  # the account cache, deleted after


def test_the_cli_runs_from_a_copy_of_cdk_json_with_the_app_made_absolute(tmp_path: Path) -> None:
    folder = app_dir(tmp_path)
    copy = json.loads((folder / "cdk.json").read_text(encoding="utf-8"))
    original = json.loads(Path(REPO_ROOT, "cdk.json").read_text(encoding="utf-8"))
    assert copy["context"] == original["context"]
    assert copy["app"] == f"{REPO_ROOT}/.venv/bin/python {REPO_ROOT}/app.py"
