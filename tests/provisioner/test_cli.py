"""`python -m provisioner`: exit codes 0 / 2 / 3, one-line errors, JSON and PNG outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    out = _run("plan", "--workload", "profiles/digits-mlp.json", "--deadline", "5m", "--json")
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


def _local_args(tmp_path: Path, *extra: str) -> list[str]:
    from tests.local_catalog import write_local_catalog

    catalog = write_local_catalog(tmp_path / "local.json")
    return [
        "plan",
        "--workload",
        "digits-mlp",
        "--catalog",
        str(catalog),
        "--deadline",
        "20s",
        *extra,
    ]


def test_plan_under_the_emulators_rules_writes_a_plan_it_runs(tmp_path: Path) -> None:
    """--invocation-limit and --iterations-per-invocation bind the plan as they bind the run."""
    from provisioner.cli import run
    from provisioner.plan import load_plan

    out = tmp_path / "plan.json"
    limit = ["--invocation-limit", "7.5s", "--out", str(out)]
    assert run(_local_args(tmp_path, *limit)) == 0
    timed = load_plan(out)  # the emulator reads what --out wrote
    assert timed.catalog == "local" and timed.ps_type == "loopback"
    assert timed.invocation_timeout_s == 8  # 7.5 s in whole seconds; the margin took the rest
    # a cap below what the time limit lets a link do (the profile's speed sets that) binds too
    cap = max(1, timed.iterations_per_invocation // 2)
    args = [*limit, "--iterations-per-invocation", str(cap)]
    assert run(_local_args(tmp_path, *args)) == 0
    plan = load_plan(out)
    assert plan.iterations_per_invocation == cap < plan.training.iterations
    assert plan.invocations_per_worker == -(-plan.training.iterations // cap)
    assert plan.prediction.total_s <= 20.0
    assert not (tmp_path / "plan.json.partial").exists()


def test_plan_rule_flags_reject_bad_values_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from provisioner.cli import run

    cases = {
        ("--invocation-limit", "soon"): "--invocation-limit: duration 'soon' is not understood",
        ("--invocation-limit", "20m"): "--invocation-limit '20m' exceeds catalog local's 900 s",
        ("--iterations-per-invocation", "-1"): "'-1' is not a whole number >= 0",
        ("--out", "/no/such/folder/p.json"): "folder '/no/such/folder' does not exist",
        ("--out", "plan.txt"): "'plan.txt' is not a .json file path",
    }
    for flag_value, says in cases.items():
        code = 0
        try:
            code = run(_local_args(tmp_path, *flag_value))
        except SystemExit as exc:  # argparse's type errors
            code = int(exc.code or 0)
        err = capsys.readouterr().err
        assert code == 2, flag_value
        assert says in err and err.count("\n") == 1, err
    assert [p.name for p in tmp_path.iterdir()] == ["local.json"]  # nothing else written
