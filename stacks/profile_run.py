"""What a profiling run in AWS does, as plain data: memory sizes, events, where the profile lands.

`cdk deploy -c mode=profile` builds this from the workload profile and the context; the profile
stack, the profiling handler (functions/profile_task.py) and the tests all read the same
builders, so an event key is spelled once. Nothing here imports aws_cdk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from functions.model_spec import parse_spec

# Power Tuning's idea on λDNN's curve: below, at and above one vCPU (1,769 MB), up to 3 vCPUs.
DEFAULT_PROFILE_MEMORY_MB = (1024, 1769, 3008, 5307)
DEFAULT_PROFILE_ITERATIONS = 30  # timed iterations per memory size ("a few dozen")
WARMUP_ITERATIONS = 5  # untimed: first-call allocations and thread-pool start-up
# The rate is per sample, so one shard of at most this size is enough; it fits the default /tmp.
PROFILE_SHARD_BYTES = 256 * 2**20
PROFILE_EPHEMERAL_STORAGE_MB = 512
PROFILE_SAFETY_MARGIN_S = 10.0  # the handler stops timing this long before its limit


@dataclass(frozen=True)
class ProfileRun:
    """One profiling run: one workload, one architecture, several memory sizes."""

    job: str
    name: str  # the workload profile's name; the measured profile is `<name>-aws`
    model: str
    local_batch: int
    dataset_bytes: int
    memory_mb: tuple[int, ...]
    arch: str
    iterations: int
    base_profile_json: str  # the committed profile the measured figures replace (sorted JSON)

    @property
    def base_profile(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.base_profile_json)
        return document


def shard_count(dataset_bytes: int) -> int:
    """Shards so that one (the one profiled) fits PROFILE_SHARD_BYTES."""
    return max(1, math.ceil(dataset_bytes / PROFILE_SHARD_BYTES))


def profile_shards_prefix(run: ProfileRun) -> str:
    """Apart from the training shards (`<job>/shards-n<n>`): a profile never reads a run's data."""
    return f"{run.job}/profile-shards"


def measured_name(run: ProfileRun) -> str:
    """The measured profile's name: beside the locally measured one, never over it."""
    return f"{run.name}-aws"


def profile_key(run: ProfileRun) -> str:
    """The one object the profiling run writes to the artifacts bucket."""
    return f"{run.job}/profiles/{measured_name(run)}.json"


def prepare_event(run: ProfileRun, *, source: str, dataset_bucket: str) -> dict[str, Any]:
    """`functions.datasets.prepare_handler`'s event: the dataset cut into profile-sized shards
    (read by the model file's `read_dataset` when a user's file brings one)."""
    event = {
        "source": source,
        "n_shards": shard_count(run.dataset_bytes),
        "dataset_bucket": dataset_bucket,
        "dataset_prefix": profile_shards_prefix(run),
        "seed": 0,
    }
    if parse_spec(run.model).zoo_name is None:
        event["model"] = run.model
    return event


def profile_event(run: ProfileRun, *, memory_mb: int, dataset_bucket: str) -> dict[str, Any]:
    """What `functions.profile_task.handler` gets at one memory size (its ProfileTask)."""
    return {
        "job_id": run.job,
        "model": run.model,
        "dataset_bucket": dataset_bucket,
        "dataset_prefix": profile_shards_prefix(run),
        "local_batch": run.local_batch,
        "iterations": run.iterations,
        "warmup_iterations": WARMUP_ITERATIONS,
        "memory_mb": memory_mb,
        "seed": 0,
        "ephemeral_storage_mb": PROFILE_EPHEMERAL_STORAGE_MB,
        "safety_margin_s": PROFILE_SAFETY_MARGIN_S,
    }


def finalize_event(run: ProfileRun, *, artifacts_bucket: str) -> dict[str, Any]:
    """`functions.profile_task.finalize_handler`'s event, minus the results the run adds."""
    return {
        "base_profile": run.base_profile,
        "name": measured_name(run),
        "artifacts_bucket": artifacts_bucket,
        "profile_key": profile_key(run),
        "iterations": run.iterations,
        "warmup_iterations": WARMUP_ITERATIONS,
    }


def run_digest(run: ProfileRun) -> str:
    """sha256 of the run's configuration: deploying a changed one starts a new profiling run."""
    fields = dataclasses.asdict(run)
    del fields["base_profile_json"]  # by content, not by its JSON spelling
    fields["base_profile"] = run.base_profile
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
