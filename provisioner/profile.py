"""Workload profiles: the measured facts about one model + dataset, loaded from JSON.

A profile is written by hand or by a profiler and committed under `profiles/`; the schema is
documented in `profiles/README.md`. `load_profile` validates every field and reports the first
bad one in a single line naming the field, the value and what is accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from functions.model_spec import ModelError, is_digest, parse_spec
from provisioner.blocks_profile import BlockProfile, parse_blocks
from provisioner.catalog import ARCHITECTURES, REPO_ROOT, read_data_json
from provisioner.domain import (
    MAX_CORES,
    MAX_MB_S,
    MAX_MEMORY_MB,
    MAX_SECONDS,
    Domain,
    non_negative,
    positive,
    share,
    whole,
)
from provisioner.parse import parse_data_name
from provisioner.rate_curve import RateCurve as RateCurve  # callers import it from here too

PROFILE_DIR = REPO_ROOT / "profiles"
_SECONDS, _ITERATIONS = non_negative(MAX_SECONDS), non_negative(1e6)
# Every numeric field's domain (a point's field: "<list>.<field>"); the bounds are far above any
# workload this project sizes and keep products of fields well inside a float.
PROFILE_DOMAINS: dict[str, Domain] = {
    "model_bytes": whole(1, 1e12),  # a TB of parameters: beyond any function's memory
    "dataset_samples": whole(1, 1e12),
    "dataset_bytes": whole(1, 1e15),
    "epochs": whole(1, 1e6),
    "profiled_local_batch": whole(1, 1e6),
    "max_global_batch": whole(1, 1e9),
    "min_memory_mb": whole(1, MAX_MEMORY_MB),
    "learning_rate": positive(1000.0),
    # SGD momentum: at 1 or above the velocity never decays and training diverges
    "momentum": share(of_one_open=True),
    "startup_s": _SECONDS,
    "ps_aggregation_mb_s_per_core": positive(MAX_MB_S),
    "checkpoint_every_iterations": whole(1, 1e9),
    "warmup_iterations": _ITERATIONS,
    "parallel_speed_ratio": positive(1.0),  # sharing the cores never speeds a worker up
    "parallel_processes": whole(1, MAX_CORES),
    "crowded_step_ratio": Domain(1.0, 1000.0),  # a crowd never makes a step cheaper
    "crowded_processes": whole(1, MAX_CORES),
    "crowded_warmup_iterations": _ITERATIONS,
    "lockstep_wait_fraction": non_negative(100.0),
    "resident_mb": non_negative(MAX_MEMORY_MB),
    "first_step_mb": non_negative(MAX_MEMORY_MB),
    "vcpu_share": positive(MAX_CORES),
    "memory_mb": positive(MAX_MEMORY_MB),
    "samples_per_s": positive(1e9),
    "alpha1_samples_s_per_mb": non_negative(1e6),
    "beta1_samples_s": Domain(-1e9, 1e9),  # the fit's intercept: either sign
    "loop_extra_cpu_s.cpu_s": _SECONDS,
    "loop_overhead_s.s": _SECONDS,
}
DATASETS = ("digits", "synthetic-cifar", "cifar10", "synthetic-tokens")
DATASET_FORMS = (
    f"{', '.join(DATASETS)}, a dataset path relative to the project folder, or s3://bucket/prefix"
)
SCHEMA_VERSION = 1
# The input each dataset gives the model (channels, height, width), as functions/datasets.py
# writes it: a model profiled on one shape is neither built nor timed for another.
INPUT_SHAPES = {
    "digits": (1, 8, 8),
    "synthetic-cifar": (3, 32, 32),
    "cifar10": (3, 32, 32),
    "synthetic-tokens": (256,),  # token ids (functions.datasets.synthetic_tokens)
}


@dataclass(frozen=True)
class WorkloadProfile:
    """The workload facts the performance model consumes (units in the names)."""

    name: str
    model: str  # a model spec (functions/model_spec.py): a zoo name or path/to/file.py:function
    dataset: str  # a generated dataset's name, or the path / s3:// prefix the profile read
    model_bytes: int
    dataset_samples: int
    dataset_bytes: int
    epochs: int
    profiled_local_batch: int  # b_l^f
    max_global_batch: int  # b_g^max
    min_memory_mb: int
    learning_rate: float
    momentum: float
    rates: tuple[RateCurve, ...]
    startup_s: float  # cold start: image, import torch, model build
    ps_aggregation_mb_s_per_core: float
    checkpoint_every_iterations: int | None = None
    # A fresh process's first steps run slower (allocator, kernels' first calls): the excess,
    # in steady steps, paid once per cold process at the one-vCPU step time.
    warmup_iterations: float = 0.0
    # Shared cores only (the local platform): one worker's speed while `parallel_processes`
    # train at once, relative to alone (caches, memory bandwidth); None = 1.
    parallel_speed_ratio: float | None = None
    parallel_processes: int = 1
    # Shared cores only: CPU seconds an iteration of the worker's loop spends beyond its
    # back-to-back step (the exchange's own CPU and what interleaving it costs the step), as
    # (vCPU share, seconds) points measured through a loopback PS; () = not measured.
    loop_extra_cpu: tuple[tuple[float, float], ...] = ()
    # Shared cores only: wall seconds the exchange of the same loop, one worker alone, takes an
    # iteration, timed around it as a run's workers time their communication (the exchange as
    # it runs on loopback: the worker's and the shard's CPU on the critical path), as (vCPU
    # share, seconds) points; () = not measured. (Older profiles held the loop's wall less
    # the back-to-back step's here: a noisier reading of the same time.)
    loop_overhead: tuple[tuple[float, float], ...] = ()
    # Shared cores only: a step's CPU in the BSP loop while `crowded_processes` workers and one
    # PS shard, more processes than cores, take turns on them, over its CPU alone (each turn
    # starts on caches another process filled: the digits MLP's 0.6 ms step took 1.1-1.5 ms of
    # CPU with 4 and 8 workers on 2 cores); None = 1.
    crowded_step_ratio: float | None = None
    crowded_processes: int = 1
    # Shared cores only: a fresh process's excess CPU over its first steps while
    # `crowded_processes` workers take them at once, in steps of the one-vCPU step alone (a
    # first step faults its memory in, and the kernel's share of that grows with the crowd:
    # MobileNetV2's first step spent 0.5 s in the kernel alone, 1.1 s in 4, 1.7 s in 8 on 2
    # cores); None = the warm-up alone (warmup_iterations) at any n.
    crowded_warmup_iterations: float | None = None
    # Shared cores only: what the slowest rank of an iteration makes the others wait, as a
    # fraction of the step: in a BSP loop of one worker per core, the mean over the iterations
    # of the slowest rank's step less the straggler's, over the straggler's mean step (steps of
    # equal work vary, and every rank waits for each iteration's slowest); None = 0.
    lockstep_wait_fraction: float | None = None
    # Shared cores only: MB a worker's process holds before its first step, less the dataset
    # (runtime and model), and MB of fresh memory that step faults in at profiled_local_batch;
    # a crowd's first steps past the machine's fresh-memory line cost more kernel CPU
    # (local_warmup.fresh_memory_excess_cpu_s). None = not measured (no such cost counted).
    resident_mb: float | None = None
    first_step_mb: float | None = None
    provisional: bool = False
    sources: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    model_digest: str = ""  # sha256 of the model file when profiled ("" = not recorded)
    input_shape: tuple[int, ...] | None = None  # a user dataset's input, as the profiler read it
    # Pipelining only (provisioner/blocks_profile.py): the model's blocks in order and a worker's
    # memory before the model; () and None where the profile declares none.
    blocks: tuple[BlockProfile, ...] = ()
    runtime_memory_mb: int | None = None

    def rate(self, arch: str) -> RateCurve | None:
        for r in self.rates:
            if r.arch == arch:
                return r
        return None

    @property
    def architectures(self) -> tuple[str, ...]:
        return tuple(r.arch for r in self.rates)


def _num(data: dict[str, Any], key: str, domain: str = "") -> Any:
    """The field `key` of `data` within its PROFILE_DOMAINS entry (`domain`, else `key`): an int
    where the domain is whole, else a float."""
    if key not in data:
        raise ValueError(f"profile: missing field {key!r}")
    allowed = PROFILE_DOMAINS[domain or key]
    value = allowed.check(data[key], f"profile field {key!r}")
    return int(value) if allowed.whole else value


def _model(data: dict[str, Any]) -> str:
    value = data.get("model")
    try:
        parse_spec(value if isinstance(value, str) else repr(value))
    except ModelError as err:
        raise ValueError(f"profile field 'model': {err}") from None
    return str(value)


def is_dataset_path(text: str) -> bool:
    """A user dataset: s3://bucket/prefix, or a path relative to the project (no '..')."""
    if text.startswith("s3://"):
        return len(text) > len("s3://")
    parts = Path(text).parts
    return bool(parts) and not Path(text).is_absolute() and ".." not in parts and ":" not in text


