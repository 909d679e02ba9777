"""The Plan: the planner's frozen, JSON-serialisable output.

Everything downstream (stacks, the emulator, the worker events) reads its numbers from here and
never re-derives them. Units are in the field names. A plan read back from JSON (`from_dict`) is
checked field by field first: a hand-edited plan.json fails in one line naming the field, before
the emulator starts a server or builds a path from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from functions.model_spec import ModelError, is_digest, parse_spec
from provisioner.catalog import ARCHITECTURES, CATALOG_DIR, Catalog, load_catalog
from provisioner.catalog_domains import LAMBDA_EPHEMERAL_MB, LAMBDA_MEMORY_MB, LAMBDA_TIMEOUT_S
from provisioner.parse import (
    MAX_ITERATIONS,
    MAX_SYNTHETIC_SAMPLES,
    MAX_WORKERS,
    parse_data_name,
    parse_job_name,
)
from provisioner.pipeline_plan import (
    Pipeline,
    check_pipeline_dict,
    pipeline_from_dict,
)
from provisioner.profile import DATASET_FORMS, DATASETS, dataset_problem, is_dataset_path
from provisioner.replan_spec import ReplanSpec, replan_from_dict

# (low, high) of the numbers a runnable plan holds; None is unbounded. Lambda's ranges for memory,
# timeout and /tmp; at least one of every count.
_BOUNDS: dict[str, tuple[float, float | None]] = {
    "n_workers": (1, MAX_WORKERS),
    "memory_mb": LAMBDA_MEMORY_MB,
    "ps_count": (0, None),  # 0 in an S3-sync plan (no PS); at least 1 in a PS plan
    "reducers": (0, None),  # k in an S3-sync plan (1 ≤ k ≤ n); 0 in a PS plan
    "invocation_timeout_s": (1, LAMBDA_TIMEOUT_S),
    "ephemeral_storage_mb": LAMBDA_EPHEMERAL_MB,
    "invocations_per_worker": (1, None),
    "iterations_per_invocation": (1, MAX_ITERATIONS),
    "training.dataset_samples": (1, None),
    "training.dataset_bytes": (1, None),
    "training.model_bytes": (1, None),
    "training.epochs": (1, None),
    "training.local_batch": (1, None),
    "training.global_batch": (1, None),
    "training.iterations": (1, MAX_ITERATIONS),
    "training.checkpoint_every_iterations": (1, None),
    "goal.interval_high": (1, None),
}
SYNC_MODES = ("ps", "s3")  # how workers exchange gradients: EC2 parameter servers or S3
_CHOICES: dict[str, tuple[str, ...]] = {
    "arch": ARCHITECTURES,
    "ps_arch": ARCHITECTURES,
}


@dataclass(frozen=True)
class Goal:
    """What the user asked for: a deadline, a budget, or both.

    A plan meets the deadline against the upper end of its prediction's 90% interval:
    predicted total × `interval_high` ≤ deadline × (1 − slack). `interval_high` is the
    catalog's measured spread (provisioner/interval.py; 1 where none was measured). `slack`
    keeps a further share of the deadline in reserve, the user's; None: the catalog's
    default_slack where there is a deadline (the planner resolves both: `for_catalog`).
    """

    deadline_s: float | None = None
    budget_usd: float | None = None
    slack: float | None = None
    interval_high: float = 1.0

    @property
    def planning_deadline_s(self) -> float | None:
        """The deadline a plan's point prediction is held to."""
        if self.deadline_s is None:
            return None
        return self.deadline_s * (1.0 - (self.slack or 0.0)) / self.interval_high

    @property
    def holds_back(self) -> bool:
        """Whether plans aim below the deadline itself (a slack, or a measured spread)."""
        return self.deadline_s is not None and (bool(self.slack) or self.interval_high > 1.0)

    def for_catalog(self, default_slack: float, interval_high: float) -> Goal:
        """This goal with its reserve decided where there is a deadline to hold it back from:
        the user's slack, else `default_slack`; the catalog's interval's upper end."""
        if self.deadline_s is None:
            return replace(self, slack=self.slack or 0.0, interval_high=1.0)
        slack = default_slack if self.slack is None else self.slack
        return replace(self, slack=slack, interval_high=interval_high)


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
    setup_s: float = 0.0  # the run's set-up: open its interface endpoints, start the PS
    launch_s: float = 0.0  # the first link's platform start and dispatch (launch_s + restart_s)
    # One exchange (communication + aggregation, per iteration) and, in an S3-sync plan, its
    # requests: PUT n·k + k, GET 2·n·k that find their object and the expected GETs that find
    # nothing yet (s3exchange.s3_exchange_misses; all 0 in a PS plan and in older plans).
    exchange_per_iteration_s: float = 0.0
    exchange_puts_per_iteration: int = 0
    exchange_gets_per_iteration: int = 0
    exchange_get_misses_per_iteration: float = 0.0
    # An S3 exchange's requests at its links' starts and ends, for the whole run
    # (s3exchange.s3_link_requests): PUTs, GETs, LISTs.
    exchange_link_puts: int = 0
    exchange_link_gets: int = 0
    exchange_link_lists: int = 0
    # The total's 90% interval: total_s scaled by the catalog's measured spread
    # (provisioner/interval.py); both total_s where none was measured, None in older plans.
    total_low_s: float | None = None
    total_high_s: float | None = None


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
    s3_exchange_usd: float = 0.0  # S3 sync: the exchange's requests and storage (in total_usd)


