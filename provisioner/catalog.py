"""Platform catalog: Lambda limits and prices, bandwidths and EC2 PS candidates, loaded from JSON.

The figures live in `catalog/<name>.json`; each carries its unit, source, date and tag
([AWS], [3rd] or [est]). This module only reads and validates them: nothing is fetched from the
network (the refresh path is documented in each catalog file's `refresh` field).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from provisioner.catalog_domains import (
    check_figure_domains,
    raw_value,
)
from provisioner.interval import PredictionInterval, interval_from

REPO_ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = REPO_ROOT / "catalog"
ARCHITECTURES = ("x86_64", "arm64")
LOCAL_CATALOG = "local"  # catalog/local.json: this machine's, written by `make calibrate`


@dataclass(frozen=True)
class PriceTier:
    """One monthly GB-second price tier; `up_to_gb_s` None means unbounded."""

    up_to_gb_s: float | None
    usd_per_gb_s: float


@dataclass(frozen=True)
class LambdaArch:
    """Price of one Lambda CPU architecture."""

    arch: str
    tiers: tuple[PriceTier, ...]

    @property
    def usd_per_gb_s(self) -> float:
        """Tier-1 price: one training job stays far below the first monthly tier (6 B GB-s)."""
        return self.tiers[0].usd_per_gb_s


@dataclass(frozen=True)
class PsType:
    """An EC2 instance type that can host one parameter-server shard."""

    name: str
    arch: str
    vcpu: int
    memory_gib: float
    baseline_gbps: float  # sustained bandwidth; the run is sized on this, not the burst peak
    peak_gbps: float
    usd_per_hour: float
    burst_s: float = 0.0  # seconds a fresh instance runs at peak (network I/O credits); 0 = none

    @property
    def baseline_mb_s(self) -> float:
        return gbps_to_mb_s(self.baseline_gbps)

    @property
    def burst_mb_s(self) -> float:
        """Bandwidth while credits last: the peak, never below the baseline (no burst: baseline)."""
        return gbps_to_mb_s(
            max(self.peak_gbps, self.baseline_gbps) if self.burst_s > 0 else self.baseline_gbps
        )


@dataclass(frozen=True)
class Catalog:
    """Everything the model needs to know about the platform, with units in the names."""

    name: str
    memory_min_mb: int
    memory_max_mb: int
    memory_step_mb: int
    mb_per_vcpu: float
    max_vcpu: float
    invocation_timeout_s: int
    ephemeral_min_mb: int
    ephemeral_max_mb: int
    ephemeral_free_mb: int
    ephemeral_usd_per_gb_s: float
    usd_per_request: float
    concurrency_limit: int
    unreserved_concurrency_min: int
    restart_s: float
    safety_margin_s: float
    architectures: tuple[LambdaArch, ...]
    function_ps_mb_s: float
    function_ps_rtt_s: float
    s3_mb_s_per_memory_mb: float
    s3_mb_s_intercept: float
    s3_max_mb_s: float
    per_flow_cap_gbps: float
    ps_s3_mb_s: float
    ps_max_shards: int
    ps_min_billed_s: float
    ps_default_type: str
    ps_types: tuple[PsType, ...]
    sfn_usd_per_transition: float
    sfn_fixed_transitions: int
    sfn_transitions_per_invocation: int
    s3_usd_per_put: float
    s3_usd_per_get: float
    interface_endpoints: tuple[str, ...]  # VPC interface endpoints the stacks create
    endpoint_usd_per_hour: float  # per endpoint (one AZ), partial hours billed as full
    checkpoint_max_loss_s: float = 60.0  # policy: training a PS crash may redo
    checkpoint_max_overhead: float = 0.02  # policy: share of training periodic checkpoints take
    cpu_throttle_period_s: float = 0.0  # CPU quota period (CFS); 0 = compute back to back
    # The kernel's scheduler tick on shared cores: a step shorter than it mostly runs to its end,
    # so the wait for the cores is timed where the worker wakes next (the exchange); 0 = every
    # wait in the step (local_machine.waits_in_compute)
    scheduler_tick_s: float = 0.0
    total_vcpu: float | None = None  # cores all functions share; None = unlimited (AWS)
    # Cores the functions' init phases (imports) share: the init runs at burst CPU, outside the
    # quota that holds total_vcpu (Lambda's and the emulator's runner alike), so n cold starts
    # at once contend for the machine's cores; None = total_vcpu (or unlimited: AWS).
    init_cores: float | None = None
    # The same measured per n: (n, cores n cold starts at once effectively got), n increasing;
    # () = init_cores at every n. On 2 cores the start-ups of bench/predict took 1.0× one alone
    # at n = 2, 2.3× at n = 4 and 4.2× at n = 8 (1.74 and 1.9 cores): no one figure holds all three.
    init_cores_by_n: tuple[tuple[float, float], ...] = ()
    # Seconds one cold start's import of the worker module takes alone, the part of a start-up
    # n at once stretch (the t₁ of init_cores_by_n); None = the whole start-up stretches.
    init_import_s: float | None = None
    # Cores the workers' steps share at once: under BSP the PS, the S3 server and the
    # orchestrator wait while the workers compute, so their steps get the machine's cores, not
    # only the total_vcpu the planner lets the memories add up to; None = total_vcpu.
    compute_cores: float | None = None
    # Start-up of a re-invocation that lands on the warm environment of the previous link (no
    # imports; the shard is in /tmp); None = every link starts cold (the conservative AWS reading).
    warm_start_s: float | None = None
    # The platform's start of a fresh function environment before the handler's own clock runs
    # (the emulator: spawn, interpreter and runner start; Lambda: the runtime's init before the
    # handler module); the first link pays it with restart_s (the dispatch and the orchestrator
    # seeing the result). 0 = not measured (the AWS catalogs: image load is not sourced yet).
    launch_s: float = 0.0
    # Kernel CPU seconds per MB of fresh memory a process faults in on the local machine: the
    # first fresh_memory_warm_mb at fault_warm_s_per_mb, beyond at fault_cold_s_per_mb (a VM's
    # host backs the memory the guest did not use lately only when it is touched:
    # emulator/calibration/memory_probe.py). None = no such line (AWS: each function has its
    # own memory; a machine whose probe found none).
    fresh_memory_warm_mb: float | None = None
    fault_warm_s_per_mb: float | None = None
    fault_cold_s_per_mb: float | None = None
    # CPU seconds at one vCPU a worker spends on loading before any byte moves (S3 client,
    # manifest and shard requests, np.load); None = not measured (0).
    load_cpu_s: float | None = None
    # Share of a push+pull that is the worker's own CPU (serialising, syscalls, copies) and so is
    # held to its CPU quota like compute; 0 = the exchange waits on the wire (AWS: not measured).
    exchange_cpu_fraction: float = 0.0
    # CPU seconds a PS shard spends on one worker's push + pull (its Python, syscalls, copies;
    # the averaging is apart, ps_aggregation_mb_s_per_core). Where the shards share the
    # workers' cores (total_vcpu set: the local platform) an iteration cannot take less than
    # the CPU it needs over those cores; 0 = not measured (AWS: the PS has its own cores).
    ps_request_cpu_s: float = 0.0
    # What the deployment bills by the hour between runs (provisioner/idle.py); 0 = not known.
    ps_root_volume_gb: int = 30  # each PS instance's gp3 root volume
    ebs_usd_per_gb_month: float = 0.0
    secret_usd_per_month: float = 0.0
    # A run's set-up before any worker starts (stacks/orchestration.py): the run opens its
    # interface endpoints, then starts the PS and waits until it serves; 0 = not known.
    endpoint_ready_s: float = 0.0
    ps_start_s: float = 0.0
    # A rule of the run, not a JSON figure: the emulator's --iterations-per-invocation also ends
    # an invocation after this many iterations (0 = only the time limit does).
    max_iterations_per_invocation: int = 0
    # A rule of the run too: a link's usable time is at most this (0 = the invocation limit's),
    # so a run that re-plans is checked at link boundaries often enough (pace_checked_catalog).
    max_link_s: float = 0.0
    # The S3 gradient exchange (sync "s3"): one GET or PUT's latency, and S3 Standard storage
    # for the exchange's objects while a run lasts; 0 in catalogs made before the S3 exchange.
    s3_request_s: float = 0.0
    s3_usd_per_gb_month: float = 0.0
    # A PUT's own latency and bandwidth where they were measured apart from the GET's (the local
    # server: PUT 8.5 ms at 176 MB/s, GET 3.6 ms at 819 MB/s); None = as the GET (AWS: no
    # separate figure for a function's PUT).
    s3_put_request_s: float | None = None
    s3_put_mb_s: float | None = None
    # A PS shard's checkpoint's fixed part (its serialising, HMAC, PUT and pruning requests) where
    # it was measured as the shard writes it (the local catalog); None = one PUT's latency.
    ps_checkpoint_request_s: float | None = None
    # Share of a deadline plans hold back when the user gives no slack, on top of the interval:
    # a policy of catalogs made before the interval was measured (kept so they plan as they
    # did); a catalog whose interval was read from runs has none. 0 = none held back.
    default_slack: float = 0.0
    # Measured/predicted total ratios 90% of runs fell between (provisioner/interval.py): plans
    # meet the deadline against the upper end. The point (1, 1) where no spread was measured.
    prediction_interval: PredictionInterval = PredictionInterval()
    # CPU seconds one small S3 request costs the client (boto3's signing, HTTP and parsing, in
    # the function's process, under its quota) and the S3 server (on the local machine the
    # server shares the workers' cores): the exchange then takes at least the CPU its requests
    # need (local_s3.s3_cpu_floor_s). None = not measured (AWS: S3 is not on the functions' cores
    # and a request's CPU is small beside its latency).
    s3_request_cpu_s: float | None = None
    s3_server_cpu_s: float | None = None
    # The most memory one function may hold on the local machine, below what its cores buy
    # (provisioner/local_ceiling.py): memory_max_mb is lowered to it at load. None = no ceiling
    # beyond memory_max_mb (every AWS catalog, and a local one calibrated without a ceiling).
    memory_ceiling_mb: int | None = None

    @property
    def put_latency_s(self) -> float:
        """One S3 PUT's latency: measured apart where it was, else the GET's."""
        return self.s3_request_s if self.s3_put_request_s is None else self.s3_put_request_s

    @property
    def checkpoint_latency_s(self) -> float:
        """A PS shard checkpoint's fixed part: measured as the shard writes it where it was, else
        one PUT's latency."""
        if self.ps_checkpoint_request_s is None:
            return self.put_latency_s
        return self.ps_checkpoint_request_s

    @property
    def step_cores(self) -> float | None:
        """The cores the workers' steps share on the local machine: compute_cores where
        measured, else total_vcpu; None where every function has its own (AWS)."""
        return self.compute_cores or self.total_vcpu

    def arch(self, name: str) -> LambdaArch:
        for a in self.architectures:
            if a.arch == name:
                return a
        raise KeyError(name)

    def ps_type(self, name: str) -> PsType:
        for p in self.ps_types:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def run_setup_s(self) -> float:
        """Seconds from a run's start to its workers' start: endpoints, then the PS."""
        return (self.endpoint_ready_s if self.interface_endpoints else 0.0) + self.ps_start_s

    @property
    def memory_grid_mb(self) -> tuple[int, ...]:
        return tuple(range(self.memory_min_mb, self.memory_max_mb + 1, self.memory_step_mb))


