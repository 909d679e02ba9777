"""The progress bar's live loss: read back from the lines the worker prints while it trains."""

from __future__ import annotations

from pathlib import Path

from emulator.progress import logged_loss, render_line
from functions.worker import progress_line


def test_the_newest_progress_line_of_a_worker_log_is_found(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    assert logged_loss(log) is None  # no log yet
    log.write_text(
        "INFO something else\n"
        + progress_line(rank=0, iteration=10, loss=2.25)
        + "\n"
        + "x" * 5000  # a long unrelated line between: only the tail is read
        + "\n"
        + progress_line(rank=0, iteration=42, loss=0.125)
        + "\nWARNING later noise\n"
    )
    assert logged_loss(log) == (42, 0.125)


def test_a_log_without_progress_gives_none(tmp_path: Path) -> None:
    log = tmp_path / "worker-1.log"
    log.write_text("starting\n")
    assert logged_loss(log) is None
    assert "loss --" in render_line(0, 100, None, 0.0, 60.0)
