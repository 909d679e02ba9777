"""The domain of every numeric figure of a platform catalog, checked once per figure at load.

A figure is `{"value", "unit", "source", "date", "tag"}`; CATALOG_DOMAINS names each figure by
its place in the file and says which values make sense (provisioner/domain.py). Figures checked
against each other stay with the catalog (provisioner/catalog.py).
"""

from __future__ import annotations

from typing import Any

from provisioner.domain import (
    MAX_CORES,
    MAX_COUNT,
    MAX_GBPS,
    MAX_MB_S,
    MAX_MEMORY_MB,
    MAX_SECONDS,
    MAX_USD,
    Domain,
    non_negative,
    positive,
    share,
    whole,
)
from provisioner.parse import MAX_SLACK

LAMBDA_TIMEOUT_S = 900  # Lambda's hard limit, which the plan and the emulator hold to
LAMBDA_EPHEMERAL_MB = (512, 10240)  # Lambda's /tmp range, which the plan holds to
LAMBDA_MEMORY_MB = (128, 10240)  # Lambda's configurable memory range (1 MB steps)

_SECONDS, _PRICE = non_negative(MAX_SECONDS), non_negative(MAX_USD)
_CORES, _MB_S = positive(MAX_CORES), positive(MAX_MB_S)
# Every numeric figure's domain, by its place in the catalog file ("candidates" is each PS type,
# "architectures" each price tier). A figure an older catalog lacks is checked when present.
CATALOG_DOMAINS: dict[str, Domain] = {
    "lambda.memory_min_mb": whole(1, MAX_MEMORY_MB),
    "lambda.memory_max_mb": whole(1, MAX_MEMORY_MB),
    "lambda.memory_step_mb": whole(1, MAX_MEMORY_MB),
    "lambda.memory_ceiling_mb": whole(1, MAX_MEMORY_MB),
    "lambda.mb_per_vcpu": positive(MAX_MEMORY_MB),
    "lambda.max_vcpu": _CORES,
    "lambda.total_vcpu": _CORES,
    "lambda.init_cores": _CORES,
    "lambda.compute_cores": _CORES,
    "lambda.cpu_throttle_period_s": non_negative(1.0),  # the CFS period: at most a second
    "lambda.invocation_timeout_s": whole(1, LAMBDA_TIMEOUT_S),
    "lambda.ephemeral_min_mb": whole(*LAMBDA_EPHEMERAL_MB),
    "lambda.ephemeral_max_mb": whole(*LAMBDA_EPHEMERAL_MB),
    "lambda.ephemeral_free_mb": whole(0, LAMBDA_EPHEMERAL_MB[1]),
    "lambda.ephemeral_usd_per_gb_s": _PRICE,
    "lambda.usd_per_request": _PRICE,
    "lambda.concurrency_limit": whole(1, MAX_COUNT),
    "lambda.unreserved_concurrency_min": whole(0, MAX_COUNT),
    "lambda.restart_s": _SECONDS,
    "lambda.safety_margin_s": non_negative(LAMBDA_TIMEOUT_S),
    "lambda.warm_start_s": _SECONDS,
    "lambda.launch_s": _SECONDS,
    "lambda.load_cpu_s": _SECONDS,
    "lambda.fresh_memory_warm_mb": positive(1e9),
    "lambda.fault_warm_s_per_mb": _SECONDS,
    "lambda.fault_cold_s_per_mb": _SECONDS,
    "lambda.architectures.up_to_gb_s": positive(1e18),  # null: the last, unbounded tier
    "lambda.architectures.usd_per_gb_s": _PRICE,
    "network.function_ps_mb_s": _MB_S,
    "network.function_ps_rtt_s": _SECONDS,
    "network.s3_mb_s_per_memory_mb": non_negative(MAX_MB_S),
    "network.s3_mb_s_intercept": _MB_S,
    "network.s3_max_mb_s": _MB_S,
    "network.s3_request_s": _SECONDS,
    "network.s3_put_request_s": _SECONDS,
    "network.s3_put_mb_s": _MB_S,
    "network.ps_checkpoint_request_s": _SECONDS,
    "network.per_flow_cap_gbps": positive(MAX_GBPS),
    "network.ps_s3_mb_s": _MB_S,
    "network.exchange_cpu_fraction": share(),
    "network.ps_request_cpu_s": _SECONDS,
    "network.vpc_endpoint_usd_per_hour": _PRICE,
    "network.vpc_endpoint_ready_s": _SECONDS,
    "parameter_servers.max_shards": whole(1, 1024),
    "parameter_servers.min_billed_s": _SECONDS,
    "parameter_servers.start_s": _SECONDS,
    "parameter_servers.root_volume_gb": whole(1, 16384),  # gp3's largest volume
    "parameter_servers.ebs_gp3_usd_per_gb_month": _PRICE,
    "parameter_servers.candidates.vcpu": whole(1, MAX_CORES),
    "parameter_servers.candidates.memory_gib": positive(MAX_MEMORY_MB / 1024),
    "parameter_servers.candidates.baseline_gbps": positive(MAX_GBPS),
    "parameter_servers.candidates.peak_gbps": positive(MAX_GBPS),
    "parameter_servers.candidates.usd_per_hour": _PRICE,
    "parameter_servers.candidates.burst_s": _SECONDS,
    "orchestration.step_functions_usd_per_transition": _PRICE,
    "orchestration.step_functions_fixed_transitions": whole(0, MAX_COUNT),
    "orchestration.step_functions_transitions_per_invocation": whole(0, MAX_COUNT),
    "orchestration.s3_usd_per_put": _PRICE,
    "orchestration.s3_usd_per_get": _PRICE,
    "orchestration.s3_usd_per_gb_month": _PRICE,
    "orchestration.secret_usd_per_month": _PRICE,
    "orchestration.checkpoint_max_loss_s": positive(MAX_SECONDS),
    "orchestration.checkpoint_max_overhead": Domain(0.0, 1.0, low_open=True, high_open=True),
    "orchestration.default_slack": Domain(0.0, MAX_SLACK, high_open=True),
    "network.s3_request_cpu_s": _SECONDS,
    "network.s3_server_cpu_s": _SECONDS,
}


