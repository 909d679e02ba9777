"""A profile moved part of the way to a reading of the machine's speed: bench.predict's anchors.

Every round of bench.predict reads each workload's rate at 0.5 and 1 vCPU and its start-up
(emulator.profiling.reading.measure_reading) and moves the profile toward that speed: both the
profile and the reading estimate the speed of this VM, which drifts by up to 2× within an hour.
By default the reading is taken whole, as the product takes it (`python -m emulator.profile
--anchor`); a weight below 1 (`--anchor-weight`, for re-scoring) moves a point that share of the
way within the drift band (ANCHOR_DRIFT_BAND) and whole beyond it.
"""

from __future__ import annotations

import math
import platform
import sys
from pathlib import Path
from typing import Any

from emulator.profiling.document import write_profile
from emulator.profiling.reading import (
    factors_text,
    measure_reading,
    moved_to_reading,
)

# How far an anchor moves the profile, in log speed: 1 takes the reading whole, as the product
# does (`python -m emulator.profile --anchor`), so the benchmark predicts what a user's flow
# predicts and no weight is fitted on scored rows. A weight of 0.5 had been chosen on the fixed
# grid (each point at the geometric mean of profile and reading); re-scored on the last four
# held-out draws with the current model (`python -m bench.predict --rescore-held-out
# <draw>/predict-heldout.json --anchor-weight W`), the whole reading read 0.910, 0.948, 0.889
# and 0.945 mean (compute 7.8%, 4.3%, 6.8%, 3.0% of the total) and half of it 0.893, 0.949,
# 0.871 and 0.935 (8.7%, 5.5%, 8.5%, 5.0%): the profile, read on this VM hours before at
# another speed, pulled the compute slow (the CNN's 1-vCPU step read 72 ms just before a row
# whose steps took 70-79 ms of CPU, and the half-way profile said 85).
ANCHOR_WEIGHT = 1.0
# A weight below 1 holds for drift, not for another machine. In seven grids on one VM (profiles
# of that VM) every anchor read 0.79-1.31× its profile; a fresh VM read the same committed
# digits profile at 2.23× (0.5 vCPU) and 2.28× (1 vCPU), where half the way would predict 1.5×
# too slow. So the weight moves a point within ×1/band-band of its profile and the reading
# beyond the band moves it whole (anchor_move).
ANCHOR_DRIFT_BAND = 1.33


def anchor_move(factor: float, weight: float, band: float = ANCHOR_DRIFT_BAND) -> float:
    """How much a profile point moves for an anchor that read `factor` × it: in log speed,
    `weight` of the part within [−ln band, ln band] and the whole of the part beyond (a machine
    that much faster or slower than its profile is not drift, and no half of it is noise).
    Weight 0 is no anchor at all: the profile as measured (`bench.predict --anchor-weight 0`)."""
    if weight == 0.0:
        return 1.0
    log_factor = math.log(factor)
    edge = math.log(band)
    inside = min(max(log_factor, -edge), edge)
    return math.exp(weight * inside + (log_factor - inside))


def anchored_profile(
    doc: dict[str, Any],
    anchor: dict[str, Any],
    arch: str,
    when: str,
    weight: float = ANCHOR_WEIGHT,
) -> dict[str, Any]:
    """The profile `doc` moved towards the machine's speed of the `anchor` (measure_reading):
    each training-rate point × anchor_move of the factor at its share (factor_at_share over the
    anchored shares' reading / profile rate; an anchor of the 1-vCPU rate alone moves every
    point by its factor): `weight` of it in log speed within ANCHOR_DRIFT_BAND, the rest whole
    (ANCHOR_WEIGHT and ANCHOR_DRIFT_BAND say why), start-up the anchor's.

    A curve measured once predicts runs an hour later at another speed (MobileNetV2 at 1 vCPU:
    36.4 samples/s, then 67.6 within the hour, the same code). Its shape between the anchored
    shares and beyond them (the parallel ratio, warm-up) is kept; its level is set from readings
    taken just before.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"bad anchor weight {weight!r}: expected a number from 0 to 1")
    return moved_to_reading(
        doc, anchor, arch, when, move=lambda read: anchor_move(read, weight), label="anchored",
        how=f"to the power {weight:g} within ×{ANCHOR_DRIFT_BAND:g} of the profile and whole "
        f"beyond it, its rate measured just before (median of {anchor.get('runs', 1)} children "
        "per share, emulator.profiling.reading.measure_reading)",
        extra={"weight": weight, "band": ANCHOR_DRIFT_BAND},
    )  # fmt: skip


def write_anchored(raw: dict[str, Any], output: Path, when: str) -> dict[str, Any]:
    """Measure the anchor now and write the profile `raw` moved to it at `output` (whole or not
    at all); the moved profile. RuntimeError where no share can be held, ValueError where the
    profile has no 1-vCPU point on this machine's architecture."""
    arch = platform.machine().replace("aarch64", "arm64")
    reading = measure_reading(raw)
    doc = anchored_profile(raw, reading, arch, when)
    factors = {float(k): v for k, v in doc["anchor"]["speed_factor_by_share"].items()}
    print(f"anchor {raw['name']}: {reading['samples_per_s']:.1f} samples/s at 1 vCPU; "
          f"speed over the profile's {factors_text(factors)}; start-up "
          f"{reading['startup_s']:.2f} s", file=sys.stderr, flush=True)  # fmt: skip
    write_profile(output, doc)
    return doc
