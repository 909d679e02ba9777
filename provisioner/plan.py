"""The Plan: the planner's frozen, JSON-serialisable output.

Everything downstream (stacks, the emulator, the worker events) reads its numbers from here and
never re-derives them. Units are in the field names.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Goal:
    """What the user asked for: a deadline, a budget, or both.

    `slack` keeps a share of the deadline in reserve for what the model does not see (a busy
    host, a slow cold start): plans must meet deadline × (1 − slack).
    """

    deadline_s: float | None = None
    budget_usd: float | None = None
    slack: float = 0.0

    @property
    def planning_deadline_s(self) -> float | None:
        """The deadline plans are held to."""
        return None if self.deadline_s is None else self.deadline_s * (1.0 - self.slack)


@dataclass(frozen=True)
class Prediction:
    """Predicted wall-clock time, term by term (λDNN Eq. 1 plus this project's extensions)."""

    load_s: float  # dataset shard from S3 into each function (λDNN t_load)
    compute_s: float  # k × t_comp
    communication_s: float  # k × t_comm (push gradients + pull parameters)
    ps_aggregation_s: float  # k × PS-side averaging/update time
    startup_s: float  # cold start of the first link (image load, import torch, model build)
    chaining_s: float  # extra links: checkpoint + restart + start-up per re-invocation
    total_s: float
    iteration_s: float  # one BSP iteration: compute + communication + aggregation + checkpoints
    compute_per_iteration_s: float
    communication_per_iteration_s: float
    ps_bandwidth_mb_s: float  # B_p(n): the per-function share of PS bandwidth actually used
    s3_bandwidth_mb_s: float  # B_s(m)
    checkpoint_s: float = 0.0  # periodic PS checkpoints: k × their share of an iteration


@dataclass(frozen=True)
class CostBreakdown:
    """Predicted cost in USD, item by item, summing to total_usd."""

    lambda_compute_usd: float  # GB-seconds of the workers (λDNN Eq. 10)
    lambda_requests_usd: float
    ephemeral_storage_usd: float  # /tmp above the free 512 MB
    ps_instances_usd: float  # EC2 PS shards for the whole run (60 s minimum)
    step_functions_usd: float
    s3_requests_usd: float  # checkpoints and dataset reads
    total_usd: float
    vpc_endpoints_usd: float = 0.0  # interface endpoints of the PS network (in total_usd)


@dataclass(frozen=True)
class TrainingSpec:
    """What the runtime trains: the workload facts the planner used, made concrete."""

    model: str  # a key of the model zoo in functions/
    dataset: str  # dataset name from the profile (e.g. "digits", "synthetic-cifar")
    dataset_samples: int
    dataset_bytes: int
    model_bytes: int
    epochs: int
    local_batch: int  # b_l, per worker per iteration
    global_batch: int  # b_g = n × b_l
    iterations: int  # k = ceil(n_t × e / b_g)
    learning_rate: float
    momentum: float
    checkpoint_every_iterations: int


@dataclass(frozen=True)
class Plan:
    """One chosen configuration with its prediction; the single input of the stacks."""

    job: str
    workload: str  # profile name
    catalog: str  # catalog name
    goal: Goal
    n_workers: int
    memory_mb: int
    arch: str  # "x86_64" | "arm64"
    vcpu_share: float  # memory_mb / 1769 capped by the catalog's max vCPUs
    ps_type: str  # EC2 instance type of each PS shard
    ps_count: int  # number of PS shards (the flattened parameters are split evenly)
    ps_arch: str  # "x86_64" | "arm64" (the PS instance's AMI architecture)
    invocation_timeout_s: int  # the Lambda timeout set on the function
    ephemeral_storage_mb: int  # /tmp size set on the function
    invocations_per_worker: int  # chain links: ceil(T_worker / usable invocation time)
    iterations_per_invocation: int
    reserve_concurrency: bool
    training: TrainingSpec
    prediction: Prediction
    cost: CostBreakdown
    notes: tuple[str, ...] = field(default_factory=tuple)  # why this plan (one line each)
    interface_endpoints: tuple[str, ...] = ()  # VPC interface endpoints the stacks create

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """Stable JSON (sorted keys) so the same plan always serialises to the same bytes."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            **{
                **data,
                "goal": Goal(**data["goal"]),
                "training": TrainingSpec(**data["training"]),
                "prediction": Prediction(**data["prediction"]),
                "cost": CostBreakdown(**data["cost"]),
                "notes": tuple(data.get("notes", ())),
                "interface_endpoints": tuple(data.get("interface_endpoints", ())),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Read a Plan, or the `plan` member of a cdk.out/plan.json document."""
        data = json.loads(text)
        return cls.from_dict(data.get("plan", data))
