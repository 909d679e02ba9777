"""The environment every child of a run starts with: what a function or a PS shard would find
in AWS (the S3 endpoint, credentials, the PS secret) and what it needs here (the project on
PYTHONPATH, its /tmp inside the run's folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from emulator.naming import SECRET_ENV
from emulator.options import REPO_ROOT
from emulator.s3server import S3Endpoint


def project_pythonpath() -> str:
    """PYTHONPATH for a child that imports the project's modules: the project folder first, then
    what this process was given."""
    return os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)


def child_env(endpoint: S3Endpoint, secret: str, tmp_dir: Path | None = None) -> dict[str, str]:
    """Environment of every child: the S3 endpoint, dummy credentials, the PS secret, and
    `tmp_dir` as TMPDIR (the functions' /tmp, e.g. the shard cache, stays in the run's folder)."""
    env = dict(os.environ)
    if tmp_dir is not None:
        env["TMPDIR"] = str(tmp_dir)
    env.update(endpoint.client_env())
    env[SECRET_ENV] = secret
    env["PYTHONPATH"] = project_pythonpath()
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("MPLBACKEND", "Agg")
    return env
