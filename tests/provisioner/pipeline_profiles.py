"""Block profiles for the pipeline tests: a profile document with `blocks` built from figures."""

from __future__ import annotations

from typing import Any

from provisioner.profile import WorkloadProfile, profile_from_dict
from tests.provisioner.conftest import profile_dict


def block_dict(
    name: str, parameter_bytes: int, out: int, act: int, rate_at_one: float
) -> dict[str, Any]:
    """One block: its rate proportional to the vCPU share up to one vCPU (x86_64 and arm64)."""
    points = [{"vcpu_share": 0.5, "samples_per_s": rate_at_one / 2}]
    points.append({"vcpu_share": 1.0, "samples_per_s": rate_at_one})
    return {
        "name": name,
        "parameter_bytes": parameter_bytes,
        "output_bytes_per_sample": out,
        "activation_bytes_per_sample": act,
        "training_rate": {
            "x86_64": {"points": points},
            "arm64": {"points": [{**p, "samples_per_s": 0.9 * p["samples_per_s"]} for p in points]},
        },
    }


def blocks_profile_dict(blocks: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """profile_dict() with these blocks, model_bytes their sum and a 400 MB runtime."""
    total = sum(b["parameter_bytes"] for b in blocks)
    fields: dict[str, Any] = {"model_bytes": total, "blocks": blocks, "runtime_memory_mb": 400}
    return profile_dict(**{**fields, **overrides})


def blocks_profile(blocks: list[dict[str, Any]], **overrides: Any) -> WorkloadProfile:
    return profile_from_dict(blocks_profile_dict(blocks, **overrides))
