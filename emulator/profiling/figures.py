"""The profile's figures reduced from its children's results: pure functions of their readings.

The order the children run in (round the shares), a share's point from its repeats, and the
shared-core figures (the speed with every core training, a crowd's step and warm-up CPU, the
straggler's wait) from pairs of children timed back to back.
"""

from __future__ import annotations

import statistics
from typing import Any


def interleaved_shares(shares: list[float], repeats: int) -> list[float]:
    """The order the children run in: every share once, lowest first, `repeats` times over.

    Not each share's repeats back to back: this VM has slow spells of minutes in which the
    same work costs up to 3x the CPU (bench/predict's digits rows: a run's CPU 3.79 to 12.21 s
    for the same 5,616 iterations), and three repeats in one spell made the median
    of that share the spell's. A digits profile measured so read the loop's extra CPU at
    0.58-0.73 ms and its exchange at 1.06 ms at 1 vCPU, where the runs around it spent 0.32 ms
    and 0.37 ms; round the shares, a spell meets one repeat of each and the median leaves it.
    """
    return [share for _ in range(repeats) for share in sorted(set(shares))]


def share_point(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One share's point from its repeats: the median run by speed, with the median of each
    other figure taken apart.

    The median, not the fastest: the profile predicts the emulator's runs, and they see the
    machine's typical background load, not its quietest moment (measured: the fastest of two
    made compute 17-27% optimistic at n = 1)."""
    point = dict(sorted(runs, key=lambda r: r["samples_per_s"])[len(runs) // 2])
    for figure in ("startup_s", "loop_extra_cpu_s", "warmup_iterations", "loop_overhead_s"):
        values = [r[figure] for r in runs if figure in r]
        if values:
            point[figure] = statistics.median(values)
    return point


def crowded_figures(children: list[dict[str, Any]]) -> tuple[float, float]:
    """The medians over a crowd's children (children.crowd_through_fresh_shard) of their step's
    CPU per iteration and of the CPU their first steps (taken together, back to back, before
    the loop) cost beyond as many steady ones (child.warmup_cpu_s)."""
    return (
        statistics.median(c["crowded_step_cpu_s"] for c in children),
        statistics.median(c["crowded_warmup_cpu_s"] for c in children),
    )


def lockstep_samples_s(children: list[dict[str, Any]], batch: int) -> float:
    """Mean samples/s of the steps of a crowd's children (children.crowd_through_fresh_shard):
    the ranks of one BSP run compute in lockstep, every rank starting its step when the exchange
    releases them all, as the workers of a run on shared cores do."""
    return statistics.mean(batch / c["crowded_step_s"] for c in children)


def lockstep_wait_fraction(together: list[dict[str, Any]]) -> float:
    """What the slowest rank of each iteration makes the straggler wait, in its own steps: the
    ranks of one BSP loop (children.crowd_through_fresh_shard) step the same iterations, and
    each waits for that iteration's slowest step before the next; the straggler (the rank whose
    steps took longest, as functions.terms.measured_terms picks a run's) waits max − its own
    each iteration. Read from the steps alone, so the exchange's own cost with more ranks (the
    model's other terms) is not in it: the difference of the straggler's time outside its step
    and one rank's alone read 0.32 of the digits MLP's 0.8 ms step, most of it the shard
    serving two ranks in turn."""
    import numpy as np

    steps = np.array([c["crowded_steps_s"] for c in together], dtype=np.float64)
    straggler = steps[int(np.argmax(steps.sum(axis=1)))]
    return float(np.mean(steps.max(axis=0) - straggler) / np.mean(straggler))


def crowded_step_ratio(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone, crowded) step CPU pairs of crowded / alone, at least 1 (a crowd
    that came out cheaper only saw less noise)."""
    return max(1.0, statistics.median(crowded / alone for alone, crowded in pairs))


def crowded_warmup_iterations(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone step CPU, crowd's warm-up CPU) pairs of the warm-up in steps
    alone, at least 0 (first steps that came out cheaper than steady ones only saw noise)."""
    return max(0.0, statistics.median(warmup / alone for alone, warmup in pairs))


def parallel_speed_ratio(alone_samples_s: float, together_samples_s: float) -> float:
    """A worker's speed with the machine's cores all training, over alone; at most 1 (a run
    that came out faster together only saw less noise)."""
    return min(1.0, together_samples_s / alone_samples_s)


def paired_speed_ratio(pairs: list[tuple[float, float]]) -> float:
    """The median over (alone, together) samples/s pairs, each timed back to back, of each
    pair's parallel_speed_ratio: a drift of the machine's speed between pairs cancels."""
    return statistics.median(parallel_speed_ratio(alone, together) for alone, together in pairs)
