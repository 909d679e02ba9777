"""bench.replan's table on the model, so it cannot rot: at the catalog's speed the run keeps its
plan; at 1.5× slower re-planning meets the deadline the fixed plan misses."""

from __future__ import annotations

from bench.replan import case_lines


def test_the_fixed_plan_misses_at_one_and_a_half_and_the_replanned_meets() -> None:
    lines = case_lines("paper-cifar10-mobilenetv2", 1200.0)
    rows = {line.split(" | ")[0]: line.split(" | ") for line in lines if line.startswith("| ")}
    same = rows["| 1×"]
    assert same[2] == same[5] == "yes" and same[1] == same[4] and same[-1] == "– |"
    slow = rows["| 1.5×"]
    assert (slow[2], slow[5]) == ("no", "yes")
    assert slow[-1].startswith("link 1: pace 1.50× the plan's")
