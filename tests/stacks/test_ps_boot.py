"""The PS boot script's readiness wait, run for real in bash against a fake `docker`."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from stacks.parameter_servers import ps_user_data_lines

LINES = ps_user_data_lines(region="eu-west-1", registry="123.dkr.ecr", image_uri="img:tag",
                           container=["python", "-m", "functions.ps", "--port", "7070"],
                           log_group="lg", shard=0)  # fmt: skip


def run_wait(tmp_path: Path, *, logs: str, running: str) -> int:
    """Run the script's last two lines (the wait) with a fake docker; return bash's exit code."""
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/bash\n"
        f'if [ "$1" = logs ]; then printf \'{logs}\'; seq 1 200000; fi\n'  # long log: SIGPIPE bait
        f'if [ "$1" = inspect ]; then echo {running}; fi\n'
    )
    fake.chmod(0o755)
    script = "\n".join(["set -euo pipefail", "sleep() { :; }", *LINES[-2:]])
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", script], env=env, timeout=60).returncode


def test_boot_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", "-c", "\n".join(LINES)]).returncode == 0
    assert LINES[0] == "set -euo pipefail"


def test_wait_succeeds_once_the_ps_prints_ready(tmp_path: Path) -> None:
    assert run_wait(tmp_path, logs="READY 0.0.0.0:7070\\n", running="true") == 0


def test_wait_fails_at_once_when_the_ps_container_died(tmp_path: Path) -> None:
    assert run_wait(tmp_path, logs="Traceback\\n", running="false") == 1


def test_the_container_health_check_probes_the_ps_port_and_can_restart_it() -> None:
    run = next(shlex.split(line) for line in LINES if line.startswith("docker run"))
    health = run[run.index("--health-cmd") + 1]
    assert health == (
        "python -m functions.ps_health 127.0.0.1:7070 --attempts 3 --timeout-s 5 --terminate-pid 1"
    )
    assert run[run.index("--restart") + 1] == "unless-stopped"  # what brings a SIGTERMed PS back
    assert run[run.index("--health-timeout") + 1] == "30s"  # > 3 x (5 s probe + 1 s pause)
    assert run.index("--health-cmd") < run.index("img:tag")  # a docker option, not a PS flag