def dataset_problem(dataset: str) -> str | None:
    """Why a dataset path names no data in the project folder (None: it does, or it is not a
    path: a generated dataset or an s3:// prefix, which the prepare step reads)."""
    if dataset in DATASETS or dataset.startswith("s3://"):
        return None
    location = dataset.partition("#")[0]
    if (REPO_ROOT / location).exists():
        return None
    return (
        f"dataset {dataset!r} does not exist in the project folder; give an existing folder or "
        f"file relative to it, or {', '.join(DATASETS)} or s3://bucket/prefix"
    )


def _dataset(data: dict[str, Any]) -> str:
    value = data.get("dataset")
    if isinstance(value, str) and (value in DATASETS or is_dataset_path(value)):
        return value
    raise ValueError(f"profile field 'dataset': {value!r} is not accepted; use {DATASET_FORMS}")


def _input_shape(data: dict[str, Any]) -> tuple[int, ...] | None:
    value = data.get("input_shape")
    if value is None:
        return None
    ok = isinstance(value, list) and value and all(
        isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value
    )  # fmt: skip
    if not ok:
        raise ValueError(
            f"profile field 'input_shape': {value!r} is not a list of positive integers"
        )
    return tuple(value)


def _rate(arch: str, data: Any) -> RateCurve:
    where = f"training_rate.{arch}"
    if arch not in ARCHITECTURES:
        raise ValueError(f"profile {where}: architecture {arch!r} is not one of x86_64, arm64")
    if isinstance(data, dict) and "linear" in data:
        lin = data["linear"]
        alpha = _num(lin, "alpha1_samples_s_per_mb")
        beta = _num(lin, "beta1_samples_s")
        return RateCurve(arch=arch, alpha1_samples_s_per_mb=alpha, beta1_samples_s=beta)
    if not isinstance(data, dict) or not isinstance(data.get("points"), list) or not data["points"]:
        raise ValueError(
            f"profile {where}: expected {{'points': [{{'vcpu_share', 'samples_per_s'}}, ...]}} "
            f"or {{'linear': {{'alpha1_samples_s_per_mb', 'beta1_samples_s'}}}}"
        )
    first = data["points"][0]
    key = "memory_mb" if isinstance(first, dict) and "memory_mb" in first else "vcpu_share"
    points = sorted((_num(p, key), _num(p, "samples_per_s")) for p in data["points"])
    xs = tuple(p[0] for p in points)
    if len(set(xs)) != len(xs):
        raise ValueError(f"profile {where}: duplicate {key} in points {list(xs)}")
    rates = tuple(p[1] for p in points)
    if key == "memory_mb":
        return RateCurve(arch=arch, memory_points_mb=xs, samples_per_s=rates)
    return RateCurve(arch=arch, vcpu_shares=xs, samples_per_s=rates)


