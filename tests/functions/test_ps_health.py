"""The liveness check: healthy on a serving shard; a listener that never greets is 'listening,
not serving' and gets SIGTERM with --terminate-pid; a refused port never does."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from functions import ps_health

from .conftest import endpoints, free_port


@pytest.fixture()
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the PS's PID 1 that --terminate-pid may signal."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture()
def mute_listener() -> Iterator[str]:
    """Listens (the kernel completes connections) but never accepts: a starved shard."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_serving_shard_is_healthy(ps_cluster: Any) -> None:
    (server,) = ps_cluster(1, 1)
    assert ps_health.main([endpoints([server])[0], "--attempts", "1"]) == 0


def test_a_shard_that_does_not_greet_is_terminated(
    mute_listener: str, sleeper: subprocess.Popen[bytes]
) -> None:
    argv = [mute_listener, "--attempts", "2", "--timeout-s", "0.5", "--retry-delay-s", "0"]
    assert ps_health.main([*argv, "--terminate-pid", str(sleeper.pid)]) == 1
    assert sleeper.wait(timeout=30) == -15  # SIGTERM


def test_a_refused_port_is_unhealthy_but_not_terminated(sleeper: subprocess.Popen[bytes]) -> None:
    argv = [f"127.0.0.1:{free_port()}", "--attempts", "2", "--retry-delay-s", "0"]
    assert ps_health.main([*argv, "--terminate-pid", str(sleeper.pid)]) == 1
    assert sleeper.poll() is None


def test_a_bad_endpoint_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert ps_health.main(["nohost"]) == 2
    assert capsys.readouterr().err == (
        "functions.ps_health: error: bad PS endpoint 'nohost': expected 'host:port' with port "
        "1-65535\n"
    )



def test_the_run_waits_for_every_shard_and_names_those_that_never_serve(ps_cluster: Any) -> None:
    (server,) = ps_cluster(1, 1)
    serving = endpoints([server])
    assert ps_health.wait_until_serving(serving, remaining_s=lambda: 600.0) == 1
    refused = f"127.0.0.1:{free_port()}"
    slept: list[float] = []
    clock = iter([600.0, 600.0])  # two rounds with time left, then the invocation's end
    with pytest.raises(ps_health.PsNotReady, match=f"not serving in time: {refused}$"):
        ps_health.wait_until_serving(serving + [refused], remaining_s=lambda: next(clock, 1.0),
                                     sleep=slept.append, probe_s=0.5)  # fmt: skip
    assert slept == [ps_health.WAIT_POLL_S] * 2


def test_the_wait_handler_names_a_bad_endpoint() -> None:
    with pytest.raises(ValueError, match="nohost"):
        ps_health.wait_handler({"ps_endpoints": ["nohost"]}, None)
