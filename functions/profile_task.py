"""Profiling in Lambda: time one function's training step at its memory size; assemble the profile.

`handler` (one Lambda function per memory size, the worker's image) loads one shard, builds the
model and times forward + backward at the profile's local batch for a few dozen iterations after
a warm-up: λDNN's R(m), compute only, exactly the step `emulator.profile` times on this machine
(the update is the PS's term, measured apart). It reports samples/s, its start-up (import +
shard load + model build, as the worker reports it) and its peak resident memory.

`finalize_handler` turns the per-size results into a profile document (profiles/README.md):
the committed profile with the measured fields replaced and their sources dated, written to the
artifacts bucket for `python -m tools.fetch_profile` to bring into `profiles/`.
"""

from __future__ import annotations

import time

_MODULE_START = time.perf_counter()

import dataclasses  # noqa: E402  # the import time of torch is part of the start-up we report
import datetime as dt  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

from functions import datasets, models  # noqa: E402
from functions.aws import naming_s3_failures, remaining_s, s3_client  # noqa: E402
from functions.model_spec import ModelError, parse_spec  # noqa: E402
from functions.worker import next_iteration_estimate_s, torch_threads  # noqa: E402

IMPORT_S = time.perf_counter() - _MODULE_START
VCPU_MEMORY_MB = 1769  # start-up is reported at the size nearest one vCPU, as emulator.profile
RSS_HEADROOM = 1.2  # min_memory_mb: the peak resident set plus a fifth for the runtime's slack
MEMORY_STEP_MB = 64


class ProfileError(ValueError):
    """A bad profiling event or a run that measured nothing; the message is one line."""


@dataclass(frozen=True)
class ProfileTask:
    """One profiling invocation (stacks/profile_run.py builds the event)."""

    job_id: str
    model: str
    dataset_bucket: str
    dataset_prefix: str
    local_batch: int
    iterations: int
    warmup_iterations: int
    memory_mb: int
    seed: int = 0
    ephemeral_storage_mb: int = 512
    safety_margin_s: float = 10.0

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> ProfileTask:
        """Every key checked once, here; raises ProfileError naming the key and what is accepted."""
        if not isinstance(event, Mapping):
            raise ProfileError(f"profile event must be a JSON object, got {type(event).__name__}")
        values = {}
        for f in dataclasses.fields(cls):
            if f.name not in event:
                if f.default is dataclasses.MISSING:
                    raise ProfileError(f"profile event is missing required key {f.name!r}")
                continue
            values[f.name] = _checked(f.name, event[f.name], str(f.type))
        task = cls(**values)
        for name in ("local_batch", "iterations", "memory_mb"):
            if getattr(task, name) < 1:
                raise ProfileError(f"profile event key {name!r} = {getattr(task, name)!r}: "
                                   "expected an integer >= 1")  # fmt: skip
        try:
            parse_spec(task.model)
        except ModelError as err:
            raise ProfileError(f"profile event key 'model': {err}") from None
        return task


def _checked(name: str, value: Any, type_name: str) -> Any:
    """`value` as the field's type; bools are never numbers."""
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "float": isinstance(value, int | float) and not isinstance(value, bool) and value >= 0,
    }[type_name]
    if not ok:
        accepted = {"str": "a string", "int": "an integer >= 0", "float": "a number >= 0"}
        raise ProfileError(f"profile event key {name!r} = {value!r}: expected "
                           f"{accepted[type_name]}")  # fmt: skip
    return float(value) if type_name == "float" else value


def lambda_arch() -> str:
    """The architecture as the profiles name it (Linux says aarch64)."""
    return platform.machine().replace("aarch64", "arm64")


def peak_rss_mb() -> float:
    """This process's largest resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class ShardStep:
    """The worker's own compute step (functions/worker.py `compute_step`) on a loaded shard."""

    flat: models.FlatModel
    loss_fn: models.LossFn
    x: Any
    y: Any
    seed: int
    local_batch: int
    warmup: int
    iterations: int
    safety_margin_s: float

    def run(self, iteration: int) -> None:
        idx = datasets.batch_indices(self.seed, 0, iteration, self.local_batch, len(self.x))
        xb, yb = torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])
        self.flat.zero_grad()
        self.loss_fn(self.flat.model(xb), yb).backward()
        self.flat.sync_grads()


