"""A parent the test kills with SIGKILL: it starts `weed mini` (in a temp folder of its own) and
one real PS shard, the latter from a thread that has ended by then, prints
`READY <weed pid> <PS pid> <weed's temp folder>` and waits to be killed.

`python -m tests.emulator.killed_parent LOG_DIR`
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from emulator.naming import SECRET_ENV
from emulator.procs import Supervisor, wait_for_log_line
from emulator.s3server import weed_server


def main(log_dir: Path) -> None:
    supervisor = Supervisor()
    log_path = log_dir / "ps.log"
    argv = [sys.executable, "-m", "functions.ps", "--job-id", "orphans", "--workers", "1",
            "--port", "0", "--secret-ref", f"env:{SECRET_ENV}"]  # fmt: skip
    env = {**os.environ, SECRET_ENV: "orphan-test"}
    with weed_server(log_dir=log_dir / "s3") as endpoint:
        started = []
        # A Map item's thread, say: it ends, and the PS it started must not end with it.
        spawner = threading.Thread(
            target=lambda: started.append(supervisor.spawn(argv, env=env, log_path=log_path))
        )
        spawner.start()
        spawner.join()
        (ps,) = started
        wait_for_log_line(ps, log_path, "READY", 60.0)
        weed_dir = Path(os.readlink(f"/proc/{endpoint.pid}/cwd"))
        print(f"READY {endpoint.pid} {ps.pid} {weed_dir}", flush=True)
        time.sleep(600)  # the test kills this process long before


if __name__ == "__main__":
    main(Path(sys.argv[1]))
