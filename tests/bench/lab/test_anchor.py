"""bench.lab.anchor: a profile moved part of the way to a reading of the machine's speed, the
weighting bench.predict's rounds use."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.lab.anchor import ANCHOR_DRIFT_BAND, anchor_move, anchored_profile
from provisioner import load_profile

REPO = Path(__file__).resolve().parents[3]


def test_an_anchored_profile_keeps_the_curves_shape_at_the_anchors_speed(tmp_path: Path) -> None:
    """The anchor moves every share's rate by its 1-vCPU reading over the profile's and takes its
    start-up; the result loads, says it was anchored, and leaves the input as it was."""
    raw = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    points = raw["training_rate"]["x86_64"]["points"]
    one = next(p["samples_per_s"] for p in points if p["vcpu_share"] == 1.0)
    doc = anchored_profile(
        raw, {"samples_per_s": one * 1.5, "startup_s": 0.8, "runs": 3}, "x86_64", "2026-11-25",
        weight=1.0,
    )  # fmt: skip
    moved = doc["training_rate"]["x86_64"]["points"]
    assert [p["vcpu_share"] for p in moved] == [p["vcpu_share"] for p in points]
    for before, after in zip(points, moved, strict=True):
        assert after["samples_per_s"] == pytest.approx(before["samples_per_s"] * 1.5, abs=0.1)
    assert doc["startup_s"] == 0.8 and doc["anchor"]["speed_factor"] == 1.5
    assert doc["sources"]["training_rate"]["method"].startswith("anchored: the profile's curve")
    assert raw["training_rate"]["x86_64"]["points"] == points and raw["startup_s"] != 0.8
    path = tmp_path / "anchored.json"
    path.write_text(json.dumps(doc))
    assert load_profile(path).startup_s == 0.8


def _rates(doc: dict[str, Any]) -> dict[float, float]:
    return {p["vcpu_share"]: p["samples_per_s"] for p in doc["training_rate"]["x86_64"]["points"]}


def _cnn_and_two_share_anchor(
    at_half: float, at_one: float
) -> tuple[dict[str, Any], dict[float, float], dict[str, Any]]:
    """The committed CNN profile, its rates per share, and an anchor that read `at_half` × its
    rate at 0.5 vCPU and `at_one` × at 1 vCPU."""
    raw = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    points = _rates(raw)
    by_share = {"0.5": points[0.5] * at_half, "1.0": points[1.0] * at_one}
    anchor = {"samples_per_s": points[1.0] * at_one, "samples_per_s_by_share": by_share,
              "startup_s": 1.0, "runs": 3}  # fmt: skip
    return raw, points, anchor


def test_an_anchor_at_two_shares_moves_each_point_by_the_factor_at_its_share() -> None:
    """Read at 0.5 and 1 vCPU: points at and below 0.5 move by the 0.5 factor, at and above 1
    by the 1-vCPU factor; a share between takes the line between them."""
    raw, points, anchor = _cnn_and_two_share_anchor(0.9, 1.2)
    doc = anchored_profile(raw, anchor, "x86_64", "2026-11-26", weight=1.0)
    moved = _rates(doc)
    expected = {0.25: 0.9, 0.5: 0.9, 1.0: 1.2, 2.0: 1.2}
    assert set(moved) == set(expected)
    for share, factor in expected.items():
        assert moved[share] == pytest.approx(points[share] * factor, abs=0.1)
    assert doc["anchor"]["speed_factor"] == pytest.approx(1.2)
    assert doc["anchor"]["speed_factor_by_share"] == {"0.5": 0.9, "1": 1.2}
    assert "× 0.900 at 0.5 vCPU, × 1.200 at 1 vCPU" in doc["sources"]["training_rate"]["method"]


def test_an_anchor_moves_the_loops_seconds_with_the_rate_at_each_share() -> None:
    """The loop through a loopback shard is CPU work on this machine as the step is: a reading
    1.2× faster at 1 vCPU makes its exchange and extra CPU 1.2× shorter there (0.9× at 0.5)."""
    raw, _, anchor = _cnn_and_two_share_anchor(0.9, 1.2)
    doc = anchored_profile(raw, anchor, "x86_64", "round 0", weight=1.0)
    expected = {0.25: 0.9, 0.5: 0.9, 1.0: 1.2, 2.0: 1.2}
    for field, key in (("loop_overhead_s", "s"), ("loop_extra_cpu_s", "cpu_s")):
        before = {p["vcpu_share"]: p[key] for p in raw[field]}
        after = {p["vcpu_share"]: p[key] for p in doc[field]}
        assert set(after) == set(before) and set(before) <= set(expected)
        for share, value in before.items():
            assert after[share] == pytest.approx(value / expected[share], rel=1e-4)
        assert "÷ the training rate's factor" in doc["sources"][field]["method"]


def test_an_anchor_takes_the_reading_whole_by_default_and_half_way_at_weight_half() -> None:
    """By default (ANCHOR_WEIGHT) an anchor takes the reading whole, as the product's own
    `emulator.profile --anchor` does; at weight 0.5 each point lands at the geometric mean of the
    profile and the reading while the reading is within the drift band; the reading itself is
    kept as measured, and a weight outside [0, 1] is refused in one line."""
    raw, points, anchor = _cnn_and_two_share_anchor(0.81, 1.21)
    whole = _rates(anchored_profile(raw, anchor, "x86_64", "2026-11-26"))
    assert whole[0.5] == pytest.approx(points[0.5] * 0.81, abs=0.1)
    assert whole[1.0] == pytest.approx(points[1.0] * 1.21, abs=0.1)
    doc = anchored_profile(raw, anchor, "x86_64", "2026-11-26", weight=0.5)
    moved = _rates(doc)
    for share, factor in {0.25: 0.9, 0.5: 0.9, 1.0: 1.1, 2.0: 1.1}.items():
        assert moved[share] == pytest.approx(points[share] * factor, abs=0.1)
    assert doc["anchor"]["speed_factor_by_share"] == {"0.5": 0.81, "1": 1.21}
    assert doc["anchor"]["weight"] == 0.5 and "to the power 0.5" in doc["sources"][
        "training_rate"]["method"]  # fmt: skip
    unmoved = anchored_profile(raw, anchor, "x86_64", "2026-11-26", weight=0.0)
    assert unmoved["training_rate"] == raw["training_rate"] and unmoved["startup_s"] == 1.0
    with pytest.raises(ValueError, match=r"bad anchor weight 1\.5: expected a number from 0 to 1"):
        anchored_profile(raw, anchor, "x86_64", "2026-11-26", weight=1.5)


def test_a_reading_beyond_the_drift_band_moves_the_profile_whole_past_the_band() -> None:
    """Within ×1/band-band of the profile an anchor moves it `weight` of the way; the part of a
    reading beyond the band (another machine, not drift) moves it whole, on both sides, and the
    move is continuous at the band's edge; weight 0 moves nothing."""
    band = ANCHOR_DRIFT_BAND
    assert anchor_move(1.21, 0.5) == pytest.approx(1.1)
    assert anchor_move(band, 0.5) == pytest.approx(math.sqrt(band))
    assert anchor_move(2.25, 0.5) == pytest.approx(math.sqrt(band) * 2.25 / band)
    assert anchor_move(1 / 2.25, 0.5) == pytest.approx(1 / anchor_move(2.25, 0.5))
    assert anchor_move(2.25, 1.0) == pytest.approx(2.25)
    assert anchor_move(2.25, 0.0) == anchor_move(1.2, 0.0) == 1.0  # weight 0: no anchor
    raw, points, anchor = _cnn_and_two_share_anchor(2.0, 2.25)
    doc = anchored_profile(raw, anchor, "x86_64", "2026-11-27", weight=0.5)
    moved = _rates(doc)
    assert moved[1.0] == pytest.approx(points[1.0] * anchor_move(2.25, 0.5), abs=0.1)
    assert moved[0.5] == pytest.approx(points[0.5] * anchor_move(2.0, 0.5), abs=0.1)
    assert moved[1.0] > points[1.0] * 1.9  # half the way in log speed would be 1.5×
    assert doc["anchor"]["band"] == band
    assert f"within ×{band:g} of the profile and whole beyond it" in doc["sources"][
        "training_rate"]["method"]  # fmt: skip


