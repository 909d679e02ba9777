"""Reshaping the code changes no behaviour: plans and templates for a fixed set of inputs are
byte-identical to the recorded ones (tests/golden; asset hashes aside, see cases.py)."""

from __future__ import annotations

import json

import pytest

from tests.golden.cases import GOLDEN_DIR, SYNTHS, plan_documents, synth_files


@pytest.mark.parametrize("name", sorted(SYNTHS))
def test_the_synth_is_byte_identical_to_the_recorded_one(name: str) -> None:
    folder = GOLDEN_DIR / "synth" / name
    recorded = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}
    now = synth_files(name)
    assert sorted(now) == sorted(recorded)
    for file, text in now.items():
        assert text == recorded[file], f"{name}/{file} differs from the recorded one"


def test_every_plan_is_byte_identical_to_the_recorded_one() -> None:
    recorded = json.loads((GOLDEN_DIR / "plans.json").read_text(encoding="utf-8"))
    now = plan_documents()
    assert sorted(now) == sorted(recorded)
    changed = [name for name in now if now[name] != recorded[name]]
    assert not changed, f"{len(changed)} plans differ, e.g. {changed[:3]}"
