"""How a probe times an action: a first call untimed, then every size once a round in turn."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def timer(action: Callable[[], object]) -> Callable[[], float]:
    """A callable timing one call of `action`, after a first untimed call: it opens
    connections and fills caches, not what a figure describes."""
    action()

    def timed() -> float:
        t0 = time.perf_counter()
        action()
        return time.perf_counter() - t0

    return timed


def median_rounds(timers: Sequence[Callable[[], float]], rounds: int) -> list[float]:
    """Each timer's median time over `rounds` rounds, every timer once a round in turn: a
    change of the machine's load meets every size alike, where timing all of one size and then
    all of the next read a load that came and went as a time falling with size."""
    samples: list[list[float]] = [[] for _ in timers]
    for _ in range(rounds):
        for timer, taken in zip(timers, samples, strict=True):
            taken.append(timer())
    return [statistics.median(taken) for taken in samples]
