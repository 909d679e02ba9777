"""The rounds of the profiler: each a sequence of children whose readings make one profile.

- ProfileRound: a whole profile (a new one, or a committed workload re-measured): every share
  round the repeats, then the shared-core pairs and crowds, then the PS update rate;
- ReadingRound: a committed profile read again on this machine (reading.measure_reading) and
  used as measured.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from emulator import cpu
from emulator.profiling import children
from emulator.profiling.child import WARMUP_ITERATIONS
from emulator.profiling.document import machine_description, updated_profile
from emulator.profiling.figures import (
    crowded_figures,
    crowded_step_ratio,
    crowded_warmup_iterations,
    interleaved_shares,
    lockstep_samples_s,
    lockstep_wait_fraction,
    paired_speed_ratio,
    parallel_speed_ratio,
    share_point,
)
from emulator.profiling.reading import factors_text, measure_reading, profile_at_reading

# The crowded loop: twice as many workers as cores through one shard (on 2 cores the digits
# MLP's step cost as much CPU with 4 workers as with 8)
CROWD_PER_CORE = 2


def this_arch() -> str:
    """This machine's architecture as profiles name it (x86_64, arm64)."""
    return platform.machine().replace("aarch64", "arm64")


def ps_update_mb_s(floats: int = 4_000_000, repeats: int = 10) -> float:
    """MB/s of gradient one core folds in and applies (the PS's accumulate + SGD arithmetic)."""
    import numpy as np

    grad = np.random.default_rng(0).standard_normal(floats, dtype=np.float32)
    acc, buf, params = np.zeros_like(grad), np.zeros_like(grad), np.zeros_like(grad)
    t0 = time.perf_counter()
    for _ in range(repeats):
        acc += grad
        buf *= np.float32(0.9)
        buf += acc
        params -= np.float32(0.01) * buf
    return repeats * grad.nbytes / 1e6 / (time.perf_counter() - t0)


@dataclass(frozen=True)
class SharedCores:
    """What the pairs and crowds read (None: not measured, e.g. on one core)."""

    parallel: tuple[float, int] | None  # (speed with every core training over alone, ranks)
    lockstep_wait: float | None  # the straggler's wait, in its steps
    crowd: tuple[float, int] | None  # (a step's CPU in a crowd over alone, workers)
    crowd_warmup: float | None  # the crowd's first steps' excess CPU, in steps alone
    readings: list[float]  # each pair's parallel_speed_ratio