def gbps_to_mb_s(gbps: float) -> float:
    """Gbit/s to MB/s (decimal megabytes, as bandwidth figures are quoted)."""
    return gbps * 1000.0 / 8.0


def resolve_data_path(name_or_path: str | Path, directory: Path, kind: str) -> Path:
    """A bare name means `<directory>/<name>.json`; anything with a suffix or slash is a path."""
    text = str(name_or_path)
    if text.endswith(".json") or "/" in text or "\\" in text:
        path = Path(text)
    else:
        path = directory / f"{text}.json"
    if not path.is_file() and text == LOCAL_CATALOG and kind == "catalog":
        # generated per machine and git-ignored, so a fresh checkout does not have it
        raise ValueError(
            f"catalog 'local' not found ({path} is missing): run `make calibrate` to measure"
            " this machine"
        )
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.json")))
        raise ValueError(
            f"{kind} {text!r} not found: give a name ({known}) or a path to a .json file"
        )
    return path


def read_data_json(name_or_path: str | Path, directory: Path, kind: str) -> tuple[Path, Any]:
    """Resolve a catalog or profile name and parse its JSON; bad JSON is one line, no trace."""
    path = resolve_data_path(name_or_path, directory, kind)
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{kind} {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{kind} {str(path)!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON"
        ) from None
    except OSError as exc:
        raise ValueError(f"{kind} {str(path)!r} cannot be read: {exc.strerror}") from None


def _figure(section: dict[str, Any], key: str, where: str) -> Any:
    """The value of a figure: a non-negative number or a list of names."""
    value = raw_value(section, key, where)
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return value  # a list of names (e.g. endpoint services) with the same provenance fields
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ValueError(
            f"catalog {where}.{key}: value {value!r} is not a non-negative number"
            " or a list of names"
        )
    return value


def _points_figure(
    section: dict[str, Any], key: str, where: str
) -> tuple[tuple[float, float], ...]:
    """A figure whose value is a list of [x, y] pairs of positive numbers, x increasing (a
    measured curve); absent means ()."""
    if key not in section:
        return ()
    value = raw_value(section, key, where)
    points = curve_points(value)
    if points is None:
        raise ValueError(
            f"catalog {where}.{key}: value {value!r} is not a list of [x, y] pairs of positive"
            " numbers with x increasing, e.g. [[2, 2.0], [4, 1.74]]"
        )
    return points


def curve_points(value: Any) -> tuple[tuple[float, float], ...] | None:
    """`value` as a measured curve's points if it is a non-empty list of [x, y] pairs of
    finite positive numbers, x increasing; None otherwise (JSON's Infinity is no measurement)."""

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf

    pairs = value if isinstance(value, list) else []
    ok = bool(pairs) and all(
        isinstance(p, list) and len(p) == 2 and all(number(v) for v in p) for p in pairs
    )
    if not ok or any(a[0] >= b[0] for a, b in zip(pairs, pairs[1:], strict=False)):
        return None
    return tuple((float(x), float(y)) for x, y in pairs)


def _optional_figure(section: dict[str, Any], key: str, where: str, default: float) -> float:
    """A figure that older catalogs do not have: absent means `default`, present is checked."""
    return float(_figure(section, key, where)) if key in section else default


def _interval_figure(orch: dict[str, Any], name: str) -> PredictionInterval:
    """orchestration.prediction_interval; absent (no spread measured) means the point."""
    key = "prediction_interval"
    if key not in orch:
        return PredictionInterval()
    value = raw_value(orch, key, "orchestration")
    where = f"catalog {name}: orchestration.{key}"
    return interval_from(value, where, str(orch[key]["source"]))


def _arch(name: str, data: dict[str, Any]) -> LambdaArch:
    if name not in ARCHITECTURES:
        raise ValueError(
            f"catalog architecture {name!r}: expected one of {', '.join(ARCHITECTURES)}"
        )
    tiers = tuple(
        PriceTier(up_to_gb_s=t["up_to_gb_s"], usd_per_gb_s=float(t["usd_per_gb_s"]))
        for t in data["gb_s_price_tiers"]
    )
    if not tiers or tiers[-1].up_to_gb_s is not None:
        raise ValueError(f"catalog architecture {name!r}: the last price tier must be unbounded")
    return LambdaArch(arch=name, tiers=tiers)


def _ps(data: dict[str, Any]) -> PsType:
    where = f"parameter_servers.{data.get('name', '?')}"
    arch = data.get("arch")
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"catalog {where}: arch {arch!r}, expected one of {', '.join(ARCHITECTURES)}"
        )
    return PsType(
        name=str(data["name"]),
        arch=str(arch),
        vcpu=int(_figure(data, "vcpu", where)),
        memory_gib=float(_figure(data, "memory_gib", where)),
        baseline_gbps=float(_figure(data, "baseline_gbps", where)),
        peak_gbps=float(_figure(data, "peak_gbps", where)),
        usd_per_hour=float(_figure(data, "usd_per_hour", where)),
        burst_s=_optional_figure(data, "burst_s", where, 0.0),
    )


