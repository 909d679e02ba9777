"""The local machine's function memory ceiling: the most memory one emulated function may hold.

On AWS a function holds up to the platform's 10,240 MB; on the local machine the catalog's
`memory_max_mb` is what the workers' cores buy (total_vcpu × 1,769 MB), not a memory limit, so
a small model always fits one function there. A ceiling (the local catalog's
`lambda.memory_ceiling_mb`, or `python -m provisioner plan --memory-ceiling MB`) lowers the most
a function holds, so a model above it is cut into pipeline stages locally ("does-not-fit") and
`make test` runs partitioning end to end on a model that trains in seconds.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from provisioner import local_machine
from provisioner.catalog import Catalog
from provisioner.pipeline_model import stage_memory_needed_mb
from provisioner.profile import WorkloadProfile


def parse_ceiling_mb(text: str) -> int:
    """`--memory-ceiling`: a whole number of MB above 0; ValueError naming the text."""
    value = text.strip().removesuffix("MB").strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"bad --memory-ceiling {text!r}: expected a whole number of MB above 0, e.g. 320"
        )
    return int(value)


def with_memory_ceiling(catalog: Catalog, ceiling_mb: int) -> Catalog:
    """`catalog` whose functions hold at most `ceiling_mb` (its memory_max_mb lowered to the
    grid point at or below it); ValueError, one line, unless the catalog is the local machine's
    (shared cores) and the ceiling within its function memories."""
    if not local_machine.applies(catalog):
        raise ValueError(
            f"bad --memory-ceiling {ceiling_mb}: a memory ceiling applies to the local machine's "
            f"catalog only (catalog/local.json, `make calibrate`); catalog {catalog.name} is a "
            f"platform's, whose functions hold up to {catalog.memory_max_mb} MB (limit the "
            "search there with --max-memory-mb)"
        )
    if not catalog.memory_min_mb <= ceiling_mb <= catalog.memory_max_mb:
        raise ValueError(
            f"bad --memory-ceiling {ceiling_mb}: expected MB from {catalog.memory_min_mb} to "
            f"{catalog.memory_max_mb} (catalog {catalog.name}'s function memories)"
        )
    on_grid = ceiling_mb - (ceiling_mb - catalog.memory_min_mb) % catalog.memory_step_mb
    return replace(catalog, memory_max_mb=on_grid, memory_ceiling_mb=ceiling_mb)


def largest_block_need_mb(profile: WorkloadProfile) -> tuple[str, int]:
    """(name, MB) of the block whose stage alone needs most, at the least any plan asks of it:
    one sample a micro-batch and a local batch of one (pipeline_model.stage_memory_needed_mb).
    No stage holding that block fits a function below it, whatever the plan."""
    outs = [b.output_bytes_per_sample for b in profile.blocks]
    needs = [
        int(
            stage_memory_needed_mb(
                profile.runtime_memory_mb or 0, b.parameter_bytes, b.activation_bytes_per_sample,
                (outs[i - 1] if i > 0 else 0) + (outs[i] if i < len(outs) - 1 else 0), 1, 1,
            )
        )
        for i, b in enumerate(profile.blocks)
    ]  # fmt: skip
    top = int(np.argmax(needs))
    return profile.blocks[top].name, needs[top]


def check_blocks_fit(profile: WorkloadProfile, catalog: Catalog) -> None:
    """ValueError, one line, where the catalog's memory ceiling is below what the profile's
    largest block needs alone: no cut into stages fits such a function."""
    ceiling = catalog.memory_ceiling_mb
    if ceiling is None or not profile.blocks:
        return
    name, need = largest_block_need_mb(profile)
    if need > catalog.memory_max_mb:
        raise ValueError(
            f"bad memory ceiling {ceiling} MB: block {name!r} of workload {profile.name} needs "
            f"{need} MB alone (the runtime's {profile.runtime_memory_mb} MB and the block); "
            f"accepted: a ceiling of at least {need} MB"
        )
