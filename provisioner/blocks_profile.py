"""A profile's optional per-block figures: what a pipelined plan needs to cut the model.

`blocks` lists the model's blocks in order (functions.blocks.block_names), each with its float32
parameters, the activation it hands on per sample, what autograd keeps for its backward per
sample and its own training rate; `runtime_memory_mb` is a worker process before the model.
A profile without them loads as before and is never pipelined; profiles/README.md lists the
keys and docs/pipeline.md says how the planner uses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provisioner.domain import MAX_MEMORY_MB, Domain, non_negative, whole
from provisioner.rate_curve import RateCurve

BLOCK_DOMAINS: dict[str, Domain] = {
    "parameter_bytes": non_negative(1e12),  # an activation or pooling block has none
    "output_bytes_per_sample": whole(1, 1e10),  # every block hands something on
    "activation_bytes_per_sample": non_negative(1e10),
    "runtime_memory_mb": whole(1, MAX_MEMORY_MB),
}
BLOCK_KEYS = (
    "name",
    "parameter_bytes",
    "output_bytes_per_sample",
    "activation_bytes_per_sample",
    "training_rate",
)


@dataclass(frozen=True)
class BlockProfile:
    """One block's figures (units in the names); `rates` as the profile's own training rate."""

    name: str
    parameter_bytes: int
    output_bytes_per_sample: int
    activation_bytes_per_sample: int
    rates: tuple[RateCurve, ...]

    def rate(self, arch: str) -> RateCurve | None:
        for r in self.rates:
            if r.arch == arch:
                return r
        return None


def _whole(data: dict[str, Any], key: str, where: str) -> int:
    if key not in data:
        raise ValueError(f"profile {where}: missing field {key!r}")
    return int(BLOCK_DOMAINS[key].check(data[key], f"profile {where}.{key}"))


def parse_block(index: int, data: Any, parse_rate: Any) -> BlockProfile:
    """Block `index` of the profile's `blocks`; `parse_rate(arch, data)` reads a training rate."""
    where = f"field 'blocks[{index}]'"
    if not isinstance(data, dict):
        raise ValueError(f"profile {where}: expected an object with {', '.join(BLOCK_KEYS)}")
    unknown = sorted(set(data) - set(BLOCK_KEYS))
    if unknown:
        raise ValueError(
            f"profile {where}: {unknown[0]!r} is not a block field; use {', '.join(BLOCK_KEYS)}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"profile {where}.name: {name!r} is not a non-empty string")
    rates = data.get("training_rate")
    if not isinstance(rates, dict) or not rates:
        raise ValueError(f"profile {where}.training_rate: expected an object keyed by x86_64/arm64")
    return BlockProfile(
        name=name,
        parameter_bytes=_whole(data, "parameter_bytes", where),
        output_bytes_per_sample=_whole(data, "output_bytes_per_sample", where),
        activation_bytes_per_sample=_whole(data, "activation_bytes_per_sample", where),
        rates=tuple(parse_rate(a, r) for a, r in sorted(rates.items())),
    )


def parse_blocks(
    data: dict[str, Any], model_bytes: int, architectures: tuple[str, ...], parse_rate: Any
) -> tuple[tuple[BlockProfile, ...], int | None]:
    """(blocks, runtime_memory_mb) of a profile document; ((), None) where it declares none.

    The blocks' parameters sum to model_bytes (they are the model, cut), and every block has a
    rate for each architecture the profile is rated on (a stage on an architecture needs all
    of its blocks' rates there)."""
    raw = data.get("blocks")
    runtime = data.get("runtime_memory_mb")
    if raw is None:
        if runtime is not None:
            raise ValueError(
                "profile field 'runtime_memory_mb': given without 'blocks'; it sizes pipeline "
                "stages only: declare the blocks too, or drop it"
            )
        return (), None
    if not isinstance(raw, list) or len(raw) < 2:
        raise ValueError(
            f"profile field 'blocks': expected a list of at least 2 blocks, got {raw!r:.60}"
        )
    if runtime is None:
        raise ValueError(
            "profile field 'runtime_memory_mb': missing; a profile with blocks gives the "
            "worker's memory before the model (a whole number of MB)"
        )
    runtime_mb = int(
        BLOCK_DOMAINS["runtime_memory_mb"].check(runtime, "profile field 'runtime_memory_mb'")
    )
    blocks = tuple(parse_block(i, b, parse_rate) for i, b in enumerate(raw))
    total = sum(b.parameter_bytes for b in blocks)
    if total != model_bytes:
        raise ValueError(
            f"profile field 'blocks': parameter_bytes sum to {total}, not model_bytes "
            f"{model_bytes}; give every block's float32 parameters so they sum to the model's"
        )
    for i, block in enumerate(blocks):
        missing = [a for a in architectures if block.rate(a) is None]
        if missing:
            raise ValueError(
                f"profile field 'blocks[{i}].training_rate': no rate for {missing[0]}; give "
                f"one for every architecture the profile is rated on ({', '.join(architectures)})"
            )
    return blocks, runtime_mb
