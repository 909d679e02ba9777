"""The worker event (docs/CONTRACTS.md) parsed once, at the boundary, into a frozen WorkerTask.

The next invocation's event is derived with `dataclasses.replace`, never re-spelled. Keys this
module does not know are kept in `extra` and passed on unchanged, so an orchestrator may add its
own bookkeeping keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from functions import wire
from functions.runs import parse_run, run_checkpoint_prefix

SYNC_MODES = ("ps", "s3")  # the same modes as a plan's `sync` (provisioner/plan.py)


class TaskError(ValueError):
    """A worker event with a missing or badly typed key; the message is one line."""


@dataclass(frozen=True)
class StageTask:
    """A pipelined plan's stage (docs/CONTRACTS.md, "Pipeline stage"): blocks
    [first_block, stop_block) of the model, stage `index` of `count`, M micro-batches per
    iteration, activations and their gradients through S3 objects under `boundary_prefix`."""

    index: int
    count: int
    first_block: int
    stop_block: int
    micro_batches: int
    boundary_prefix: str

    @classmethod
    def from_event(cls, value: Any) -> StageTask:
        """The event's `stage` object; TaskError naming the bad member and what is accepted."""
        names = [f.name for f in dataclasses.fields(cls)]
        expected = f"an object with keys {', '.join(names)}"
        if not isinstance(value, Mapping) or not value:
            raise TaskError(f"worker event key 'stage' = {value!r}: expected {expected}")
        unknown = sorted(set(value) - set(names))
        missing = [n for n in names if n not in value]
        if unknown or missing:
            what = f"has unknown members {unknown}" if unknown else f"lacks members {missing}"
            raise TaskError(f"worker event key 'stage' {what}: expected {expected}")
        stage = cls(**{f.name: _convert(f"stage.{f.name}", value[f.name], f.type)
                       for f in dataclasses.fields(cls)})  # fmt: skip
        stage.validate()
        return stage

    def validate(self) -> None:
        checks = [
            (self.count >= 2, "count", self.count, "an integer >= 2 (one stage: no 'stage' key)"),
            (0 <= self.index < self.count, "index", self.index, f"0..{self.count - 1}"),
            (self.first_block >= 0, "first_block", self.first_block, "an integer >= 0"),
            (
                self.stop_block > self.first_block,
                "stop_block",
                self.stop_block,
                f"an integer > first_block ({self.first_block})",
            ),
            (self.micro_batches >= 1, "micro_batches", self.micro_batches, "an integer >= 1"),
            (
                bool(self.boundary_prefix.strip("/")),
                "boundary_prefix",
                self.boundary_prefix,
                "a non-empty S3 key prefix",
            ),
        ]
        for ok, name, value, accepted in checks:
            if not ok:
                raise TaskError(f"worker event key 'stage.{name}' = {value!r}: expected {accepted}")

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.count - 1