def catalog_from_dict(data: dict[str, Any]) -> Catalog:
    """Build and validate a Catalog from the parsed JSON document."""
    check_figure_domains(data)
    lam, net = data["lambda"], data["network"]
    ps, orch = data["parameter_servers"], data["orchestration"]

    def lf(key: str) -> Any:
        return _figure(lam, key, "lambda")

    def nf(key: str) -> Any:
        return _figure(net, key, "network")

    def of(key: str) -> Any:
        return _figure(orch, key, "orchestration")

    fresh = _fresh_memory_figures(str(data["name"]), lam, lf)
    cat = Catalog(
        name=str(data["name"]),
        memory_min_mb=int(lf("memory_min_mb")),
        memory_max_mb=int(lf("memory_max_mb")),
        memory_step_mb=int(lf("memory_step_mb")),
        mb_per_vcpu=float(lf("mb_per_vcpu")),
        max_vcpu=float(lf("max_vcpu")),
        invocation_timeout_s=int(lf("invocation_timeout_s")),
        ephemeral_min_mb=int(lf("ephemeral_min_mb")),
        ephemeral_max_mb=int(lf("ephemeral_max_mb")),
        ephemeral_free_mb=int(lf("ephemeral_free_mb")),
        ephemeral_usd_per_gb_s=float(lf("ephemeral_usd_per_gb_s")),
        usd_per_request=float(lf("usd_per_request")),
        concurrency_limit=int(lf("concurrency_limit")),
        unreserved_concurrency_min=int(lf("unreserved_concurrency_min")),
        restart_s=float(lf("restart_s")),
        safety_margin_s=float(lf("safety_margin_s")),
        architectures=tuple(_arch(k, v) for k, v in sorted(lam["architectures"].items())),
        function_ps_mb_s=float(nf("function_ps_mb_s")),
        function_ps_rtt_s=float(nf("function_ps_rtt_s")),
        s3_mb_s_per_memory_mb=float(nf("s3_mb_s_per_memory_mb")),
        s3_mb_s_intercept=float(nf("s3_mb_s_intercept")),
        s3_max_mb_s=float(nf("s3_max_mb_s")),
        per_flow_cap_gbps=float(nf("per_flow_cap_gbps")),
        ps_s3_mb_s=float(nf("ps_s3_mb_s")),
        ps_max_shards=int(_figure(ps, "max_shards", "parameter_servers")),
        ps_min_billed_s=float(_figure(ps, "min_billed_s", "parameter_servers")),
        ps_default_type=str(ps["default_type"]),
        ps_types=tuple(_ps(p) for p in ps["candidates"]),
        sfn_usd_per_transition=float(of("step_functions_usd_per_transition")),
        sfn_fixed_transitions=int(of("step_functions_fixed_transitions")),
        sfn_transitions_per_invocation=int(of("step_functions_transitions_per_invocation")),
        s3_usd_per_put=float(of("s3_usd_per_put")),
        s3_usd_per_get=float(of("s3_usd_per_get")),
        interface_endpoints=tuple(str(s) for s in nf("vpc_interface_endpoints")),
        endpoint_usd_per_hour=float(nf("vpc_endpoint_usd_per_hour")),
        checkpoint_max_loss_s=float(of("checkpoint_max_loss_s")),
        checkpoint_max_overhead=float(of("checkpoint_max_overhead")),
        cpu_throttle_period_s=_optional_figure(lam, "cpu_throttle_period_s", "lambda", 0.0),
        scheduler_tick_s=_optional_figure(lam, "scheduler_tick_s", "lambda", 0.0),
        total_vcpu=float(lf("total_vcpu")) if "total_vcpu" in lam else None,
        warm_start_s=float(lf("warm_start_s")) if "warm_start_s" in lam else None,
        launch_s=_optional_figure(lam, "launch_s", "lambda", 0.0),
        init_cores=float(lf("init_cores")) if "init_cores" in lam else None,
        init_cores_by_n=_points_figure(lam, "init_cores_by_n", "lambda"),
        init_import_s=float(lf("init_import_s")) if "init_import_s" in lam else None,
        compute_cores=float(lf("compute_cores")) if "compute_cores" in lam else None,
        load_cpu_s=float(lf("load_cpu_s")) if "load_cpu_s" in lam else None,
        fresh_memory_warm_mb=fresh[0],
        fault_warm_s_per_mb=fresh[1],
        fault_cold_s_per_mb=fresh[2],
        exchange_cpu_fraction=_optional_figure(net, "exchange_cpu_fraction", "network", 0.0),
        ps_request_cpu_s=_optional_figure(net, "ps_request_cpu_s", "network", 0.0),
        ps_root_volume_gb=int(_optional_figure(ps, "root_volume_gb", "parameter_servers", 30)),
        ebs_usd_per_gb_month=_optional_figure(
            ps, "ebs_gp3_usd_per_gb_month", "parameter_servers", 0.0
        ),
        secret_usd_per_month=_optional_figure(orch, "secret_usd_per_month", "orchestration", 0.0),
        endpoint_ready_s=_optional_figure(net, "vpc_endpoint_ready_s", "network", 0.0),
        ps_start_s=_optional_figure(ps, "start_s", "parameter_servers", 0.0),
        s3_request_s=_optional_figure(net, "s3_request_s", "network", 0.0),
        s3_put_request_s=float(nf("s3_put_request_s")) if "s3_put_request_s" in net else None,
        ps_checkpoint_request_s=(
            float(nf("ps_checkpoint_request_s")) if "ps_checkpoint_request_s" in net else None
        ),
        s3_put_mb_s=float(nf("s3_put_mb_s")) if "s3_put_mb_s" in net else None,
        s3_usd_per_gb_month=_optional_figure(orch, "s3_usd_per_gb_month", "orchestration", 0.0),
        default_slack=_optional_figure(orch, "default_slack", "orchestration", 0.0),
        prediction_interval=_interval_figure(orch, str(data["name"])),
        s3_request_cpu_s=float(nf("s3_request_cpu_s")) if "s3_request_cpu_s" in net else None,
        s3_server_cpu_s=float(nf("s3_server_cpu_s")) if "s3_server_cpu_s" in net else None,
    )
    if "memory_ceiling_mb" in lam:  # a function holds no more than the ceiling
        ceiling = int(lf("memory_ceiling_mb"))
        if not cat.memory_min_mb <= ceiling:
            raise ValueError(
                f"catalog {cat.name}: lambda.memory_ceiling_mb {ceiling} is below "
                f"memory_min_mb {cat.memory_min_mb}"
            )
        top = min(cat.memory_max_mb, ceiling)
        top -= (top - cat.memory_min_mb) % cat.memory_step_mb
        cat = replace(cat, memory_max_mb=top, memory_ceiling_mb=ceiling)
    _validate(cat)
    return cat