def time_steps(step: ShardStep, context: Any) -> list[float]:
    """Seconds of each timed step; stops early (never before one) when the invocation runs out."""
    for iteration in range(step.warmup):
        step.run(iteration)
    step_s: list[float] = []
    for iteration in range(step.warmup, step.warmup + step.iterations):
        left_s = remaining_s(context)
        reserve_s = step.safety_margin_s + next_iteration_estimate_s(step_s)
        if step_s and left_s is not None and left_s < reserve_s:
            break
        t0 = time.perf_counter()
        step.run(iteration)
        step_s.append(time.perf_counter() - t0)
    return step_s


def run_profile(task: ProfileTask, context: Any = None) -> dict[str, Any]:
    """One memory size: load shard 0, build the model, time the step; the measured figures."""
    t_start = time.perf_counter()
    torch.set_num_threads(torch_threads(task.memory_mb))
    s3 = s3_client()
    manifest = datasets.read_manifest(s3, task.dataset_bucket, task.dataset_prefix)
    x, y = datasets.load_shard(s3, task.dataset_bucket, task.dataset_prefix, 0, manifest,
                               task.ephemeral_storage_mb)  # fmt: skip
    t_loaded = time.perf_counter()
    model = models.build(task.model, manifest["input_shape"], manifest["classes"], task.seed)
    step = ShardStep(models.flat_parameters(model), models.loss_function(task.model), x, y,
                     task.seed, task.local_batch,
                     task.warmup_iterations, task.iterations, task.safety_margin_s)  # fmt: skip
    build_s = time.perf_counter() - t_loaded
    step_s = time_steps(step, context)
    return {
        "memory_mb": task.memory_mb,
        "arch": lambda_arch(),
        "samples_per_s": len(step_s) * task.local_batch / sum(step_s),
        "iterations": len(step_s),
        "import_s": IMPORT_S,
        "load_s": t_loaded - t_start,
        "build_s": build_s,
        "peak_rss_mb": peak_rss_mb(),
        "torch_threads": torch.get_num_threads(),
    }


