"""Wire protocol between workers and parameter-server shards: length-prefixed binary frames.

A frame is a fixed 24-byte header followed by `length` payload bytes:

    magic b"LDNN" | version u8 | type u8 | reserved u16 | iteration i64 | length u64

(network byte order). Payloads are either raw float32 vectors (gradients, parameters), received
with `recv_into` straight into a preallocated numpy buffer, or small UTF-8 JSON objects
(handshake, errors). Every length is checked against a caller-supplied bound *before* a single
payload byte is read, and every read or write has a deadline: a socket that stays silent past it
raises `PSTimeout`. Authentication is a challenge/response: the server sends a random nonce, the
client answers with HMAC-SHA256(secret, nonce || hello-json) and the server compares in constant
time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import struct
import time
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

MAGIC = b"LDNN"
VERSION = 1
HEADER = struct.Struct("!4sBBHqQ")
HEADER_BYTES = HEADER.size  # 24
NONCE_BYTES = 32
MAC_BYTES = 32
# Handshake, error and control frames carry a small JSON object; nothing legitimate is larger.
MAX_CONTROL_BYTES = 64 * 1024
# Nesting of a control frame's JSON: ours is two deep. json.loads recurses once per level, so a
# frame of 30,000 brackets (within MAX_CONTROL_BYTES) would end in RecursionError, not a refusal.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)  # brackets inside do not nest
_NOT_BRACKETS = re.compile(rb"[^\[\]{}]")


class MsgType(IntEnum):
    """Frame types. Client → server: HELLO, INIT, PUSH, PULL, CHECKPOINT, STATUS, ROLLBACK.
    Server → client: CHALLENGE, WELCOME, PARAMS, ACK, ERROR."""

    CHALLENGE = 1
    HELLO = 2
    WELCOME = 3
    INIT = 4
    PUSH = 5
    PULL = 6
    PARAMS = 7
    CHECKPOINT = 8
    ACK = 9
    ERROR = 10
    STATUS = 11
    ROLLBACK = 12  # reload the newest checkpoint every shard has (shards disagree)


class WireError(Exception):
    """Malformed input on the wire: bad magic/version/type, oversize or wrong-sized frame."""


class AuthError(WireError):
    """The handshake failed: wrong job id or wrong HMAC."""


class PSTimeout(TimeoutError):
    """A wait on the parameter server (or on a worker, server side) passed its deadline."""


class PSDisconnected(ConnectionError):
    """The peer closed the connection (or it broke) in the middle of a frame."""


class RemoteError(RuntimeError):
    """The peer answered with an ERROR frame; the message is the peer's one-line reason."""


@dataclass(frozen=True)
class Header:
    """A decoded frame header."""

    msg_type: MsgType
    iteration: int
    length: int


def encode_header(msg_type: MsgType, iteration: int, length: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, int(msg_type), 0, iteration, length)


