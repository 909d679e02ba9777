"""A plain-text progress bar on stderr: iteration, loss, elapsed, ETA and the deadline.

On a terminal it redraws one line (carriage return) at most once a second; without a TTY (CI,
a log file) it prints a full line at most every few seconds, so logs stay readable.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

# functions.worker.progress_line, as it lands in an environment's log.
PROGRESS_RE = re.compile(r"progress rank=(\d+) iteration=(\d+) loss=([-+0-9.eEinfa]+)")


def eta_s(iteration: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far; None before the first iteration is done."""
    if iteration <= 0 or total <= 0:
        return None
    return elapsed_s / iteration * max(0, total - iteration)


def logged_loss(log_path: Path, max_bytes: int = 4096) -> tuple[int, float] | None:
    """(iteration, loss) of the newest progress line in a worker's log, or None."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - max_bytes))
            tail = log.read().decode(errors="replace")
    except OSError:
        return None
    matches = PROGRESS_RE.findall(tail)
    if not matches:
        return None
    _, iteration, loss = matches[-1]
    return int(iteration), float(loss)


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "--"
    seconds = max(0.0, seconds)
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def render_line(
    iteration: int,
    total: int,
    loss: float | None,
    elapsed_s: float,
    deadline_s: float | None,
    width: int = 24,
) -> str:
    """`[#####-----] it 120/400  loss 0.532  1m10s elapsed  ETA 2m  deadline 5m00s (on time)`."""
    fraction = min(1.0, iteration / total) if total > 0 else 0.0
    filled = int(round(fraction * width))
    bar = "#" * filled + "-" * (width - filled)
    remaining_s = eta_s(iteration, total, elapsed_s)
    parts = [
        f"[{bar}] it {iteration}/{total}",
        f"loss {loss:.4f}" if loss is not None else "loss --",
        f"{_fmt_s(elapsed_s)} elapsed",
        f"ETA {_fmt_s(remaining_s)}",
    ]
    if deadline_s is not None:
        verdict = ""
        if remaining_s is not None:
            verdict = " (on time)" if elapsed_s + remaining_s <= deadline_s else " (LATE)"
        parts.append(f"deadline {_fmt_s(deadline_s)}{verdict}")
    return "  ".join(parts)


@dataclass
class ProgressBar:
    """Throttled writer of `render_line` to a stream."""

    total: int
    deadline_s: float | None
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    _last_write_s: float = -1e9
    _last_text: str = ""

    @property
    def is_tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def update(
        self, iteration: int, loss: float | None, elapsed_s: float, force: bool = False
    ) -> None:
        now = time.monotonic()
        interval_s = 1.0 if self.is_tty else 5.0
        text = render_line(iteration, self.total, loss, elapsed_s, self.deadline_s)
        # The same line twice says nothing new, forced or not (the final update often repeats
        # the last periodic one).
        if text == self._last_text or (not force and now - self._last_write_s < interval_s):
            return
        self._last_write_s, self._last_text = now, text
        if self.is_tty:
            self.stream.write("\r" + text.ljust(110))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        """A line of its own (worker re-invoked, retried...) that does not break the bar."""
        if self.is_tty and self._last_text:
            self.stream.write("\n")
            self._last_text = ""
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.is_tty and self._last_text:
            self.stream.write("\n")
            self.stream.flush()
