"""The shard's open connections, and the ones still in the handshake, capped so that idle or
slow peers cannot exhaust the file descriptors: past the cap a new one evicts the oldest."""

from __future__ import annotations

import contextlib
import socket
import threading


def _shut_down(conn: socket.socket) -> None:
    """End `conn` from here; its own thread sees the end and closes it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


class ConnectionTable:
    """Every connection a shard holds, each marked while it is in the handshake."""

    def __init__(self, max_unauthenticated: int) -> None:
        self.max_unauthenticated = max_unauthenticated
        self.evicted_handshakes = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        # Connections still in the handshake, oldest first (a dict keeps insertion order).
        self._unauthenticated: dict[socket.socket, None] = {}

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, conn: socket.socket) -> None:
        """Hold `conn` as in the handshake; past the cap, the oldest unauthenticated connection
        is dropped (an honest client authenticates in one round trip, an idle one never does)."""
        with self._lock:
            self._open.add(conn)
            self._unauthenticated[conn] = None
            evicted = []
            while len(self._unauthenticated) > self.max_unauthenticated:
                oldest = next(iter(self._unauthenticated))
                del self._unauthenticated[oldest]
                evicted.append(oldest)
            self.evicted_handshakes += len(evicted)
        for old in evicted:
            _shut_down(old)

    def authenticated(self, conn: socket.socket) -> None:
        """`conn` passed the handshake: it no longer counts against the cap."""
        with self._lock:
            self._unauthenticated.pop(conn, None)

    def forget(self, conn: socket.socket) -> None:
        """`conn` is being closed by its owner."""
        with self._lock:
            self._open.discard(conn)
            self._unauthenticated.pop(conn, None)

    def shut_down_others(self, keep: socket.socket | None, *, handshakes_too: bool) -> None:
        """End every connection but `keep` (and, unless `handshakes_too`, but those still in
        the handshake), so each worker re-syncs."""
        with self._lock:
            others = [
                c
                for c in self._open
                if c is not keep and (handshakes_too or c not in self._unauthenticated)
            ]
        for conn in others:
            _shut_down(conn)

    def close_all(self) -> None:
        with self._lock:
            for conn in list(self._open):
                _shut_down(conn)
                conn.close()
