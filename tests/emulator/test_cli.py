"""The CLI's bad-input handling: one line naming the bad value, exit code 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emulator.__main__ import parse_limit_s

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60.0), ("2m", 120.0), ("90", 90.0)])
def test_invocation_limit_accepts_durations(text: str, seconds: float) -> None:
    assert parse_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["2s", "16m", "soon", "-5s"])
def test_invocation_limit_rejects_out_of_range_or_garbage(text: str) -> None:
    with pytest.raises(ValueError, match=f"bad --invocation-limit '{text}'"):
        parse_limit_s(text)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_missing_plan_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = _cli(str(tmp_path / "nope.json"))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "cannot read plan" in out.stderr and "npx cdk synth" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_cpu_scale_is_one_line_and_exit_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    out = _cli(str(plan), "--cpu-scale", "zero")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: bad --cpu-scale 'zero': expected a positive number such as 0.5, or 'auto'"
    )


def test_not_a_plan_is_one_line_and_exit_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"plan": {"job": "x"}}')
    out = _cli(str(plan))
    assert out.returncode == 2
    assert "is not a plan.json written by app.py" in out.stderr
    assert "Traceback" not in out.stderr
