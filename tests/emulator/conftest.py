"""Fixtures for the emulator tests: a real `weed mini` S3 server on 127.0.0.1 per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint, weed_server


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """A running weed S3 server; killed (with its process group) when the session ends."""
    data_dir: Path = tmp_path_factory.mktemp("weed")
    with weed_server(data_dir=data_dir) as endpoint:
        yield endpoint


@pytest.fixture
def s3_client(s3_endpoint: S3Endpoint) -> Any:
    """A boto3 client for the local server with explicit dummy credentials.

    Never boto3's default session: it caches the credentials it first resolves, and other
    tests in the same process would inherit ours.
    """
    return s3_client_for(s3_endpoint)
