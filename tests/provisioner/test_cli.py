"""`python -m provisioner`: exit codes 0 / 2 / 3, one-line errors, JSON and PNG outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "provisioner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plan_prints_table_and_alternatives() -> None:
    out = _run("plan", "--workload", "cifar10-resnet18", "--deadline", "1h")
    assert out.returncode == 0, out.stderr
    for word in (
        "workers × memory",
        "parameter servers",
        "compute",
        "communication",
        "PS instances",
        "Lambda compute",
        "next-best alternatives",
    ):
        assert word in out.stdout


def test_plan_json_is_the_plan_document() -> None:
    out = _run("plan", "--workload", "profiles/digits-mlp.json", "--deadline", "90s", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["plan"]["workload"] == "digits-mlp" and doc["frontier"]


def test_infeasible_exits_3_with_one_line() -> None:
    out = _run("plan", "--workload", "cifar10-resnet18", "--deadline", "5m")
    assert out.returncode == 3
    assert out.stderr.count("\n") == 1 and "fastest achievable" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_input_exits_2_with_one_line() -> None:
    cases = [
        ("plan", "--workload", "digits-mlp", "--deadline", "soon"),
        ("plan", "--workload", "nope", "--deadline", "1h"),
        ("plan", "--workload", "digits-mlp", "--deadline", "1h", "--arch", "sparc"),
        ("plan", "--workload", "digits-mlp", "--deadline", "1h", "--max-memory-mb", "0"),
        ("plan", "--workload", "digits-mlp", "--deadline", "1h", "--ps-types", "z1.nano"),
        ("plan", "--workload", "digits-mlp"),
    ]
    for args in cases:
        out = _run(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr


def test_frontier_writes_a_png(tmp_path: Path) -> None:
    png = tmp_path / "frontier.png"
    out = _run("frontier", "--workload", "cifar10-resnet18", "--deadline", "1h", "--png", str(png))
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
