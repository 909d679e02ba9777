"""The shard's TCP server: accepting connections (an accept() that fails for lack of file
descriptors is retried with a back-off, never fatal), one thread per connection through the
handshake, then its requests (INIT, PUSH, PULL, CHECKPOINT, STATUS, ROLLBACK) until it ends.

The server owns the shard's state (`ShardState`), its checkpoints (`Checkpointer`) and its
connections (`ConnectionTable`), and is the one place where the three meet."""

from __future__ import annotations

import contextlib
import errno
import logging
import resource
import socket
import threading
import time
from typing import Any

import numpy as np

from functions import wire
from functions.aws import S3Unreachable, naming_s3_failures
from functions.ps.checkpoints import Checkpointer, CheckpointStore
from functions.ps.config import PSConfig
from functions.ps.connections import ConnectionTable
from functions.ps.handshake import Hello, authenticate, welcome
from functions.ps.state import ShardState
from functions.runs import Run
from functions.wire import MsgType

LOG = logging.getLogger(__name__)
ACCEPT_BACKOFF_S = (0.05, 1.0)  # first and longest wait after accept() failed
# accept() errors that mean "out of resources, try again later", not "the listener is gone".
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ParameterServer:
    """A TCP server for one shard; `start()` binds and serves in background threads."""

    def __init__(self, config: PSConfig, s3: Any = None) -> None:
        self.config = config
        self.state = ShardState(config)
        self.checkpoints = Checkpointer(config, self.state, s3)
        self.connections = ConnectionTable(config.max_unauthenticated)
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rejected_connections = 0
        self.truncated_frames = 0
        self.accept_errors = 0
        self._accept_errors_logged: set[int] = set()  # errnos already logged (once each)
        self.address: tuple[str, int] = (config.host, config.port)

    # What the checkpointer knows of the runs, read where the server is what callers hold.
    @property
    def run(self) -> Run | None:
        """The run served (None until a HELLO or the config names one)."""
        return self.checkpoints.run

    @property
    def superseded_runs(self) -> int:
        return self.checkpoints.superseded_runs

    @property
    def restored_iteration(self) -> int | None:
        """The iteration restored on entering the run served (None: none was)."""
        return self.checkpoints.restored_iteration

    @property
    def store(self) -> CheckpointStore | None:
        """The checkpoints of the run served (None without an artifacts bucket)."""
        return self.checkpoints.store

    # -- runs and checkpoints, with the connections they end ---------------------------------
    def enter_run(self, run: Run, keep: socket.socket | None = None) -> None:
        """Serve `run` from now on (see `Checkpointer.enter_run`); when it replaces the run
        served, every authenticated connection but `keep` is dropped (a later request of the
        old run is refused)."""
        if self.checkpoints.enter_run(run):
            self.connections.shut_down_others(keep, handshakes_too=False)

    def restore(self) -> int | None:
        """Load the newest checkpoint every shard has; returns its iteration or None."""
        return self.checkpoints.restore()

    def checkpoint(self) -> int:
        """Write the current state to S3 unless this iteration is already there."""
        return self.checkpoints.checkpoint()

    def rollback(self, keep: socket.socket | None = None) -> int:
        """ROLLBACK: go to the newest common checkpoint unless already there; returns the
        shard's iteration afterwards. Every connection but `keep` is dropped when the state
        changed, so each worker re-syncs (a PULL waiting for a later iteration ends too)."""
        target, rolled_back = self.checkpoints.rollback()
        if rolled_back:
            self.connections.shut_down_others(keep, handshakes_too=True)
        return target

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        if self.config.run is not None:
            self.enter_run(self.config.run)
        listener = socket.create_server((self.config.host, self.config.port), reuse_port=False)
        listener.settimeout(0.2)
        self._listener = listener
        self.address = listener.getsockname()[:2]
        thread = threading.Thread(target=self._accept_loop, name="ps-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self.address

    def stop(self) -> None:
        """Stop accepting, close every connection, join the accept thread (no checkpoint)."""
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        self.connections.close_all()
        with self.state.cond:
            self.state.close()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- accepting -------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        """Accept until stopped. No error ends the loop: a shard that cannot accept is alive
        but useless (no worker, status query or finalize gets in, and no restart fires)."""
        assert self._listener is not None
        backoff_s = ACCEPT_BACKOFF_S[0]
        while not self._stop.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._stop.is_set():  # stop() closed the listener
                    break
                self._note_accept_error(exc, backoff_s)
                # The connection stays in the kernel's backlog; it is accepted once a
                # descriptor is free (a handshake times out or a peer leaves).
                self._stop.wait(backoff_s)
                backoff_s = min(2 * backoff_s, ACCEPT_BACKOFF_S[1])
                continue
            backoff_s = ACCEPT_BACKOFF_S[0]
            self._admit(conn, peer)

    def _note_accept_error(self, exc: OSError, backoff_s: float) -> None:
        """Count every failed accept(); log each kind once (it may repeat thousands of times)."""
        self.accept_errors += 1
        code = exc.errno or 0
        if code in self._accept_errors_logged:
            return
        self._accept_errors_logged.add(code)
        soft_fds, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        kind = "out of resources" if code in RESOURCE_ERRNOS else "unexpected error"
        LOG.error(
            "shard %d cannot accept a connection (%s: %s; open-file limit %d, %d connections "
            "held); retrying with back-off from %.2f s, further errors counted in STATUS "
            "accept_errors",
            self.config.shard,
            kind,
            exc,
            soft_fds,
            len(self.connections),
            backoff_s,
        )

    def _admit(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        """Serve `conn` in its own thread (the table may evict the oldest handshake for it)."""
        self.connections.admit(conn)
        thread = threading.Thread(
            target=self._serve_conn, args=(conn, peer), daemon=True, name=f"ps-conn-{peer[1]}"
        )
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to serve it: refuse this one, keep accepting
            self._note_accept_error(OSError(errno.EAGAIN, str(exc)), 0.0)
            self.connections.forget(conn)
            conn.close()

    # -- one connection --------------------------------------------------------------------
    def _serve_conn(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        rank = None
        try:
            wire.tune_socket(conn)
            with naming_s3_failures():  # a checkpoint, restore or rollback reaches S3
                hello, buf = self._handshake(conn)
                rank = hello.rank
                self.connections.authenticated(conn)
                buffers = [buf]  # receive buffers; usually one (see _receive_buffer)
                while not self._stop.is_set():
                    self._serve_request(conn, hello, buffers)
        except S3Unreachable as exc:
            # The client that asked (or whose push completed the iteration) fails with the
            # cause; checkpoints already in S3 are untouched (a PUT is all or nothing).
            LOG.error("shard %d: checkpoint storage failed: %s", self.config.shard, exc)
            self._try_send_error(conn, str(exc))
        except wire.PSDisconnected:
            # Before the handshake this is a liveness probe or an evicted peer: not news.
            level = logging.INFO if rank is not None else logging.DEBUG
            LOG.log(level, "rank %s from %s:%s disconnected", rank, *peer)
        except (wire.WireError, wire.PSTimeout, wire.RemoteError, ValueError) as exc:
            self.rejected_connections += 1
            LOG.warning("closing connection from %s:%s (rank %s): %s", *peer, rank, exc)
            self._try_send_error(conn, str(exc))
        except OSError as exc:
            LOG.info("connection from %s:%s ended: %s", *peer, exc)
        except Exception as exc:  # noqa: BLE001  # a bug must cost one connection, not a thread
            self.rejected_connections += 1
            LOG.error("internal error serving %s:%s (rank %s): %r", *peer, rank, exc)
            self._try_send_error(conn, f"internal error: {type(exc).__name__}")
        finally:
            self.connections.forget(conn)
            conn.close()

    def _try_send_error(self, conn: socket.socket, message: str) -> None:
        with contextlib.suppress(OSError, wire.PSTimeout, wire.PSDisconnected):
            wire.send_frame(conn, MsgType.ERROR, 0, message.encode()[:1024], time.monotonic() + 1.0)

    def _handshake(self, conn: socket.socket) -> tuple[Hello, np.ndarray]:
        """CHALLENGE, HELLO, WELCOME; a HELLO naming a run enters it in between."""
        timeout_s = self.config.handshake_timeout_s
        deadline = time.monotonic() + timeout_s
        hello = authenticate(conn, self.config, deadline)
        if hello.run is not None:
            self.enter_run(hello.run, keep=conn)  # may restore from S3: the reply waits for it
            deadline = max(deadline, time.monotonic() + timeout_s)
        return hello, welcome(conn, self.config, self.state, hello, deadline)

    def _receive_buffer(self, kind: MsgType, it: int, buffers: list[np.ndarray]) -> np.ndarray:
        """A buffer of this connection that holds no pending gradient; checks the iteration
        before a single payload byte is read.

        Under BSP a worker pushes i+1 only after pulling i+1, i.e. after the update that
        released its previous buffer, so one buffer suffices; only a duplicate push (same rank,
        same iteration) needs a second one.
        """
        st = self.state
        with st.cond:
            if kind == MsgType.PUSH and not st.initialized:
                raise wire.WireError("PUSH before the shard was initialised")
            if kind == MsgType.PUSH and it > st.iteration:
                raise wire.WireError(
                    f"gradient for iteration {it} but the shard is at {st.iteration}"
                )
            for buf in buffers:
                if not st.is_lent(buf):
                    return buf
        buffers.append(np.empty_like(buffers[0]))
        return buffers[-1]

    def _serve_request(self, conn: socket.socket, hello: Hello, buffers: list[np.ndarray]) -> None:
        cfg, st = self.config, self.state
        rank, total = hello.rank, hello.total_params
        header = wire.recv_header(conn, time.monotonic() + cfg.idle_timeout_s)
        # A request that arrives after its run was superseded is refused.
        self.checkpoints.check_run(hello.run)
        deadline = time.monotonic() + cfg.idle_timeout_s
        kind, it = header.msg_type, header.iteration
        if kind in (MsgType.INIT, MsgType.PUSH):
            if rank < 0 or buffers[0].size == 0:
                raise wire.WireError(f"{kind.name} from a control connection")
            buf = self._receive_buffer(kind, it, buffers)
            try:
                wire.recv_payload_into(conn, header, buf, deadline)
            except wire.PSDisconnected:
                self.truncated_frames += 1  # the partial gradient is dropped, never summed
                raise
            # One pass, no temporary: the sum is NaN/inf iff an element is (or it overflows).
            if not np.isfinite(np.sum(buf)):
                raise wire.WireError(
                    f"{kind.name} for iteration {it} holds NaN or inf (or overflows float32)"
                )
            with st.cond:
                before = st.iteration
                if kind == MsgType.INIT:
                    if not st.initialized:
                        st.adopt(total, buf, np.zeros_like(buf), 0)
                        LOG.info(
                            "shard %d initialised by rank %d (%d floats)", cfg.shard, rank, buf.size
                        )
                else:
                    st.add_gradient(rank, it, buf, hello.n_workers)
            if kind == MsgType.INIT:
                # Iteration 0 in S3 at once: a shard that restarts before the first periodic
                # checkpoint then has a common checkpoint to roll every shard back to.
                self.checkpoint()
                wire.send_frame(conn, MsgType.ACK, st.iteration, b"", deadline)
            else:
                self.checkpoints.after_push(before)
        elif kind == MsgType.PULL:
            self._serve_pull(conn, it)
        elif kind == MsgType.CHECKPOINT:
            wire.recv_control(conn, header, deadline)
            done_it = self.checkpoint()
            wire.send_json(
                conn,
                MsgType.ACK,
                done_it,
                {**self.status(), "checkpoint_iteration": done_it},
                deadline,
            )
        elif kind == MsgType.STATUS:
            wire.recv_control(conn, header, deadline)
            wire.send_json(conn, MsgType.ACK, st.iteration, self.status(), deadline)
        elif kind == MsgType.ROLLBACK:
            wire.recv_control(conn, header, deadline)
            done_it = self.rollback(keep=conn)
            wire.send_json(conn, MsgType.ACK, done_it, self.status(), deadline)
        else:
            raise wire.WireError(f"unexpected {kind.name} frame from a worker")

    def _serve_pull(self, conn: socket.socket, it: int) -> None:
        st = self.state
        deadline = time.monotonic() + self.config.wait_timeout_s
        with st.cond:
            generation = st.generation
            while st.iteration < it and st.generation == generation and not self._stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise wire.PSTimeout(
                        f"PULL({it}) waited {self.config.wait_timeout_s:.0f} s; "
                        f"shard still at {st.iteration}"
                    )
                st.cond.wait(min(remaining, 1.0))
            if self._stop.is_set():
                raise wire.PSDisconnected("server stopping")
            if st.iteration < it:  # the wait ended because the shard rolled back
                raise wire.PSDisconnected(f"shard rolled back to iteration {st.iteration}")
            params = st.params_for(it)
        # Sent outside the lock: under BSP nobody can overwrite this buffer until this very
        # worker pushes its next gradient (see the package docstring).
        wire.send_frame(
            conn, MsgType.PARAMS, it, params, time.monotonic() + self.config.idle_timeout_s
        )

    def status(self) -> dict[str, Any]:
        st, run = self.state, self.run
        return {
            "shard": self.config.shard,
            "iteration": st.iteration,
            "total_params": st.total_params,
            "shard_size": st.shard_size,
            "received": sorted(st.received),
            "updates_applied": st.updates_applied,
            "duplicates_ignored": st.duplicates_ignored,
            "partials_superseded": st.partials_superseded,
            "checkpointed_iteration": st.checkpointed_iteration,
            "rollbacks": st.rollbacks,
            "update_s": round(st.update_s, 6),
            "rejected_connections": self.rejected_connections,
            "truncated_frames": self.truncated_frames,
            "evicted_handshakes": self.connections.evicted_handshakes,
            "accept_errors": self.accept_errors,
            "run_id": run.id if run is not None else None,
            "superseded_runs": self.superseded_runs,
        }
