"""The PS boot files (stacks/ps_boot/), run for real in bash against fake `docker` and `aws`.

The PS no longer boots at deploy with everything it needs: the interface endpoints (ECR, logs,
the secret) exist only while a run goes. So the start script must fail, for systemd to retry,
while they are absent, pull the image once, and start the container with its health check.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from stacks.parameter_servers import BOOT_DIR, ps_env_lines, ps_user_data_lines

SETTINGS = {
    "region": "eu-west-1",
    "registry": "123.dkr.ecr",
    "image_uri": "img:tag",
    "container": ["python", "-m", "functions.ps", "--port", "7070", "--job-id", "j 1"],
    "log_group": "lg",
    "shard": 2,
}
LINES = ps_user_data_lines(**SETTINGS)  # type: ignore[arg-type]


def run_start(tmp_path: Path, *, aws_ok: bool, image_present: bool) -> tuple[int, list[str]]:
    """Run ps-start.sh with fakes that log their arguments; (exit code, logged calls)."""
    calls = tmp_path / "calls"
    (tmp_path / "docker").write_text(
        "#!/bin/bash\n"
        f"{{ printf docker; printf ' %q' \"$@\"; echo; }} >> {calls}\n"
        f'if [ "$1 $2" = "image inspect" ]; then exit {0 if image_present else 1}; fi\n'
    )
    (tmp_path / "aws").write_text(
        f'#!/bin/bash\nprintf "aws %s\\n" "$*" >> {calls}\nexit {0 if aws_ok else 255}\n'
    )
    for fake in ("docker", "aws"):
        (tmp_path / fake).chmod(0o755)
    env_file = tmp_path / "ps.env"
    env_file.write_text("\n".join(ps_env_lines(**SETTINGS)) + "\n")  # type: ignore[arg-type]
    env = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "LAMBDADNN_PS_ENV": str(env_file),
    }
    done = subprocess.run(["bash", str(BOOT_DIR / "ps-start.sh")], env=env, timeout=60)
    return done.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_user_data_is_valid_bash_and_writes_the_start_script_and_unit() -> None:
    assert subprocess.run(["bash", "-n", "-c", "\n".join(LINES)]).returncode == 0
    assert LINES[0] == "set -euo pipefail"
    script = "\n".join(LINES)
    assert (BOOT_DIR / "ps-start.sh").read_text().strip() in script
    assert "systemctl enable --now lambdadnn-ps.service" in script
    assert "cfn-signal" not in script  # the run waits for the PS, not the deploy


def test_start_fails_for_systemd_to_retry_until_the_run_opens_the_endpoints(
    tmp_path: Path,
) -> None:
    code, calls = run_start(tmp_path, aws_ok=False, image_present=False)
    assert code != 0
    assert not any(c.startswith("docker run") for c in calls)


def test_first_boot_pulls_then_runs_and_later_boots_reuse_the_image(tmp_path: Path) -> None:
    code, calls = run_start(tmp_path, aws_ok=True, image_present=False)
    assert code == 0
    assert "docker pull img:tag" in calls
    assert calls.index("docker pull img:tag") < next(
        i for i, c in enumerate(calls) if c.startswith("docker run")
    )
    (tmp_path / "calls").unlink()
    code, calls = run_start(tmp_path, aws_ok=False, image_present=True)
    assert code == 0 and not any(c.startswith(("aws", "docker pull")) for c in calls)


def test_the_container_runs_the_ps_with_its_health_check(tmp_path: Path) -> None:
    _, calls = run_start(tmp_path, aws_ok=True, image_present=True)
    run = shlex.split(next(c for c in calls if c.startswith("docker run")))
    health = run[run.index("--health-cmd") + 1]
    assert health.split() == [
        "python",
        "-m",
        "functions.ps_health",
        "127.0.0.1:7070",
        "--attempts",
        "3",
        "--timeout-s",
        "5",
        "--terminate-pid",
        "1",
    ]
    assert run[run.index("--health-timeout") + 1] == "30s"  # > 3 x (5 s probe + 1 s pause)
    assert "awslogs-stream=ps-2" in run and "--rm" in run
    image_at = run.index("img:tag")
    assert run.index("--health-cmd") < image_at  # a docker option, not a PS flag
    assert run[run.index("--entrypoint") + 1] == "python"
    assert run[image_at + 1 :] == ["-m", "functions.ps", "--port", "7070", "--job-id", "j 1"]


def test_the_unit_restarts_the_ps_forever_and_stops_it_gracefully() -> None:
    unit = (BOOT_DIR / "lambdadnn-ps.service").read_text()
    assert "Restart=always" in unit and "StartLimitIntervalSec=0" in unit
    assert "ExecStart=/usr/local/bin/lambdadnn-ps" in unit