@dataclass(frozen=True)
class ProfileRound:
    """A whole profile of the workload `raw` on this machine, at `shares` (all checked)."""

    raw: dict[str, Any]
    shares: list[float]
    repeats: int
    pairs: int
    measure_s: float
    when: str

    def run(self) -> dict[str, Any]:
        """The profile `raw` with every measured field replaced. RuntimeError where the shares
        cannot be held or a child failed (its one line)."""
        with contextlib.ExitStack() as stack:
            limiter = stack.enter_context(cpu.CpuLimiter(f"lambda-dnn-profile-{os.getpid()}"))
            print(limiter.status(), file=sys.stderr)
            if not limiter.enforced:
                raise RuntimeError("cannot hold the vCPU shares here")
            cpu_limit = str(limiter.mechanism)  # enforced, so the mechanism's name
            ps_endpoint = stack.enter_context(children.loopback_ps())
            points = self.share_points(limiter, ps_endpoint)
            shared = self.shared_cores(limiter)
        startup_s = min(points, key=lambda p: abs(p["vcpu_share"] - 1.0))["startup_s"]
        agg = ps_update_mb_s()
        print(f"PS update on one core: {agg:.0f} MB/s", file=sys.stderr)
        return updated_profile(
            self.raw, points, startup_s, agg, this_arch(), self.when, machine_description(),
            cpu_limit=cpu_limit,
            warmup_iterations=statistics.median(p["warmup_iterations"] for p in points),
            parallel=shared.parallel, crowd=shared.crowd, crowd_warmup=shared.crowd_warmup,
            lockstep_wait=shared.lockstep_wait, parallel_readings=shared.readings,
        )  # fmt: skip

    def child(self) -> dict[str, Any]:
        """The children's model, dataset source and batch, as every child of the round takes."""
        raw = self.raw
        source = children.dataset_source(raw["dataset"], int(raw["dataset_samples"]))
        return {"model": raw["model"], "batch": int(raw["profiled_local_batch"]), "source": source}

    def share_points(self, limiter: cpu.CpuLimiter, ps_endpoint: str) -> list[dict[str, Any]]:
        """Each share's point: its children round the shares (interleaved_shares), the median
        of the repeats (share_point), each also timing the loop through `ps_endpoint`."""
        runs_at: dict[float, list[dict[str, Any]]] = {share: [] for share in self.shares}
        for share in interleaved_shares(self.shares, self.repeats):
            runs_at[share].append(children.measure_share(
                limiter, share, measure_s=self.measure_s, ps_endpoint=ps_endpoint, **self.child()
            ))  # fmt: skip
        points = [share_point(runs_at[share]) for share in sorted(runs_at)]
        for point in points:
            print(
                f"share {point['vcpu_share']:>5g} vCPU: {point['samples_per_s']:9.1f} samples/s "
                f"(start-up {point['startup_s']:.2f} s, warm-up "
                f"{point['warmup_iterations']:.1f} steps, loop +"
                f"{1000 * point['loop_extra_cpu_s']:.3f} ms CPU and "
                f"{1000 * point['loop_overhead_s']:.3f} ms an iteration)",
                file=sys.stderr,
            )
        return points

    def shared_cores(self, limiter: cpu.CpuLimiter) -> SharedCores:
        """The lockstep pairs and the crowds (SharedCores), on two cores or more.

        One child per core at 1 vCPU, together, each time right after one child alone: the ratio
        of each pair, then their median. This VM's speed drifts by 10-25% within minutes, so a
        together run set against the 1-vCPU point timed a minute before measured the drift as
        often as the sharing (MobileNetV2: 1.0, clamped, where lockstep runs showed 0.8)."""
        cores = int(cpu.machine_cores())
        pairs: list[tuple[float, float]] = []
        crowds: list[tuple[float, float]] = []
        warmups: list[tuple[float, float]] = []
        waits: list[float] = []
        count = CROWD_PER_CORE * cores
        child = self.child()
        batch = child["batch"]
        alone: dict[str, Any] = {}
        for round_ in range(max(self.repeats, self.pairs) if cores >= 2 else 0):
            if round_ < self.repeats:  # sizes the loops; the crowd's pair, timed anew
                alone = children.measure_share(limiter, 1.0, measure_s=self.measure_s, **child)
            # In lockstep, as a run's workers step, against one child alone in the same loop.
            # Measured on 2 cores (CNN, 1 vCPU each): two children started together but stepping
            # apart kept 0.86-1.06 of the speed alone (median 0.96), the same two as the ranks
            # of one run 0.79-0.91 (0.86); a run's n = 2 steps were 1.15-1.2x the 1-vCPU step
            # around it. Alone in the loop, not back to back: the MLP's millisecond step after a
            # wake-up from the exchange is slower for one rank too (0.635 of back to back with
            # two ranks), which loop_overhead_s already holds.
            if round_ < self.pairs:
                lockstep = children.crowd_iterations(alone["samples_per_s"], batch, cores, cores,
                                                     self.measure_s)  # fmt: skip
                alone_ranks, together_ranks = (
                    children.crowd_through_fresh_shard(limiter, ranks, iterations=lockstep,
                                                       **child)
                    for ranks in (1, cores)
                )  # fmt: skip
                pairs.append((lockstep_samples_s(alone_ranks, batch),
                              lockstep_samples_s(together_ranks, batch)))  # fmt: skip
                waits.append(lockstep_wait_fraction(together_ranks))
            if round_ >= self.repeats:
                continue
            iterations = children.crowd_iterations(
                alone["samples_per_s"], batch, cores, count, self.measure_s
            )
            crowded, warmup_cpu = crowded_figures(children.crowd_through_fresh_shard(
                limiter, count, iterations=iterations, **child
            ))  # fmt: skip
            crowds.append((alone["step_cpu_s"], crowded))
            warmups.append((alone["step_cpu_s"], warmup_cpu))
        shared = SharedCores(
            parallel=(paired_speed_ratio(pairs), cores) if pairs else None,
            lockstep_wait=statistics.median(waits) if waits else None,
            crowd=(crowded_step_ratio(crowds), count) if crowds else None,
            crowd_warmup=crowded_warmup_iterations(warmups) if warmups else None,
            readings=[parallel_speed_ratio(alone_s, together_s) for alone_s, together_s in pairs],
        )
        say_shared(shared, cores, count)
        return shared


def say_shared(shared: SharedCores, cores: int, count: int) -> None:
    """The shared-core figures, one line each on stderr."""
    if shared.parallel:
        print(f"{cores} at once: {shared.parallel[0]:.3f} of the speed alone (pairs: "
              f"{', '.join(f'{r:.3f}' for r in shared.readings)})", file=sys.stderr)  # fmt: skip
    if shared.lockstep_wait is not None:
        print(f"the straggler's wait: {shared.lockstep_wait:.3f} of its step", file=sys.stderr)
    if shared.crowd:
        print(f"{count} workers in a loop on {cores} cores: a step takes {shared.crowd[0]:.2f}× "
              "its CPU alone", file=sys.stderr)  # fmt: skip
    if shared.crowd_warmup is not None:
        print(f"their first {WARMUP_ITERATIONS} steps cost {shared.crowd_warmup:.2f} steps more",
              file=sys.stderr)  # fmt: skip


@dataclass(frozen=True)
class ReadingRound:
    """The committed profile `raw` read again on this machine now and used as measured
    (reading.profile_at_reading)."""

    raw: dict[str, Any]
    when: str

    def run(self) -> dict[str, Any]:
        """The profile at this machine's speed. RuntimeError where no share can be held or a
        child failed, ValueError where the profile has no 1-vCPU point on this machine's
        architecture."""
        reading = measure_reading(self.raw)
        doc = profile_at_reading(self.raw, reading, this_arch(), self.when)
        factors = {float(k): v for k, v in doc["anchor"]["speed_factor_by_share"].items()}
        print(f"anchor {self.raw['name']}: {reading['samples_per_s']:.1f} samples/s at 1 vCPU; "
              f"speed over the profile's {factors_text(factors)}; start-up "
              f"{reading['startup_s']:.2f} s", file=sys.stderr, flush=True)  # fmt: skip
        return doc