def test_a_profile_without_a_1_vcpu_point_cannot_be_anchored() -> None:
    raw = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    raw["training_rate"]["x86_64"]["points"] = [
        p for p in raw["training_rate"]["x86_64"]["points"] if p["vcpu_share"] != 1.0
    ]
    with pytest.raises(ValueError, match="no 1 vCPU training-rate point"):
        anchored_profile(raw, {"samples_per_s": 10.0, "startup_s": 1.0}, "x86_64", "2026-11-25")


def test_an_anchor_takes_the_memory_its_children_measured_whole(tmp_path: Path) -> None:
    """Memory is no speed: a reading's resident set and first-step memory (the median of its
    children, memory_figures) replace the profile's as read, say so, and load; a reading
    without them leaves the profile's."""
    from emulator.profiling.reading import memory_figures

    raw = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    one = next(p["samples_per_s"] for p in raw["training_rate"]["x86_64"]["points"]
               if p["vcpu_share"] == 1.0)  # fmt: skip
    children = [{"resident_mb": 240.0, "first_step_mb": m} for m in (30.0, 40.0, 90.0)]
    assert memory_figures(children + [{"samples_per_s": 1.0}]) == {
        "resident_mb": 240.0, "first_step_mb": 40.0,
    }  # fmt: skip
    assert memory_figures([{"samples_per_s": 1.0}]) == {}
    reading = {"samples_per_s": one, "startup_s": 0.8, "runs": 3, **memory_figures(children)}
    doc = anchored_profile(raw, reading, "x86_64", "2026-11-25")
    assert (doc["resident_mb"], doc["first_step_mb"]) == (240.0, 40.0)
    assert doc["sources"]["first_step_mb"]["method"].startswith("anchored: MB of fresh memory")
    path = tmp_path / "anchored.json"
    path.write_text(json.dumps(doc))
    assert load_profile(path).first_step_mb == 40.0
    bare = anchored_profile(raw, {"samples_per_s": one, "startup_s": 0.8}, "x86_64", "2026-11-25")
    assert bare.get("first_step_mb") == raw.get("first_step_mb")


def test_a_rescored_anchor_keeps_the_memory_its_run_read(tmp_path: Path) -> None:
    """Re-scoring builds each anchored profile again from what the run kept: the speed factors,
    the start-up and the memory its anchor's children measured (lost, a crowd's first steps
    past the fresh-memory line went unpriced and MobileNetV2's compute read a third low)."""
    from bench.predict.rescore import reanchored_profile

    raw = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    one = next(p["samples_per_s"] for p in raw["training_rate"]["x86_64"]["points"]
               if p["vcpu_share"] == 1.0)  # fmt: skip
    reading = {"samples_per_s": one * 1.2, "startup_s": 0.9, "resident_mb": 250.0,
               "first_step_mb": 40.0}  # fmt: skip
    (tmp_path / "synthetic-cifar-cnn.json").write_text(json.dumps(raw))
    kept = anchored_profile(raw, reading, "x86_64", "2026-11-25")
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    again = reanchored_profile(tmp_path, "kept.json", "synthetic-cifar-cnn", 1.0)
    assert (again.resident_mb, again.first_step_mb) == (250.0, 40.0)
    assert again.startup_s == 0.9