def raw_value(section: dict[str, Any], key: str, where: str) -> Any:
    """The unchecked value of a figure `{"value", "unit", "source", "date", "tag"}`; all five are
    required."""
    if key not in section:
        raise ValueError(f"catalog {where}: missing figure {key!r}")
    fig = section[key]
    if not isinstance(fig, dict) or "value" not in fig:
        raise ValueError(f"catalog {where}.{key}: expected an object with a 'value'")
    for meta in ("unit", "source", "date", "tag"):
        if meta not in fig:
            raise ValueError(f"catalog {where}.{key}: missing {meta!r} (every figure needs it)")
    return fig["value"]


def _domain_places(data: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """(where, value) of every present figure at CATALOG_DOMAINS' `path`."""
    section, _, key = path.partition(".")
    node = data.get(section)
    if not isinstance(node, dict):
        return []
    if key.startswith("candidates."):
        key = key.removeprefix("candidates.")
        ps_types = node.get("candidates")
        return [
            (f"{section}.{p.get('name', '?')}.{key}", raw_value(p, key, section))
            for p in (ps_types if isinstance(ps_types, list) else [])
            if isinstance(p, dict) and key in p
        ]
    if key.startswith("architectures."):
        key = key.removeprefix("architectures.")
        archs = node.get("architectures")
        return [
            (f"{section}.architectures.{arch}.gb_s_price_tiers[{i}].{key}", tier[key])
            for arch, spec in (archs.items() if isinstance(archs, dict) else [])
            for i, tier in enumerate(
                spec.get("gb_s_price_tiers", []) if isinstance(spec, dict) else []
            )
            if isinstance(tier, dict) and tier.get(key) is not None
        ]
    return [(f"{section}.{key}", raw_value(node, key, section))] if key in node else []


def check_figure_domains(data: dict[str, Any]) -> None:
    """ValueError, one line, naming the first figure outside its domain (CATALOG_DOMAINS)."""
    name = data.get("name", "?")
    for path, domain in CATALOG_DOMAINS.items():
        for where, value in _domain_places(data, path):
            domain.check(value, f"catalog {name}: {where}")