@dataclass(frozen=True)
class TrainingSpec:
    """What the runtime trains: the workload facts the planner used, made concrete."""

    model: str  # a model spec (functions/model_spec.py): a zoo name or path/to/file.py:function
    dataset: str  # the profile's: a generated dataset's name, or the path / s3:// it read
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
    model_digest: str = ""  # sha256 of the model file the profile measured ("" = not recorded)


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
    # Runaway bounds the stacks enforce (provisioner/runaway.py); 0 in plans from before them.
    max_links_per_worker: int = 0  # a worker's links; a link must also advance
    execution_timeout_s: int = 0  # the state machine's timeout
    worst_case_usd: float = 0.0  # what a run costs if it runs into these bounds
    ps_volume_gb: int = 30  # each PS instance's root volume (gp3)
    idle_usd_per_hour: float = 0.0  # what the deployment bills by the hour between runs
    # Gradient exchange: "ps" = EC2 parameter servers (ps_type × ps_count); "s3" =
    # through S3, k = `reducers` workers each reduce one of k partitions (ps_count 0, no PS).
    sync: str = "ps"
    reducers: int = 0
    # The best plan of the other mode under the same goal and limits, for comparison (a line in
    # `notes` says which mode won and by how much): its total cost and time; None if the other
    # mode cannot meet the goal or was not searched (`--sync ps|s3`).
    other_sync_usd: float | None = None
    other_sync_s: float | None = None
    # The model's cut into stages (provisioner/pipeline_plan.py); None for a one-stage plan, and
    # then absent from the JSON, so a one-stage plan serialises as it did before pipelining.
    pipeline: Pipeline | None = None
    # Re-planning during the run (provisioner/replan_spec.py): the envelope and its worst case;
    # None (and absent from the JSON) for a plan that runs as it is.
    replan: ReplanSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for optional in ("pipeline", "replan"):
            if data[optional] is None:
                del data[optional]
        if self.replan is not None:
            data["replan"] = self.replan.to_dict()
        return data

    def to_json(self) -> str:
        """Stable JSON (sorted keys) so the same plan always serialises to the same bytes."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The Plan in `data`; ValueError naming the first field that is missing or bad."""
        check_plan_dict(data)
        return cls(
            **{
                **data,
                "goal": Goal(**data["goal"]),
                "training": TrainingSpec(**data["training"]),
                "prediction": Prediction(**data["prediction"]),
                "cost": CostBreakdown(**data["cost"]),
                "notes": tuple(data.get("notes", ())),
                "interface_endpoints": tuple(data.get("interface_endpoints", ())),
                "pipeline": (
                    pipeline_from_dict(data["pipeline"]) if data.get("pipeline") else None
                ),
                "replan": replan_from_dict(data["replan"]) if data.get("replan") else None,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Read a Plan, or the `plan` member of a cdk.out/plan.json document."""
        data = json.loads(text)
        return cls.from_dict(data.get("plan", data) if isinstance(data, dict) else data)


def _type_error(value: Any, kind: str) -> str | None:
    """Why `value` is not of the annotated `kind` (a plan field's type as written), or None."""
    if value is None:
        return None if kind.endswith("| None") else "is missing (null)"
    kind = kind.removesuffix(" | None")
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind in ("int", "float"):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (kind == "float" or float(value).is_integer())
        kind = "an integer" if kind == "int" else "a finite number"
    elif kind == "str":
        ok, kind = isinstance(value, str), "a string"
    else:  # tuple[str, ...]
        ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        kind = "a list of strings"
    return None if ok else f"is not {kind}"


def _check_object(cls: type, data: Any, where: str) -> None:
    """Every field of dataclass `cls` present (unless defaulted), known and of its type."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'plan'}: expected a JSON object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in data:
        if name not in fields:
            raise ValueError(f"plan field {where + name!r} is not a plan field")
    for name, spec in fields.items():
        required = spec.default is dataclasses.MISSING
        required = required and spec.default_factory is dataclasses.MISSING
        if name not in data:
            if required:
                raise ValueError(f"plan field {where + name!r} is missing")
            continue
        nested = _NESTED.get(str(spec.type))
        if str(spec.type) == "Pipeline | None":
            if data[name] is not None:
                check_pipeline_dict(data[name])
        elif str(spec.type) == "ReplanSpec | None":
            if data[name] is not None:
                replan_from_dict(data[name])
        elif nested is not None:
            _check_object(nested, data[name], f"{where}{name}.")
        elif (why := _type_error(data[name], str(spec.type))) is not None:
            raise ValueError(f"plan field {where + name!r}: {data[name]!r} {why}")


def _at(data: dict[str, Any], dotted: str) -> Any:
    head, _, rest = dotted.partition(".")
    return _at(data[head], rest) if rest else data.get(head)


def check_plan_dict(data: Any) -> None:
    """ValueError (one line naming the field, its value and what is accepted) for a bad plan."""
    _check_object(Plan, data, "")
    for dotted, (low, high) in _BOUNDS.items():
        value = _at(data, dotted)
        if value is not None and not (low <= value and (high is None or value <= high)):
            accepted = (
                f"from {low:.0f} to {high:.0f}" if high is not None else f"at least {low:.0f}"
            )
            raise ValueError(f"plan field {dotted!r}: {value!r} is out of range; use {accepted}")
    for dotted, choices in _CHOICES.items():
        if (value := _at(data, dotted)) not in choices:
            raise ValueError(f"plan field {dotted!r}: {value!r} is not one of {', '.join(choices)}")
    training = data["training"]
    try:
        parse_spec(str(training["model"]))
    except ModelError as err:
        raise ValueError(f"plan field 'training.model': {err}") from None
    dataset = training["dataset"]
    if dataset not in DATASETS and not is_dataset_path(dataset):
        raise ValueError(
            f"plan field 'training.dataset': {dataset!r} is not accepted; use {DATASET_FORMS}"
        )
    if training.get("model_digest") and not is_digest(training["model_digest"]):
        raise ValueError(
            f"plan field 'training.model_digest': {training['model_digest']!r} is not sha256: "
            "and 64 hex digits"
        )
    samples, synthetic = training["dataset_samples"], training["dataset"] == "synthetic-cifar"
    if synthetic and samples > MAX_SYNTHETIC_SAMPLES:
        raise ValueError(
            f"plan field 'training.dataset_samples': {samples!r} synthetic samples is out of "
            f"range; use from 1 to {MAX_SYNTHETIC_SAMPLES}"
        )
    if not 0 <= training["momentum"] < 1:
        momentum = training["momentum"]
        raise ValueError(f"plan field 'training.momentum': {momentum!r} is not in [0, 1)")
    if not training["learning_rate"] > 0:
        raise ValueError(
            f"plan field 'training.learning_rate': {training['learning_rate']!r} is not positive"
        )
    _check_sync(data)
    # the emulator builds paths from these three: runs/<job>, catalog/<name>, profiles/<name>
    for key, kind in (("job", ""), ("catalog", "catalog"), ("workload", "profile")):
        try:
            parse_data_name(data[key], kind) if kind else parse_job_name(data[key])
        except ValueError as exc:
            raise ValueError(f"plan field {key!r}: {exc}") from None


def _check_sync(data: dict[str, Any]) -> None:
    """A PS plan has PS shards and no reducers; an S3 plan has 1 ≤ reducers ≤ n and no PS."""
    sync, n = data.get("sync", "ps"), data["n_workers"]
    if sync not in SYNC_MODES:
        raise ValueError(f"plan field 'sync': {sync!r} is not one of {', '.join(SYNC_MODES)}")
    reducers, ps_count = data.get("reducers", 0), data["ps_count"]
    if sync == "ps" and (ps_count < 1 or reducers != 0):
        raise ValueError(
            f"plan fields 'ps_count', 'reducers': {ps_count!r}, {reducers!r} do not fit sync 'ps';"
            " use ps_count at least 1 and reducers 0"
        )
    if sync == "s3" and (ps_count != 0 or not 1 <= reducers <= n):
        raise ValueError(
            f"plan fields 'ps_count', 'reducers': {ps_count!r}, {reducers!r} do not fit sync 's3';"
            f" use ps_count 0 and reducers from 1 to n_workers ({n})"
        )


_NESTED: dict[str, type] = {
    "Goal": Goal,
    "TrainingSpec": TrainingSpec,
    "Prediction": Prediction,
    "CostBreakdown": CostBreakdown,
}


def _batches(plan: Plan) -> str | None:
    """λDNN's global batch: b_g = n × b_l."""
    t = plan.training
    if t.global_batch == plan.n_workers * t.local_batch:
        return None
    return (
        f"plan fields 'n_workers', 'training.local_batch', 'training.global_batch': "
        f"{plan.n_workers} × {t.local_batch} is not {t.global_batch}; the global batch is "
        "n_workers × local_batch (plan again for another n)"
    )


def _iterations(plan: Plan) -> str | None:
    """λDNN's iteration count, k = ⌈n_t·e / b_g⌉, bounds the plan's: a plan may stop early (a
    short trial of the same job), never train past its epochs."""
    t = plan.training
    k = -(-(t.dataset_samples * t.epochs) // t.global_batch)
    if t.iterations <= k:
        return None
    return (
        f"plan field 'training.iterations': {t.iterations} trains more than {t.epochs} "
        f"epoch(s) of {t.dataset_samples} samples in global batches of {t.global_batch}; "
        f"use at most {k}"
    )


def _shards(plan: Plan) -> str | None:
    """Every worker trains on a shard of at least one sample."""
    t = plan.training
    if plan.n_workers <= t.dataset_samples:
        return None
    return (
        f"plan fields 'n_workers', 'training.dataset_samples': {plan.n_workers} workers for "
        f"{t.dataset_samples} samples; use at most one worker per sample"
    )


def _links(plan: Plan) -> str | None:
    """The chain of invocations covers the iterations, within its runaway bound."""
    covered = plan.invocations_per_worker * plan.iterations_per_invocation
    bound = plan.max_links_per_worker
    if covered >= plan.training.iterations and not (bound and plan.invocations_per_worker > bound):
        return None
    return (
        f"plan fields 'invocations_per_worker', 'iterations_per_invocation': "
        f"{plan.invocations_per_worker} × {plan.iterations_per_invocation} do not fit "
        f"{plan.training.iterations} iterations; use links that cover them, at most "
        f"max_links_per_worker ({bound or 'unbounded'})"
    )


def _interval(plan: Plan) -> str | None:
    """The total's 90% interval holds the total (older plans record none)."""
    p = plan.prediction
    if p.total_low_s is None and p.total_high_s is None:
        return None
    low, high = p.total_low_s, p.total_high_s
    if low is not None and high is not None and 0 < low <= p.total_s <= high:
        return None
    return (
        f"plan fields 'prediction.total_low_s', 'prediction.total_high_s': {p.total_low_s!r}, "
        f"{p.total_high_s!r} do not hold the total {p.total_s!r}; use 0 < low ≤ total ≤ high"
    )


def _dataset(plan: Plan) -> str | None:
    """A dataset path names data that is there to upload."""
    problem = dataset_problem(plan.training.dataset)
    return None if problem is None else f"plan field 'training.dataset': {problem}"


def _catalog_limits(plan: Plan, catalog: Catalog) -> str | None:
    """What the plan sets is within what its catalog's platform allows."""
    limits = [
        ("memory_mb", plan.memory_mb, catalog.memory_min_mb, catalog.memory_max_mb),
        ("invocation_timeout_s", plan.invocation_timeout_s, 1, catalog.invocation_timeout_s),
        ("ephemeral_storage_mb", plan.ephemeral_storage_mb, catalog.ephemeral_min_mb,
         catalog.ephemeral_max_mb),
        ("ps_count", plan.ps_count, 0, catalog.ps_max_shards),
    ]  # fmt: skip
    for name, value, low, high in limits:
        if not low <= value <= high:
            return (
                f"plan field {name!r}: {value} is outside catalog {catalog.name}'s limits; "
                f"use from {low} to {high}"
            )
    known = [p.name for p in catalog.ps_types]
    if plan.sync == "ps" and plan.ps_type not in known:
        return (
            f"plan field 'ps_type': {plan.ps_type!r} is not in catalog {catalog.name}; use one "
            f"of {', '.join(known)}"
        )
    archs = [a.arch for a in catalog.architectures]
    if plan.arch not in archs:
        return f"plan field 'arch': {plan.arch!r} is not in catalog {catalog.name}; use {archs}"
    return None


# The figures of a plan against each other, as the planner derives them; each rule is one small
# function returning why the plan makes no sense, or None.
SENSE_RULES = (_batches, _shards, _iterations, _links, _interval, _dataset)


def check_plan_sense(plan: Plan, catalog: Catalog | None) -> None:
    """ValueError (one line) unless the plan's figures agree with each other (SENSE_RULES) and,
    where its catalog is at hand, with the catalog's limits: before any server starts."""
    for rule in SENSE_RULES:
        if (why := rule(plan)) is not None:
            raise ValueError(why)
    if catalog is not None and (why := _catalog_limits(plan, catalog)) is not None:
        raise ValueError(why)


def plan_catalog(plan: Plan) -> Catalog | None:
    """The catalog the plan was made on, if it is in catalog/ (a plan from a catalog given by
    path, or made on another machine's `local`, is checked without it)."""
    if not (CATALOG_DIR / f"{plan.catalog}.json").is_file():
        return None
    return load_catalog(plan.catalog)


def load_plan(path: Path) -> Plan:
    """The Plan in a cdk.out/plan.json (or a bare Plan JSON); ValueError with one line if bad:
    a field of the wrong type or range, or figures that do not fit each other or the catalog."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(
            f"cannot read plan {str(path)!r}: {err.strerror}; run `npx cdk synth` first"
        ) from None
    try:
        plan = Plan.from_json(raw.decode("utf-8"))
        check_plan_sense(plan, plan_catalog(plan))
        return plan
    except UnicodeDecodeError:
        raise ValueError(
            f"{str(path)!r} is not a plan.json written by app.py (not UTF-8)"
        ) from None
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{str(path)!r} is not a plan.json written by app.py (not JSON: {err})"
        ) from None
    except ValueError as err:  # Plan.from_dict names the first missing or bad field
        raise ValueError(f"{str(path)!r} is not a plan.json written by app.py: {err}") from None