def _share_points(data: dict[str, Any], key: str, unit: str) -> tuple[tuple[float, float], ...]:
    """A figure per vCPU share: [{"vcpu_share": s, unit: value}, ...], sorted by share."""
    raw = data.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        raise ValueError(f"profile field {key!r}: expected a list of {{'vcpu_share', {unit!r}}}")
    points = sorted((_num(p, "vcpu_share"), _num(p, unit, f"{key}.{unit}")) for p in raw)
    if len({s for s, _ in points}) != len(points):
        raise ValueError(f"profile field {key!r}: duplicate vcpu_share")
    return tuple(points)


def profile_from_dict(data: dict[str, Any]) -> WorkloadProfile:
    """Validate a parsed profile document and build the WorkloadProfile."""
    if not isinstance(data, dict):
        raise ValueError("profile: expected a JSON object at the top level")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"profile field 'schema_version': {version!r} is not {SCHEMA_VERSION}")
    try:  # plans and run reports name the profile, and the emulator loads profiles/<name>.json
        name = parse_data_name(data.get("name"), "profile")
    except ValueError as exc:
        raise ValueError(f"profile field 'name': {exc}") from None
    rates_data = data.get("training_rate")
    if not isinstance(rates_data, dict) or not rates_data:
        raise ValueError("profile field 'training_rate': expected an object keyed by x86_64/arm64")
    every = data.get("checkpoint_every_iterations")
    sources = data.get("sources", {})
    if not isinstance(sources, dict):
        raise ValueError("profile field 'sources': expected an object of field -> description")
    profile = WorkloadProfile(
        name=name,
        model=_model(data),
        dataset=_dataset(data),
        model_bytes=_num(data, "model_bytes"),
        dataset_samples=_num(data, "dataset_samples"),
        dataset_bytes=_num(data, "dataset_bytes"),
        epochs=_num(data, "epochs"),
        profiled_local_batch=_num(data, "profiled_local_batch"),
        max_global_batch=_num(data, "max_global_batch"),
        min_memory_mb=_num(data, "min_memory_mb"),
        learning_rate=_num(data, "learning_rate"),
        momentum=_num(data, "momentum"),
        rates=tuple(_rate(a, r) for a, r in sorted(rates_data.items())),
        startup_s=_num(data, "startup_s"),
        ps_aggregation_mb_s_per_core=_num(data, "ps_aggregation_mb_s_per_core"),
        checkpoint_every_iterations=(
            None if every is None else _num(data, "checkpoint_every_iterations")
        ),
        warmup_iterations=(_num(data, "warmup_iterations") if "warmup_iterations" in data else 0.0),
        parallel_speed_ratio=(
            _num(data, "parallel_speed_ratio") if "parallel_speed_ratio" in data else None
        ),
        parallel_processes=(
            _num(data, "parallel_processes") if "parallel_processes" in data else 1
        ),
        loop_extra_cpu=_share_points(data, "loop_extra_cpu_s", "cpu_s"),
        loop_overhead=_share_points(data, "loop_overhead_s", "s"),
        crowded_step_ratio=(
            _num(data, "crowded_step_ratio") if "crowded_step_ratio" in data else None
        ),
        crowded_processes=(_num(data, "crowded_processes") if "crowded_processes" in data else 1),
        crowded_warmup_iterations=(
            _num(data, "crowded_warmup_iterations") if "crowded_warmup_iterations" in data else None
        ),
        lockstep_wait_fraction=(
            _num(data, "lockstep_wait_fraction") if "lockstep_wait_fraction" in data else None
        ),
        resident_mb=_num(data, "resident_mb") if "resident_mb" in data else None,
        first_step_mb=_num(data, "first_step_mb") if "first_step_mb" in data else None,
        provisional=bool(data.get("provisional", False)),
        sources=tuple(sorted((str(k), json.dumps(v, sort_keys=True)) for k, v in sources.items())),
        model_digest=str(data.get("model_digest", "")),
        input_shape=_input_shape(data),
    )
    blocks, runtime_mb = parse_blocks(data, profile.model_bytes, profile.architectures, _rate)
    if blocks:
        profile = replace(profile, blocks=blocks, runtime_memory_mb=runtime_mb)
    if profile.model_digest and not is_digest(profile.model_digest):
        raise ValueError(
            f"profile field 'model_digest': {profile.model_digest!r} is not sha256: and 64 hex "
            "digits"
        )
    ratio = profile.parallel_speed_ratio
    if ratio is not None and profile.parallel_processes < 2:
        raise ValueError(
            f"profile field 'parallel_speed_ratio': {ratio!r} needs to be at most 1, measured "
            f"with parallel_processes ≥ 2 (got {profile.parallel_processes})"
        )
    crowded = profile.crowded_step_ratio
    if crowded is not None and profile.crowded_processes < 2:
        raise ValueError(
            f"profile field 'crowded_step_ratio': {crowded!r} needs to be at least 1, measured "
            f"with crowded_processes ≥ 2 (got {profile.crowded_processes})"
        )
    if profile.lockstep_wait_fraction is not None and profile.parallel_processes < 2:
        raise ValueError(
            f"profile field 'lockstep_wait_fraction': {profile.lockstep_wait_fraction!r} needs "
            f"parallel_processes ≥ 2, the ranks it was measured with (got "
            f"{profile.parallel_processes})"
        )
    if profile.crowded_warmup_iterations is not None and profile.crowded_processes < 2:
        raise ValueError(
            f"profile field 'crowded_warmup_iterations': {profile.crowded_warmup_iterations!r} "
            f"needs crowded_processes ≥ 2 (got {profile.crowded_processes})"
        )
    if profile.profiled_local_batch > profile.max_global_batch:
        raise ValueError(
            f"profile field 'profiled_local_batch': {profile.profiled_local_batch} exceeds "
            f"max_global_batch {profile.max_global_batch}"
        )
    return profile


def check_dataset(profile: WorkloadProfile, dataset: str, spec: str) -> None:
    """ValueError unless `dataset` (written `spec`) has the input shape the profile was made on."""
    given = INPUT_SHAPES.get(dataset)
    profiled = INPUT_SHAPES.get(profile.dataset, profile.input_shape)
    if profiled is not None and given != profiled:
        shape = "×".join(map(str, given)) if given else "unknown"
        raise ValueError(
            f"dataset {spec!r} gives {shape} inputs but workload {profile.name!r} was profiled "
            f"on {profile.dataset} ({'×'.join(map(str, profiled))}); use a dataset of that "
            "shape or a workload profiled on this one"
        )


def load_profile(name_or_path: str | Path) -> WorkloadProfile:
    """Load `profiles/<name>.json` (or a path) into a validated WorkloadProfile."""
    _, data = read_data_json(name_or_path, PROFILE_DIR, "profile")
    profile = profile_from_dict(data)
    if (problem := dataset_problem(profile.dataset)) is not None:
        raise ValueError(f"profile field 'dataset': {problem}")
    return profile
