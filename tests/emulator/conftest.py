"""Fixtures for the emulator tests: a real `weed mini` S3 server on 127.0.0.1 per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.s3server import S3Endpoint, weed_server


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """A running weed S3 server; killed (with its process group) when the session ends."""
    data_dir: Path = tmp_path_factory.mktemp("weed")
    with weed_server(data_dir=data_dir) as endpoint:
        yield endpoint


@pytest.fixture
def s3_env(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point boto3 in this process at the local server; returns the same env for children."""
    env = s3_endpoint.client_env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