def _fresh_memory_figures(
    name: str, lam: dict[str, Any], lf: Any
) -> tuple[float | None, float | None, float | None]:
    """The fresh-memory line's three figures: all of them, or none (a line needs its size and
    the cost on each side)."""
    keys = ("fresh_memory_warm_mb", "fault_warm_s_per_mb", "fault_cold_s_per_mb")
    present = [k for k in keys if k in lam]
    if present and len(present) < len(keys):
        missing = ", ".join(k for k in keys if k not in lam)
        raise ValueError(
            f"catalog {name}: lambda.{present[0]} is given without {missing}: give all three "
            "or none"
        )
    if not present:
        return None, None, None
    warm_mb, warm_s_per_mb, cold_s_per_mb = (float(lf(k)) for k in keys)
    return warm_mb, warm_s_per_mb, cold_s_per_mb


def _validate(cat: Catalog) -> None:
    """The figures against each other (each figure alone: CATALOG_DOMAINS)."""
    if not cat.memory_min_mb <= cat.memory_max_mb:
        raise ValueError(
            f"catalog {cat.name}: memory range {cat.memory_min_mb}..{cat.memory_max_mb} "
            f"step {cat.memory_step_mb} MB is not a valid range"
        )
    if (cat.memory_max_mb - cat.memory_min_mb) % cat.memory_step_mb:
        raise ValueError(f"catalog {cat.name}: memory_max_mb is not on the memory step grid")
    if cat.invocation_timeout_s <= cat.safety_margin_s:
        raise ValueError(f"catalog {cat.name}: invocation timeout must exceed the safety margin")
    if not cat.ps_types or cat.ps_default_type not in {p.name for p in cat.ps_types}:
        raise ValueError(f"catalog {cat.name}: default PS type must be one of the candidates")
    if not cat.architectures:
        raise ValueError(f"catalog {cat.name}: needs at least one architecture")


def load_catalog(name_or_path: str | Path) -> Catalog:
    """Load `catalog/<name>.json` (or a path) into a validated Catalog."""
    path, data = read_data_json(name_or_path, CATALOG_DIR, "catalog")
    try:
        return catalog_from_dict(data)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"catalog {str(path)!r}: missing or malformed entry {exc}") from None
