"""The provisioner is a pure library: importing it never loads aws_cdk, boto3, torch or pyplot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = (
        "import importlib, pkgutil, sys, provisioner\n"
        "for m in pkgutil.iter_modules(provisioner.__path__):\n"
        "    if m.name != '__main__':\n"
        "        importlib.import_module('provisioner.' + m.name)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in "
        "{'aws_cdk', 'boto3', 'botocore', 'torch', 'matplotlib', 'constructs', 'jsii'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == ""
