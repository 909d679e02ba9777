"""The emulator restarts a PS shard whose process lives but fails its liveness probe
LIVENESS_FAILURES times in a row (the container health check's job on EC2)."""

from __future__ import annotations

import sys
from pathlib import Path

from emulator.procs import Supervisor
from emulator.ps_shards import LIVENESS_FAILURES, PsShard, _wait_ready, restart_dead_shards
from functions.ps_health import Probe

# Listens on --port (0: any) and never accepts: alive, but a starved shard.
MUTE_SHARD = (
    "import socket, sys, time\n"
    "s = socket.create_server(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1])))\n"
    "print(f'READY 127.0.0.1:{s.getsockname()[1]}', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_live_shard_that_fails_liveness_is_killed_and_restarted(tmp_path: Path) -> None:
    supervisor = Supervisor()
    with supervisor.guard():
        argv = [sys.executable, "-c", MUTE_SHARD, "--port", "0"]
        log = tmp_path / "ps-0.log"
        proc = supervisor.spawn(argv, env={}, log_path=log)
        shard = PsShard(shard=0, argv=argv, proc=proc, log_path=log)
        shard.endpoint = first_endpoint = _wait_ready(shard)
        verdicts: list[bool] = []

        def probe(endpoint: str) -> Probe:
            assert endpoint == shard.endpoint
            serving = verdicts.pop(0)
            return Probe(serving, True, "test verdict")

        def step(*serving: bool) -> list[str]:
            verdicts.extend(serving)
            return restart_dead_shards(
                supervisor, [shard], env={}, logs=tmp_path, probe=probe, probe_every_s=0.0
            )

        # A success resets the count: only failures in a row restart the shard.
        for serving in [False] * (LIVENESS_FAILURES - 1) + [True]:
            assert step(serving) == []
        for _ in range(LIVENESS_FAILURES - 1):
            assert step(False) == []
        assert proc.poll() is None
        notes = step(False)
        assert len(notes) == 1 and "liveness probes failed in a row" in notes[0]
        assert proc.poll() is not None  # the old process was killed
        assert shard.proc is not proc and shard.proc.poll() is None and shard.restarts == 1
        assert shard.endpoint == first_endpoint  # the same port, as workers know it
        assert shard.failed_probes == 0
