"""The data-plane benchmark's baselines, beside our PS (bench/sync.py): the same n processes
against a minimal echo server over loopback TCP (the best one server process can do with the
same traffic shape: no handshake, no barrier, no arithmetic), and a gloo all-reduce of the same
tensor (the PS-less synchronous step)."""

from __future__ import annotations

import multiprocessing as mp
import socket
import struct
import time
from typing import Any

import numpy as np

MB = 1_000_000
LEN = struct.Struct("!Q")


# -- raw loopback baseline ----------------------------------------------------------------
def _raw_server(port_q: Any, stop_ev: Any) -> None:
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port_q.put(listener.getsockname()[1])

    def serve(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = None
        try:
            while True:
                head = bytearray(LEN.size)
                if not _recv_into(conn, memoryview(head)):
                    return
                (length,) = LEN.unpack(head)
                if buf is None or buf.nbytes != length:
                    buf = np.empty(length, np.uint8)
                if not _recv_into(conn, memoryview(buf)):
                    return
                conn.sendall(memoryview(buf))
        finally:
            conn.close()

    while not stop_ev.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
    listener.close()


def _recv_into(conn: socket.socket, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def _raw_client(port: int, nbytes: int, reps: int, barrier: Any, out_q: Any) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    send = np.ones(nbytes, np.uint8)
    recv = np.empty(nbytes, np.uint8)

    def step() -> None:
        sock.sendall(LEN.pack(nbytes))
        sock.sendall(memoryview(send))
        _recv_into(sock, memoryview(recv))

    step()  # warm-up
    barrier.wait()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    out_q.put(time.perf_counter() - t0)
    sock.close()


def measure_raw(size_mb: float, n: int, reps: int) -> float:
    ctx = mp.get_context("fork")
    port_q, stop_ev, out_q = ctx.Queue(), ctx.Event(), ctx.Queue()
    server = ctx.Process(target=_raw_server, args=(port_q, stop_ev))
    server.start()
    port = port_q.get(timeout=30)
    barrier = ctx.Barrier(n)
    nbytes = int(size_mb * MB) // 4 * 4
    clients = [
        ctx.Process(target=_raw_client, args=(port, nbytes, reps, barrier, out_q)) for _ in range(n)
    ]
    for c in clients:
        c.start()
    elapsed = [out_q.get(timeout=600) for _ in clients]
    for c in clients:
        c.join()
    stop_ev.set()
    server.join(timeout=10)
    return max(elapsed) / reps


# -- gloo all-reduce ------------------------------------------------------------------------
def _gloo_worker(rank: int, n: int, port: int, plan: list[tuple[float, int]], out_q: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    results = []
    for size_mb, reps in plan:
        tensor = torch.ones(int(size_mb * MB) // 4)
        dist.all_reduce(tensor)  # warm-up
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(tensor)
        dist.barrier()
        results.append((time.perf_counter() - t0) / reps)
    if rank == 0:
        out_q.put(results)
    dist.destroy_process_group()


def measure_gloo(n: int, plan: list[tuple[float, int]]) -> list[float]:
    ctx = mp.get_context("spawn")
    out_q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_gloo_worker, args=(r, n, port, plan, out_q)) for r in range(n)]
    for p in procs:
        p.start()
    results: list[float] = out_q.get(timeout=1800)
    for p in procs:
        p.join()
    return results
