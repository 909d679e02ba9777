"""The PS shards as local processes: started with the EC2 instance's command line (bound to
127.0.0.1), waited for until each prints READY, and kept alive as Docker's restart policy and
the container health check keep them on the instance. A pipelined plan's PS sync runs
`ps_count` shards per stage, each holding only its stage's parameters; shards are told apart by
`name` (emulator.definition.shard_name), not by their index, which each stage counts from 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emulator.definition import shard_name
from emulator.naming import SECRET_ENV
from emulator.procs import Supervisor, wait_for_log_line
from emulator.records import EmulatorError
from functions import ps_health
from provisioner.plan import Plan
from stacks import events

PS_READY_TIMEOUT_S = 60.0
LIVENESS_EVERY_S = 5.0  # between liveness probes of one PS shard
LIVENESS_FAILURES = 3  # probes failed in a row before a live shard process counts as dead


@dataclass
class PsShard:
    """One PS shard process; restarted on the same port when it dies (Docker's --restart)."""

    shard: int
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log_path: Path
    endpoint: str = ""
    stage: int | None = None  # a pipelined plan's: the stage whose parameters it holds
    restarts: int = 0
    failed_probes: int = 0  # liveness probes failed in a row
    next_probe_s: float = 0.0  # monotonic time of the next liveness probe

    @property
    def name(self) -> str:
        return shard_name(self.shard, self.stage)


def start_ps_shards(
    supervisor: Supervisor, plan: Plan, *, env: dict[str, str], artifacts_bucket: str, logs: Path
) -> list[PsShard]:
    """Start every PS shard (the EC2 entry point, bound to 127.0.0.1), stage by stage in a
    pipelined plan; wait for each READY."""
    stages: list[int | None] = (
        [None] if plan.pipeline is None else list(range(plan.pipeline.stage_count))
    )
    shards = []
    for stage in stages:
        for shard in range(plan.ps_count):
            argv = events.ps_command(
                plan,
                shard=shard,
                secret_ref=f"env:{SECRET_ENV}",
                artifacts_bucket=artifacts_bucket,
                host="127.0.0.1",
                port=0,  # the shard picks a free port and prints it on its READY line
                stage=stage,
            )
            argv[0] = sys.executable
            log_path = logs / f"ps-{shard_name(shard, stage)}.log"
            proc = supervisor.spawn(argv, env=env, log_path=log_path)
            shards.append(PsShard(shard=shard, argv=argv, proc=proc, log_path=log_path,
                                  stage=stage))  # fmt: skip
    for ps in shards:
        ps.endpoint = _wait_ready(ps)
    return shards


def _wait_ready(ps: PsShard) -> str:
    try:
        return wait_for_log_line(ps.proc, ps.log_path, "READY", PS_READY_TIMEOUT_S)
    except (TimeoutError, RuntimeError) as err:
        message = f"PS shard {ps.name} did not start: {err}; see {ps.log_path}"
        raise EmulatorError(message) from None


def _unresponsive(ps: PsShard, probe: Callable[[str], ps_health.Probe], every_s: float) -> bool:
    """True once `LIVENESS_FAILURES` probes in a row found the live process not serving (what
    the container health check does on EC2); probes `ps` at most every `every_s` seconds."""
    now_s = time.monotonic()
    if now_s < ps.next_probe_s:
        return False
    ps.next_probe_s = now_s + every_s
    ps.failed_probes = 0 if probe(ps.endpoint).serving else ps.failed_probes + 1
    return ps.failed_probes >= LIVENESS_FAILURES


def restart_dead_shards(
    supervisor: Supervisor,
    shards: list[PsShard],
    *,
    env: dict[str, str],
    logs: Path,
    probe: Callable[[str], ps_health.Probe] = ps_health.probe,
    probe_every_s: float = LIVENESS_EVERY_S,
) -> list[str]:
    """What Docker's `--restart unless-stopped` and the PS health check do on the instance: a
    shard process that exited, or that failed its liveness probe `LIVENESS_FAILURES` times in a
    row, is (killed and) started again on its port; it restores the newest common checkpoint
    and the workers roll the other shards back to it. Returns one note per restart."""
    notes = []
    for ps in shards:
        code = ps.proc.poll()
        if code is None and not _unresponsive(ps, probe, probe_every_s):
            continue
        why = (
            f"none (alive, {ps.failed_probes} liveness probes failed in a row)"
            if code is None
            else code
        )
        supervisor.stop(ps.proc, grace_s=1.0)
        ps.failed_probes = 0
        ps.restarts += 1
        port = ps.endpoint.rsplit(":", 1)[1]
        argv = list(ps.argv)
        argv[argv.index("--port") + 1] = port
        ps.log_path = logs / f"ps-{ps.name}-restart-{ps.restarts}.log"
        ps.proc = supervisor.spawn(argv, env=env, log_path=ps.log_path)
        ps.endpoint = _wait_ready(ps)
        notes.append(f"PS shard {ps.name} exited with code {why}; restarted on {ps.endpoint}")
    return notes
