"""The runner probe: start-up, launch, the cores cold starts share, and the load's CPU part.

Each reads the emulator's own invocation runner (`emulator.runner`) invoking
`emulator.startup_probe`, whose handler module imports the worker (torch) as a cold start does.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from emulator import cpu
from emulator.invocation import Outcome, poll, start_environment, submit
from emulator.options import POLL_INTERVAL_S
from emulator.procs import Supervisor
from emulator.s3_client import create_buckets, s3_client_for
from emulator.s3server import S3Endpoint
from functions import datasets
from provisioner.local_machine import init_cores_at

CONCURRENCY_LIMIT = 8  # emulated functions this machine hosts at once (policy)
INIT_REPEATS = 5  # start-up rounds per runner count: about 2 min on 2 cores (k = 8: ~11 s a round)
# Fresh runners behind load_cpu_s: each first load is one reading of a CPU-bound few tenths of
# a second, and five keep a reading to about 15 s.
LOAD_RUNNERS = 5


def _invoke(
    supervisor: Supervisor,
    environment: Any,
    work: Path,
    name: str,
    poll_s: float,
    event: dict[str, Any] | None = None,
) -> Outcome:
    inv = submit(environment, name=name, event=event or {}, limit_s=60.0, work_dir=work)
    while (outcome := poll(supervisor, inv)) is None:
        time.sleep(poll_s)
    if not outcome.ok:
        raise RuntimeError(f"start-up probe failed: {outcome.error}")
    return outcome


def _invoke_s(
    supervisor: Supervisor, environment: Any, work: Path, name: str, poll_s: float
) -> float:
    return _invoke(supervisor, environment, work, name, poll_s).wall_s


def measure_startup(
    supervisor: Supervisor, env: dict[str, str], work: Path, repeats: int
) -> tuple[float, float, float, float]:
    """(cold_s, warm_s, restart_s, launch_s): a fresh runner's first invocation (spawn
    included), a second one in the same environment, the gap the orchestrator adds between the
    links of a chain (warm calls polled at its interval, each working a different share of that
    interval: a link ends at any phase of the poll, so the mean wait is about half an interval;
    a call that returns at once always waited a whole one, less the work), and the part of the
    cold invocation before the handler's own clock: `repeats` fresh runners' first invocations,
    less the worker module's import each reports (the start-up a worker times itself), median."""
    launches = []
    for k in range(repeats):
        t0 = time.perf_counter()
        probe = start_environment(supervisor, name=f"launch-{k}",
                                  handler="emulator.startup_probe:handler", memory_mb=1769,
                                  work_dir=work, env=env)  # fmt: skip
        import_s = float(_invoke(supervisor, probe, work, f"launch-{k}", 0.005).result["import_s"])
        launches.append(max(0.0, time.perf_counter() - t0 - import_s))
        supervisor.stop(probe.proc, grace_s=2.0)
    t0 = time.perf_counter()
    environment = start_environment(
        supervisor,
        name="probe",
        handler="emulator.startup_probe:handler",
        memory_mb=1769,
        work_dir=work,
        env=env,
    )
    _invoke_s(supervisor, environment, work, "cold", 0.005)
    cold_s = time.perf_counter() - t0
    warm = [_invoke_s(supervisor, environment, work, f"warm-{k}", 0.005) for k in range(repeats)]
    phases = [POLL_INTERVAL_S * (k + 0.5) / repeats for k in range(repeats)]
    gaps = [
        _invoke(supervisor, environment, work, f"gap-{k}", POLL_INTERVAL_S,
                {"sleep_s": sleep_s}).wall_s - sleep_s
        for k, sleep_s in enumerate(phases)
    ]  # fmt: skip
    supervisor.stop(environment.proc, grace_s=2.0)
    return cold_s, statistics.median(warm), statistics.mean(gaps), statistics.median(launches)


def parallel_init_cores(one_s: float, together_s: float, k: int, cores: int) -> float:
    """The cores k cold starts at once effectively get: k·t₁/t_k, within [1, cores].

    Imports run at burst CPU outside the quota, but not at `cores` × one: k processes reading
    the same shared objects and faulting in their pages at once also wait on each other."""
    if one_s <= 0 or together_s <= 0:
        return float(cores)
    return float(min(cores, max(1.0, k * one_s / together_s)))


def init_counts(cores: int) -> tuple[int, ...]:
    """The numbers of runners measure_init_cores starts together: one per core, two and four
    (n = 2, 4, 8 on 2 cores, the crowds bench/predict runs), never more than CONCURRENCY_LIMIT:
    no plan on this catalog starts more, and a 16-core machine would otherwise import torch in
    64 runners at once (the model holds the curve flat beyond its last point)."""
    return tuple(sorted({min(k, CONCURRENCY_LIMIT) for k in (cores, 2 * cores, 4 * cores)}))


