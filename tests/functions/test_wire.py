"""Wire protocol units: header validation, bounded reads, deadlines, shard split."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions import wire
from functions.wire import MsgType


def test_header_round_trip_and_rejections() -> None:
    raw = wire.encode_header(MsgType.PUSH, 42, 1000)
    assert len(raw) == wire.HEADER_BYTES == 24
    assert wire.decode_header(raw) == wire.Header(MsgType.PUSH, 42, 1000)
    with pytest.raises(wire.WireError, match="bad magic"):
        wire.decode_header(b"XXXX" + raw[4:])
    with pytest.raises(wire.WireError, match="unknown message type 200"):
        wire.decode_header(raw[:5] + bytes([200]) + raw[6:])


def test_zero_copy_round_trip_and_size_bound() -> None:
    a, b = socket.socketpair()
    with a, b:
        data = np.arange(1000, dtype=np.float32)
        wire.send_frame(a, MsgType.PARAMS, 3, data, time.monotonic() + 5)
        header = wire.recv_header(b, time.monotonic() + 5)
        out = np.empty(1000, np.float32)
        wire.recv_payload_into(b, header, out, time.monotonic() + 5)
        assert np.array_equal(out, data)
        wire.send_frame(a, MsgType.PARAMS, 3, data, time.monotonic() + 5)
        header = wire.recv_header(b, time.monotonic() + 5)
        with pytest.raises(wire.WireError, match="payload of 4000 bytes, expected 3996"):
            wire.recv_payload_into(b, header, np.empty(999, np.float32), time.monotonic() + 5)


def test_silent_peer_raises_named_timeout() -> None:
    a, b = socket.socketpair()
    with a, b, pytest.raises(wire.PSTimeout):
        wire.recv_header(b, time.monotonic() + 0.2)


def test_closed_peer_raises_disconnected() -> None:
    a, b = socket.socketpair()
    a.sendall(wire.encode_header(MsgType.PUSH, 0, 8)[:10])
    a.close()
    with b, pytest.raises(wire.PSDisconnected, match="after 10 of 24 bytes"):
        wire.recv_header(b, time.monotonic() + 5)


def test_mac_is_checked_in_constant_time_helper() -> None:
    mac = wire.hello_mac(b"s", b"n" * 32, b"{}")
    assert wire.check_mac(b"s", b"n" * 32, b"{}", mac)
    assert not wire.check_mac(b"t", b"n" * 32, b"{}", mac)


@given(total=st.integers(0, 10**7), shards=st.integers(1, 64))
def test_shard_bounds_tile_the_vector(total: int, shards: int) -> None:
    bounds = [wire.shard_bounds(total, shards, k) for k in range(shards)]
    assert bounds[0][0] == 0 and bounds[-1][1] == total
    assert all(bounds[k][1] == bounds[k + 1][0] for k in range(shards - 1))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_parse_endpoint() -> None:
    assert wire.parse_endpoint("10.0.1.5:7000") == ("10.0.1.5", 7000)
    with pytest.raises(ValueError, match="bad PS endpoint '10.0.1.5:99999'"):
        wire.parse_endpoint("10.0.1.5:99999")


def test_json_nesting_is_measured_outside_strings_and_refused_past_its_bound() -> None:
    assert wire.json_depth(b'{"a": [1, {"b": "[[[[\\"{{"}]}') == 3
    assert wire.json_depth(b"42") == 0
    assert wire.json_depth(b"[" * 30_000) == wire.MAX_JSON_DEPTH + 1  # counting stops there
    assert wire.parse_json(b"[" * 32 + b"]" * 32, "STATUS") == eval("[" * 32 + "]" * 32)
    with pytest.raises(wire.WireError) as err:
        wire.parse_json(b"[" * 30_000 + b"]" * 30_000, "STATUS payload")
    assert str(err.value) == "STATUS payload nests JSON deeper than the bound of 32 levels"
    with pytest.raises(wire.WireError, match="exceeds the 65536-byte bound"):
        wire.parse_json(b" " * (wire.MAX_CONTROL_BYTES + 1), "HELLO")
    with pytest.raises(wire.WireError, match="^HELLO is not JSON: "):
        wire.parse_json(b"{", "HELLO")


def test_a_deep_json_reply_is_a_wire_error_for_the_client() -> None:
    a, b = socket.socketpair()
    with a, b:
        body = b"[" * 5000 + b"]" * 5000
        wire.send_frame(a, MsgType.ACK, 0, body, time.monotonic() + 5)
        header = wire.recv_header(b, time.monotonic() + 5)
        with pytest.raises(wire.WireError, match="ACK payload nests JSON deeper"):
            wire.recv_json(b, header, time.monotonic() + 5)
