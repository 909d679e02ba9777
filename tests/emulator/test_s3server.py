"""The local S3 server: starts on 127.0.0.1, serves boto3, and is gone after the block."""

from __future__ import annotations

import os
import re
import socket
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

from emulator import s3server
from emulator.procs import group_alive
from emulator.s3server import (
    S3Endpoint,
    s3_server,
    weed_command,
    weed_env,
    weed_server,
    weed_socket_paths,
)


def test_weed_round_trips_an_object_through_boto3(s3_client: Any, s3_endpoint: S3Endpoint) -> None:
    s3 = s3_client
    s3.create_bucket(Bucket="emu-test-roundtrip")
    s3.put_object(Bucket="emu-test-roundtrip", Key="a/b.bin", Body=b"\x00\x01payload")
    body = s3.get_object(Bucket="emu-test-roundtrip", Key="a/b.bin")["Body"].read()
    assert body == b"\x00\x01payload"
    assert s3_endpoint.client_env()["AWS_ENDPOINT_URL_S3"].startswith("http://127.0.0.1:")


def test_weed_command_binds_loopback_and_disables_telemetry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ports = {
        n: i
        for i, n in enumerate(
            [f"{c}{s}" for c in ("master", "volume", "filer", "s3", "admin") for s in ("", ".grpc")]
        )
    }
    argv = weed_command("weed", tmp_path, ports, tmp_path / "logs")
    assert argv.index(f"-logdir={tmp_path / 'logs'}") < argv.index("mini")  # a global flag
    assert "-ip.bind=127.0.0.1" in argv
    assert "-master.telemetry=false" in argv
    assert "-s3.port=6" in argv


def test_server_process_group_is_gone_after_the_block(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with s3_server("weed", data_dir=tmp_path) as endpoint:
        assert isinstance(endpoint, S3Endpoint) and endpoint.pid is not None
        pid = endpoint.pid
        with urllib.request.urlopen(endpoint.url + "/", timeout=5) as response:
            assert response.status < 500
    assert not group_alive(pid)


def test_weed_leaves_nothing_in_the_temp_folder_and_logs_where_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """glog writes to the temp folder unless told otherwise, and weed's gRPC sockets live in
    /tmp whatever TMPDIR says: after the block neither is left, and the logs are in log_dir."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # tempfile caches the folder
    log_dir = tmp_path / "run" / "logs" / "s3"
    with weed_server(log_dir=log_dir) as endpoint:
        assert endpoint.pid is not None
        sockets = _grpc_sockets_of(endpoint.pid)
        assert any(path.exists() for path in sockets), sockets  # the check below means something
        assert list(temp.iterdir())  # the data folder, for now
    assert sorted(temp.iterdir()) == []
    assert [path for path in sockets if path.exists()] == []
    assert any(p.name.startswith("weed.") and ".log.INFO." in p.name for p in log_dir.iterdir())


def _grpc_sockets_of(pid: int) -> list[Path]:
    """The /tmp socket files of a running weed, from the gRPC ports on its command line."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    ports = {
        arg[1:].split("=")[0]: int(arg.split("=")[1])
        for arg in argv
        if re.fullmatch(r"-\w+\.port(\.grpc)?=\d+", arg)
    }
    return weed_socket_paths({k.replace(".port", ""): v for k, v in ports.items()})


def test_unknown_server_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown S3 server 'minio': expected 'weed' or 'moto'"):
        s3_server("minio")


def test_moto_fallback_serves_boto3_on_loopback() -> None:
    with s3_server("moto") as endpoint:
        assert endpoint.kind == "moto" and endpoint.url.startswith("http://127.0.0.1:")
        s3 = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint.url,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="y",
        )
        s3.create_bucket(Bucket="emu-moto")
        s3.put_object(Bucket="emu-moto", Key="k", Body=b"v")
        assert s3.get_object(Bucket="emu-moto", Key="k")["Body"].read() == b"v"


def test_weed_env_drops_credentials_that_would_turn_auth_on() -> None:
    env = weed_env({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "PATH": "/bin"})
    assert env == {"PATH": "/bin"}


def test_the_emulators_buckets_are_created_warm_and_empty(
    s3_client: Any, s3_endpoint: S3Endpoint
) -> None:
    """create_buckets writes and deletes one object per bucket (SeaweedFS grows a bucket's
    volume on its first write, a cost S3 does not have) and leaves the buckets empty; a second
    call on the same buckets is fine."""
    from emulator.s3_client import WARM_KEY, create_buckets

    names = ["emu-test-warm-a", "emu-test-warm-b"]
    create_buckets(s3_endpoint, names)
    create_buckets(s3_endpoint, names)
    for name in names:
        assert s3_client.list_objects_v2(Bucket=name).get("KeyCount") == 0
        with pytest.raises(s3_client.exceptions.ClientError):
            s3_client.head_object(Bucket=name, Key=WARM_KEY)


def test_ports_are_drawn_below_the_range_outgoing_connections_take(tmp_path: Path) -> None:
    """An outgoing connection's local port comes from the ephemeral range; a server port drawn
    there could be taken between the check and weed's bind."""
    ports = s3server.free_ports(10)
    low, _ = s3server.ephemeral_port_range()
    assert len(set(ports)) == 10 and all(s3server.PORT_FLOOR <= p < low for p in ports)
    (tmp_path / "range").write_text("1024\t65535\n")
    assert s3server.ephemeral_port_range(tmp_path / "range") == (1024, 65535)
    assert s3server.ephemeral_port_range(tmp_path / "missing") == (32768, 60999)


def test_weed_is_started_again_on_fresh_ports_when_it_exits_while_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first draw's S3 port is one this test holds, so that weed exits; the second starts."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real, draws = s3server.free_ports, []

    def first_draw_taken(count: int) -> list[int]:
        ports = real(count)
        draws.append(ports)
        if len(draws) == 1:
            ports[6] = taken.getsockname()[1]  # the order weed_command names them: s3 is 7th
        return ports

    monkeypatch.setattr(s3server, "free_ports", first_draw_taken)
    try:
        with weed_server(data_dir=tmp_path / "data") as endpoint:
            answered = _status(endpoint.url + "/")
    finally:
        taken.close()
    assert answered < 500 and len(draws) == 2
    assert "--- attempt 1 exited; starting again" in (tmp_path / "data/logs/weed.log").read_text()


def _status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


def test_weed_starts_in_a_folder_too_deep_for_a_unix_socket(tmp_path: Path) -> None:
    """Its local sockets then go to /tmp and are removed after the block (under xdist, pytest's
    deeper temp folders made the path 110 bytes and weed exited with 255)."""
    deep = tmp_path / ("d" * max(1, 110 - len(os.fsencode(tmp_path / "filer.sock"))))
    assert len(os.fsencode(deep / "filer.sock")) > s3server.SUN_PATH_MAX
    assert s3server.local_socket_path(deep, "filer", 123) == Path(
        "/tmp/seaweedfs-filer-local-123.sock")  # fmt: skip
    assert s3server.local_socket_path(tmp_path, "s3", 123) == tmp_path / "s3.sock"
    with weed_server(data_dir=deep) as endpoint:
        assert endpoint.pid is not None
        argv = Path(f"/proc/{endpoint.pid}/cmdline").read_bytes().decode().split("\0")
        moved = [Path(a.split("=", 1)[1]) for a in argv if a.startswith("-filer.localSocket=")]
        assert _status(endpoint.url + "/") < 500
    assert moved and moved[0].parent == Path("/tmp") and not moved[0].exists()