@dataclass(frozen=True)
class WorkerTask:
    """One worker invocation's instructions."""

    job_id: str
    rank: int
    n_workers: int
    model: str
    dataset_bucket: str
    dataset_prefix: str
    artifacts_bucket: str
    checkpoint_prefix: str
    ps_endpoints: tuple[str, ...]
    secret_ref: str
    local_batch: int
    iterations: int
    learning_rate: float
    momentum: float
    memory_mb: int
    seed: int
    # The execution this event belongs to (docs/CONTRACTS.md, "Runs"): the state machine fills
    # in its name and start time; checkpoints and the PS handshake carry it.
    run_id: str
    run_started: str
    start_iteration: int = 0
    invocation: int = 0
    safety_margin_s: float = 30.0
    # Optional additions (not in the original contract; defaults keep old events valid).
    ephemeral_storage_mb: int = 512  # the function's /tmp size, to check a shard fits
    ps_timeout_s: float = 300.0  # deadline on any single PS wait (a PULL waits for all workers)
    # End the invocation after this many iterations (0 = only the time limit ends it): lets the
    # emulator and tests take the checkpoint-and-re-invoke path at a chosen iteration, whatever
    # the machine's speed.
    iterations_per_invocation: int = 0
    # Gradient exchange: "ps" through ps_endpoints; "s3" through objects under
    # exchange_prefix in the artifacts bucket, where ranks 0..reducers-1 each reduce one of
    # `reducers` partitions (ps_endpoints and secret_ref are then unused and may be empty).
    sync: str = "ps"
    reducers: int = 1
    exchange_prefix: str = ""
    # A pipelined plan's stage; None (and absent from the event) for a one-stage plan.
    stage: StageTask | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> WorkerTask:
        """Validate and convert; raises TaskError naming the key and what is accepted."""
        if not isinstance(event, Mapping):
            raise TaskError(f"worker event must be a JSON object, got {type(event).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in event:
                if f.default is dataclasses.MISSING:
                    raise TaskError(f"worker event is missing required key {name!r}")
                continue
            values[name] = _convert(name, event[name], f.type)
        values["extra"] = {k: v for k, v in event.items() if k not in known}
        task = cls(**values)
        task.validate()
        return task

    def validate(self) -> None:
        checks = [
            (self.n_workers >= 1, "n_workers", self.n_workers, "an integer >= 1"),
            (0 <= self.rank < self.n_workers, "rank", self.rank, f"0..{self.n_workers - 1}"),
            (self.local_batch >= 1, "local_batch", self.local_batch, "an integer >= 1"),
            (self.iterations >= 0, "iterations", self.iterations, "an integer >= 0"),
            (self.learning_rate > 0, "learning_rate", self.learning_rate, "a number > 0"),
            (0 <= self.momentum < 1, "momentum", self.momentum, "0 <= momentum < 1"),
            (self.memory_mb >= 128, "memory_mb", self.memory_mb, "an integer >= 128"),
            (self.start_iteration >= 0, "start_iteration", self.start_iteration, ">= 0"),
            (self.safety_margin_s >= 0, "safety_margin_s", self.safety_margin_s, ">= 0"),
            (
                self.iterations_per_invocation >= 0,
                "iterations_per_invocation",
                self.iterations_per_invocation,
                "an integer >= 0 (0 = no cap)",
            ),
            (self.sync in SYNC_MODES, "sync", self.sync, " or ".join(map(repr, SYNC_MODES))),
            (
                self.sync != "ps" or len(self.ps_endpoints) >= 1,
                "ps_endpoints",
                list(self.ps_endpoints),
                "a non-empty list of 'host:port' (sync 'ps')",
            ),
            (
                self.sync != "s3" or 1 <= self.reducers <= self.n_workers,
                "reducers",
                self.reducers,
                f"an integer from 1 to n_workers ({self.n_workers}) (sync 's3')",
            ),
            (
                self.sync != "s3" or bool(self.exchange_prefix.strip("/")),
                "exchange_prefix",
                self.exchange_prefix,
                "a non-empty S3 key prefix (sync 's3')",
            ),
            (bool(self.job_id), "job_id", self.job_id, "a non-empty string"),
            (
                self.stage is None or self.local_batch % self.stage.micro_batches == 0,
                "stage.micro_batches",
                self.stage and self.stage.micro_batches,
                f"a divisor of local_batch ({self.local_batch})",
            ),
        ]
        for ok, name, value, accepted in checks:
            if not ok:
                raise TaskError(f"worker event key {name!r} = {value!r}: expected {accepted}")
        for endpoint in self.ps_endpoints:
            try:
                wire.parse_endpoint(endpoint)
            except ValueError as exc:
                raise TaskError(f"worker event key 'ps_endpoints': {exc}") from None
        try:
            parse_run(self.run_id, self.run_started)
        except ValueError as exc:
            raise TaskError(f"worker event keys 'run_id'/'run_started': {exc}") from None

    @property
    def run_checkpoint_prefix(self) -> str:
        """This run's checkpoints (the PS writes them there; finalize reads them)."""
        return run_checkpoint_prefix(self.checkpoint_prefix, self.run_id)

    def to_event(self) -> dict[str, Any]:
        """The JSON event for this task (the inverse of from_event)."""
        event = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"
        }
        event["ps_endpoints"] = list(self.ps_endpoints)
        stage = event.pop("stage")
        if stage is not None:  # a one-stage event stays exactly as it was
            event["stage"] = dataclasses.asdict(stage)
        return {**dict(self.extra), **event}

    def next_task(self, iteration: int) -> WorkerTask:
        """The task for the next chain link, starting where this one stopped."""
        return dataclasses.replace(self, start_iteration=iteration, invocation=self.invocation + 1)


def _convert(name: str, value: Any, type_name: Any) -> Any:
    """Coerce one event value to its field type (bools are never accepted as numbers)."""
    type_name = str(type_name)
    if type_name == "StageTask | None":
        return StageTask.from_event(value)
    if type_name == "tuple[str, ...]":
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise TaskError(f"worker event key {name!r} = {value!r}: expected a list of strings")
        if not all(isinstance(v, str) for v in value):
            raise TaskError(f"worker event key {name!r} = {value!r}: expected a list of strings")
        return tuple(value)
    if type_name == "str":
        if not isinstance(value, str):
            raise TaskError(f"worker event key {name!r} = {value!r}: expected a string")
        return value
    if type_name == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise TaskError(f"worker event key {name!r} = {value!r}: expected an integer")
        return value
    if type_name == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TaskError(f"worker event key {name!r} = {value!r}: expected a number")
        return float(value)
    raise TaskError(f"worker event key {name!r}: unsupported field type {type_name}")