def check_memory(task: ProfileTask, context: Any) -> None:
    """The event's size must be the function's own: a point keyed by the wrong size misleads the
    planner silently (no context, as in tests and the emulator: nothing to check against)."""
    actual_mb = getattr(context, "memory_limit_in_mb", None)
    if actual_mb is not None and int(actual_mb) != task.memory_mb:
        raise ProfileError(
            f"profile event key 'memory_mb' = {task.memory_mb}: this function has {actual_mb} MB;"
            " send each size's event to its own function"
        )


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (CMD functions.profile_task.handler), one function per memory size."""
    task = ProfileTask.from_event(event)
    check_memory(task, context)
    with naming_s3_failures():
        return run_profile(task, context)


# -- the profile document ------------------------------------------------------------------------
def memory_for_rss_mb(rss_mb: float) -> int:
    """The memory a peak resident set of `rss_mb` needs: a fifth more, in 64 MB steps, ≥ 128."""
    return max(128, math.ceil(rss_mb * RSS_HEADROOM / MEMORY_STEP_MB) * MEMORY_STEP_MB)


def min_memory_mb(measured: list[Mapping[str, Any]], failed_mb: list[int]) -> int:
    """The smallest memory that trains: the largest peak resident set with headroom, in 64 MB
    steps; never below the smallest working size when a size below it failed (e.g. out of
    memory)."""
    need_mb = memory_for_rss_mb(max(float(m["peak_rss_mb"]) for m in measured))
    smallest_ok_mb = min(int(m["memory_mb"]) for m in measured)
    if any(f < smallest_ok_mb for f in failed_mb):
        need_mb = max(need_mb, smallest_ok_mb)
    return need_mb


def startup_s(measured: list[Mapping[str, Any]]) -> float:
    """Import + shard load + model build of the run nearest one vCPU (each invocation is cold)."""
    run = min(measured, key=lambda m: abs(int(m["memory_mb"]) - VCPU_MEMORY_MB))
    return float(run["import_s"]) + float(run["load_s"]) + float(run["build_s"])


def profile_document(base: Mapping[str, Any], results: list[Mapping[str, Any]], *, name: str,
                     iterations: int, warmup: int, when: str) -> dict[str, Any]:  # fmt: skip
    """`base` with training_rate[arch] (points by memory_mb), startup_s and min_memory_mb replaced
    by the measurements in `results` (one `{"memory_mb", "measured" | "error"}` per size)."""
    measured = [r["measured"] for r in results if "measured" in r]
    failed = {int(r["memory_mb"]): r.get("error", {}) for r in results if "measured" not in r}
    if not measured:
        raise ProfileError(f"no memory size was profiled; failures: {json.dumps(failed)}")
    archs = {m["arch"] for m in measured}
    if len(archs) != 1:
        raise ProfileError(f"profiled functions ran on several architectures: {sorted(archs)}")
    (arch,) = archs
    out: dict[str, Any] = json.loads(json.dumps(dict(base)))  # a deep copy
    out["name"] = name
    # Three decimals: a large model at a small size trains well under one sample per second.
    points = sorted((int(m["memory_mb"]), round(float(m["samples_per_s"]), 3)) for m in measured)
    out.setdefault("training_rate", {})[arch] = {
        "points": [{"memory_mb": mb, "samples_per_s": rate} for mb, rate in points]}  # fmt: skip
    out["startup_s"] = round(startup_s(measured), 2)
    out["min_memory_mb"] = min_memory_mb(measured, list(failed))
    sizes = ", ".join(f"{mb} MB" for mb, _ in points)
    failures = "".join(f"; failed at {mb} MB: {error.get('Error', 'unknown error')}"
                       for mb, error in sorted(failed.items()))  # fmt: skip
    where = f"measured in AWS Lambda ({arch}): functions.profile_task, one cold function per size"
    methods = {
        "training_rate": f"{where}; forward+backward at local batch "
        f"{base.get('profiled_local_batch')}, {iterations} timed iterations after {warmup} "
        f"warm-up, at {sizes}; torch threads = max(1, floor(memory/1769)){failures}",
        "startup_s": f"{where}; import torch + shard load from S3 + model build at the size "
        "nearest 1,769 MB; excludes Lambda's sandbox creation and image load",
        "min_memory_mb": f"{where}; largest peak RSS x {RSS_HEADROOM} in {MEMORY_STEP_MB} MB "
        f"steps{failures}",
    }
    sources = out.setdefault("sources", {})
    for field, method in methods.items():
        sources[field] = {"method": method, "date": when, "tag": "measured"}
    out["provisional"] = any(isinstance(s, dict) and s.get("tag") == "est"
                             for s in sources.values())  # fmt: skip
    return out


FINALIZE_KEYS = ("base_profile", "name", "artifacts_bucket", "profile_key", "results",
                 "iterations", "warmup_iterations")  # fmt: skip


def finalize_handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (CMD functions.profile_task.finalize_handler): write the profile."""
    missing = [key for key in FINALIZE_KEYS if key not in event]
    if missing:
        raise ProfileError(f"profile finalize event is missing keys {missing}; expected "
                           f"{', '.join(FINALIZE_KEYS)}")  # fmt: skip
    document = profile_document(
        event["base_profile"], list(event["results"]), name=str(event["name"]),
        iterations=int(event["iterations"]), warmup=int(event["warmup_iterations"]),
        when=dt.datetime.now(dt.UTC).date().isoformat(),
    )  # fmt: skip
    bucket, key = str(event["artifacts_bucket"]), str(event["profile_key"])
    with naming_s3_failures():
        s3_client().put_object(Bucket=bucket, Key=key, ContentType="application/json",
                               Body=(json.dumps(document, indent=2) + "\n").encode())  # fmt: skip
    return {"profile_uri": f"s3://{bucket}/{key}", "points": document["training_rate"]}