def decode_header(raw: bytes | bytearray | memoryview) -> Header:
    """Parse and validate a header; raises WireError naming what was wrong."""
    magic, version, type_code, _reserved, iteration, length = HEADER.unpack(raw)
    if magic != MAGIC:
        raise WireError(f"bad magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise WireError(f"unsupported protocol version {version}, expected {VERSION}")
    try:
        msg_type = MsgType(type_code)
    except ValueError:
        raise WireError(f"unknown message type {type_code}") from None
    return Header(msg_type, iteration, length)


def _remaining_s(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise PSTimeout("deadline passed")
    return remaining


def recv_exact_into(sock: socket.socket, view: memoryview, deadline: float) -> None:
    """Fill `view` completely from the socket (no intermediate copies) before `deadline`."""
    got = 0
    total = len(view)
    while got < total:
        sock.settimeout(_remaining_s(deadline))
        try:
            n = sock.recv_into(view[got:], total - got)
        except TimeoutError:
            raise PSTimeout(f"timed out after {got} of {total} bytes") from None
        except OSError as exc:
            raise PSDisconnected(f"connection broken after {got} of {total} bytes: {exc}") from exc
        if n == 0:
            raise PSDisconnected(f"peer closed after {got} of {total} bytes")
        got += n


def send_all(sock: socket.socket, parts: list[memoryview | bytes], deadline: float) -> None:
    """Write every part (header, then a numpy buffer's memoryview) before `deadline`."""
    for part in parts:
        view = memoryview(part).cast("B")
        sent = 0
        while sent < len(view):
            sock.settimeout(_remaining_s(deadline))
            try:
                sent += sock.send(view[sent:])
            except TimeoutError:
                raise PSTimeout(f"send timed out after {sent} of {len(view)} bytes") from None
            except OSError as exc:
                raise PSDisconnected(f"connection broken while sending: {exc}") from exc


def send_frame(
    sock: socket.socket,
    msg_type: MsgType,
    iteration: int,
    payload: bytes | memoryview | np.ndarray,
    deadline: float,
) -> None:
    """Send one frame; a numpy payload is sent from its own memory (it must be contiguous)."""
    if isinstance(payload, np.ndarray):
        if not payload.flags.c_contiguous:
            raise ValueError("payload array must be C-contiguous")
        body = memoryview(payload).cast("B")
    else:
        body = memoryview(payload).cast("B")
    send_all(sock, [encode_header(msg_type, iteration, len(body)), body], deadline)


def recv_header(sock: socket.socket, deadline: float) -> Header:
    raw = bytearray(HEADER_BYTES)
    recv_exact_into(sock, memoryview(raw), deadline)
    return decode_header(raw)


def recv_payload_into(
    sock: socket.socket, header: Header, out: np.ndarray, deadline: float
) -> None:
    """Receive a payload whose length must equal out.nbytes exactly (the shard's shape)."""
    if header.length != out.nbytes:
        raise WireError(
            f"{header.msg_type.name} payload of {header.length} bytes, expected {out.nbytes}"
        )
    recv_exact_into(sock, memoryview(out).cast("B"), deadline)


def recv_control(sock: socket.socket, header: Header, deadline: float) -> bytes:
    """Receive a small control payload, bounded by MAX_CONTROL_BYTES before reading."""
    if header.length > MAX_CONTROL_BYTES:
        raise WireError(
            f"{header.msg_type.name} payload of {header.length} bytes exceeds the "
            f"{MAX_CONTROL_BYTES}-byte bound for control frames"
        )
    buf = bytearray(header.length)
    recv_exact_into(sock, memoryview(buf), deadline)
    return bytes(buf)


def json_depth(raw: bytes, bound: int = MAX_JSON_DEPTH) -> int:
    """How deep `raw`'s arrays and objects nest (outside strings), counted up to `bound` + 1:
    read without recursion, so any frame can be measured before json.loads sees it."""
    depth = deepest = 0
    for byte in _NOT_BRACKETS.sub(b"", _JSON_STRING.sub(b'""', raw)):
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > bound:
            break
    return deepest


def parse_json(raw: bytes, what: str) -> Any:
    """The JSON value of a control payload, its size and nesting bounded first; WireError
    naming `what` (the frame) and the bound it broke, or that it is not JSON."""
    if len(raw) > MAX_CONTROL_BYTES:
        raise WireError(f"{what} of {len(raw)} bytes exceeds the {MAX_CONTROL_BYTES}-byte bound")
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise WireError(f"{what} nests JSON deeper than the bound of {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"{what} is not JSON: {exc}") from None


def recv_json(sock: socket.socket, header: Header, deadline: float) -> dict[str, Any]:
    raw = recv_control(sock, header, deadline)
    value = parse_json(raw, f"{header.msg_type.name} payload")
    if not isinstance(value, dict):
        raise WireError(f"{header.msg_type.name} payload must be a JSON object")
    return value


def send_json(
    sock: socket.socket, msg_type: MsgType, iteration: int, value: dict[str, Any], deadline: float
) -> None:
    send_frame(sock, msg_type, iteration, json.dumps(value).encode("utf-8"), deadline)


def expect(header: Header, sock: socket.socket, deadline: float, *types: MsgType) -> None:
    """Raise RemoteError for an ERROR frame, WireError for any type not in `types`."""
    if header.msg_type == MsgType.ERROR and MsgType.ERROR not in types:
        raw = recv_control(sock, header, deadline)
        raise RemoteError(raw.decode("utf-8", "replace"))
    if header.msg_type not in types:
        names = ", ".join(t.name for t in types)
        raise WireError(f"unexpected {header.msg_type.name} frame, expected {names}")


def hello_mac(secret: bytes, nonce: bytes, hello: bytes) -> bytes:
    """HMAC-SHA256 over the server's nonce and the exact hello bytes the client sends."""
    return hmac.new(secret, nonce + hello, hashlib.sha256).digest()


def check_mac(secret: bytes, nonce: bytes, hello: bytes, mac: bytes) -> bool:
    return hmac.compare_digest(hello_mac(secret, nonce, hello), mac)


def tune_socket(sock: socket.socket) -> None:
    """Low latency for small control frames (no Nagle delay on the 24-byte headers)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Buffer sizes are left to the kernel: setting SO_SNDBUF/SO_RCVBUF turns off TCP
    # autotuning, which grows them further (tcp_rmem) than a fixed size would.


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """'host:port' → (host, port); raises ValueError naming the bad value."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad PS endpoint {endpoint!r}: expected 'host:port' with port 1-65535")
    return host, int(port)


def shard_bounds(total_params: int, n_shards: int, shard: int) -> tuple[int, int]:
    """[start, stop) of shard `shard` when `total_params` are split as evenly as possible.

    Workers and PS shards both call this, so they agree on the split without sending it.
    """
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} out of range for {n_shards} shards")
    base, extra = divmod(total_params, n_shards)
    start = shard * base + min(shard, extra)
    return start, start + base + (1 if shard < extra else 0)