def single_init_cores(by_n: tuple[tuple[int, float], ...], cores: int) -> float:
    """The one `init_cores` figure of catalogs read without the curve: the curve at 2·cores
    runners (the count it was measured at before), as the model reads the curve."""
    return float(np.asarray(init_cores_at(2 * cores, None, by_n)))


def measure_init_cores(
    supervisor: Supervisor, env: dict[str, str], work: Path, cores: int, repeats: int
) -> tuple[float, tuple[tuple[int, float], ...]]:
    """(t₁, ((k, effective cores) for each k of init_counts)): t₁ one runner's import alone, in
    seconds (the part of a start-up a crowd stretches), and k runners started together, each
    importing functions.worker (torch) as a worker's cold start does, against one alone: the
    median of `repeats` rounds per k over the median of every one-alone round, one of which
    runs just before each k's round.

    A torch import alone here takes from 1.6 to 2.6 s from one round to the next, so the
    one-alone figure, the denominator of every k's, is read in as many rounds as all the k's
    together: with three of them for all k, three runs of the measurement minutes apart read
    1.44-1.97 cores at k = 2, and paired k by k (each k over the round just before it) 1.41-2.0
    within one run.

    A start-up is the slowest runner's own import of functions.worker (its IMPORT_S), the figure
    the emulator's report measures a worker's start-up by; not the round's wall time, which adds
    k spawns one after the other and the polls: timed so, 4 runners gave 1.53-1.65 cores where
    bench/predict's start-ups at n = 4 and 8 showed 1.8-2.0."""

    def round_s(count: int, tag: str) -> float:
        environments = [
            start_environment(
                supervisor,
                name=f"init-{tag}-{j}",
                handler="emulator.startup_probe:handler",
                memory_mb=1769,
                work_dir=work,
                env=env,
            )
            for j in range(count)
        ]
        imports_s = [  # each returns once its import is done
            _invoke(supervisor, environment, work, f"init-{tag}-{j}", 0.005).result["import_s"]
            for j, environment in enumerate(environments)
        ]
        for environment in environments:
            supervisor.stop(environment.proc, grace_s=2.0)
        return float(max(imports_s))

    alone: list[float] = []
    together: dict[int, list[float]] = {k: [] for k in init_counts(cores)}
    for r in range(repeats):  # every k once a repeat, so a drift of the machine meets them alike
        for k, samples in together.items():
            alone.append(round_s(1, f"one{k}-{r}"))
            samples.append(round_s(k, f"k{k}-{r}"))
    one = statistics.median(alone)
    return one, tuple(
        (k, parallel_init_cores(one, statistics.median(samples), k, cores))
        for k, samples in together.items()
    )


def load_method(runners: int = LOAD_RUNNERS) -> str:
    """How measure_load reads the load's CPU-bound part: the text a figure's source quotes."""
    return (
        "median first load in a fresh runner of a one-shard dataset of 32 samples "
        "(S3 client, manifest, shard, np.load) through emulator.startup_probe, at 1 vCPU "
        f"where a CPU group holds it, {runners} runners"
    )


def measure_load(
    supervisor: Supervisor,
    env: dict[str, str],
    endpoint: S3Endpoint,
    work: Path,
    repeats: int,
    placement: cpu.Placement | None = None,
) -> float:
    """Median seconds of the worker's load of a tiny one-shard dataset (S3 client, manifest,
    shard, np.load: the CPU-bound part, bytes ~0), each the first load of a fresh runner, held
    to 1 vCPU where `placement` holds it, as a worker's load runs at its memory's share (the
    model divides the figure by that share: provisioner.model.load_overhead_s). The dataset
    goes to one bucket, created where it is not there yet: a benchmark's rounds read on one
    server (with a new bucket a round, beside the cases' own, weed failed the fifth one's first
    PUT with InternalError)."""
    bucket, prefix = "calibrate-load", "tiny"
    create_buckets(endpoint, [bucket])
    client = s3_client_for(endpoint)
    datasets.write_shards(client, "synthetic-cifar:32", 1, bucket, prefix, seed=0)
    samples = []
    for k in range(repeats):
        environment = start_environment(
            supervisor,
            name=f"load-{k}",
            handler="emulator.startup_probe:handler",
            memory_mb=1769,
            work_dir=work,
            env=env,
            placement=placement,
        )
        _invoke_s(supervisor, environment, work, f"load-cold-{k}", 0.005)
        event = {"dataset_bucket": bucket, "dataset_prefix": prefix}
        outcome = _invoke(supervisor, environment, work, f"load-{k}", 0.005, event)
        supervisor.stop(environment.proc, grace_s=2.0)
        samples.append(float(outcome.result["load_s"]))
    return statistics.median(samples)
