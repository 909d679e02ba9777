"""One run per run folder: a second run given a folder a live run holds is refused in one line
naming the holder's pid, exit 2, and touches nothing of the first's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.__main__ import main
from emulator.run_lock import LOCK_FILE, run_folder_lock
from tests.emulator.plans import planned_digits

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
# Holds the folder's lock as a run does, says so, and waits to be killed.
HOLDER = (
    "import sys, time; from pathlib import Path; from emulator.run_lock import run_folder_lock\n"
    "with run_folder_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True); time.sleep(600)\n"
)


def _first_run(out_dir: Path) -> tuple[subprocess.Popen[str], dict[Path, str]]:
    """A folder as a run leaves it mid-way, held by another process: (holder, files)."""
    files = {out_dir / "logs" / "worker-0.log": "training\n",
             out_dir / "artifacts" / "model.pt": "weights",
             out_dir / "report.json": '{"status": "succeeded"}'}  # fmt: skip
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out_dir)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder, files


def test_a_second_run_on_a_held_folder_is_refused_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(planned_digits("emu-lock").to_json())
    out_dir = tmp_path / "run"
    holder, files = _first_run(out_dir)
    try:
        code = main([str(plan_path), "--out", str(out_dir), "--quiet"])
        err = capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    assert err == (
        f"error: output folder {str(out_dir)!r} is in use by another run (pid {holder.pid}); "
        "wait for it to end or give another --out\n"
    )
    assert {path: path.read_text() for path in files} == files
    assert sorted(p.name for p in out_dir.iterdir()) == [LOCK_FILE, "artifacts", "logs",
                                                          "report.json"]  # fmt: skip


def test_the_lock_goes_with_its_holder_however_it_ends(tmp_path: Path) -> None:
    holder, _ = _first_run(tmp_path / "run")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=WAIT_S)
    with run_folder_lock(tmp_path / "run"):  # no stale lock: the kernel dropped it
        assert (tmp_path / "run" / LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_symlink_as_the_lock_file_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_FILE).symlink_to(victim)
    with pytest.raises(OSError), run_folder_lock(tmp_path / "run"):
        pass
    assert victim.read_text() == "keep"
