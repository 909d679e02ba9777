"""Every bad input a user can give at an entry point, and what they see: one line, no traceback.

Entries: `python -m provisioner` (its `run(argv)`), `python -m emulator` (its `main(argv)`; the
run itself is replaced, so a case that slipped through validation fails instead of starting
servers), `python -m emulator.profile`, `python -m emulator.calibrate`, `python -m
bench.lab.catalog_from_runs` and `cdk synth -c key=value` (app.synth_job, as tests/stacks does,
cdk.json context underneath), and `python -m functions.ps` (its `main(argv)`; the shard's start
is replaced, so none listens), and `python -m bench.predict` (its `command(argv)`; the
platform, the held-out draw and the S3 server are replaced, so nothing is measured). The cases
live in tests/bad_inputs/, one file per entry point.
docs/bad-inputs.md's table is this list: `python -m tests.test_bad_inputs` prints it, and a test
fails when a row is missing there.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import bench.lab.catalog_from_runs as catalog_from_runs_cli
import bench.predict as predict_cli
import emulator.__main__ as emulator_cli
import emulator.calibrate as calibrate_cli
import emulator.profile as profile_cli
import functions.datasets as datasets_cli
import functions.ps.cli as ps_cli
from emulator.profiling import children as profile_children
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.cli import run as provisioner_run
from provisioner.parse import MAX_SYNTHETIC_SAMPLES
from tests.bad_inputs import (
    catalog_from_runs_cases,
    cdk_cases,
    datasets_cases,
    emulator_cases,
    figure_cases,
    plan_cases,
    predict_cases,
    profile_cases,
    ps_cases,
)
from tests.bad_inputs.case import DROP, FILES, HOUR, PROGRAMS, REPO, Case
from tests.local_catalog import shared_core_catalog_dict
from tests.stacks.conftest import run_synth

TABLE = REPO / "docs" / "bad-inputs.md"
CASES: list[Case] = [
    *plan_cases.CASES,
    *emulator_cases.CASES,
    *catalog_from_runs_cases.CASES,
    *profile_cases.CASES,
    *cdk_cases.CASES,
    *ps_cases.CASES,
    *datasets_cases.CASES,
    *figure_cases.CASES,
    *predict_cases.CASES,
]


def _shown(arg: str) -> str:
    shown = arg.replace("{dir}/", "").replace("{dir}", ".")
    return shlex.quote(shown) if shown == "" or " " in shown else shown  # as a shell reads it


def command(case: Case) -> str:
    shown = [_shown(a) for a in case.args]
    if case.entry == "cdk":
        shown = [f"-c {a}" for a in shown]
    return " ".join([PROGRAMS[case.entry], *shown])


def readme_row(case: Case) -> str:
    """The case's row in docs/bad-inputs.md's table."""
    code = f"{case.code} (cdk: 1)" if case.entry == "cdk" else str(case.code)
    return f"| `{command(case)}` | {case.given} | {code} | {case.says} |"


@pytest.fixture(scope="module")
def valid_plan() -> dict[str, Any]:
    result = plan_job(load_profile("digits-mlp"), load_catalog("lambda-2025"),
                      Goal(deadline_s=3600.0), Limits(), "digits-demo")  # fmt: skip
    return json.loads(result.to_json())  # type: ignore[no-any-return]


def _changed(plan: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(plan))
    for dotted, value in changes.items():
        *parents, name = dotted.split(".")
        target = doc["plan"]
        for parent in parents:
            target = target[parent]
        if value is DROP:
            del target[name]
        else:
            target[name] = value
    return doc  # type: ignore[no-any-return]


def _files(folder: Path, case: Case, valid: dict[str, Any]) -> None:
    for name, body in (*FILES.items(), *case.files):
        (folder / name).write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    if isinstance(case.plan, str):
        (folder / "plan.json").write_text(case.plan, encoding="utf-8")
    elif case.plan is not None:
        (folder / "plan.json").write_text(json.dumps(_changed(valid, case.plan)), encoding="utf-8")


def _never_run(*_: Any, **__: Any) -> None:
    raise AssertionError("validation let a bad input through to the run")


def run_case(case: Case, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """(exit code, stderr) of the case, in-process."""
    args = [a.replace("{dir}", str(folder)) for a in case.args]
    if case.entry == "cdk":
        context = dict(a.split("=", 1) for a in args)
        result = run_synth(context, str(folder / "cdk.out"))
        return result.code, result.stderr
    monkeypatch.setattr(emulator_cli, "run", _never_run)
    monkeypatch.setattr(profile_children, "measure_share", _never_run)  # refused before timing
    err = io.StringIO()
    monkeypatch.setattr(calibrate_cli, "measure", _never_run)
    monkeypatch.setattr(ps_cli.ParameterServer, "start", _never_run)  # refused before listening
    monkeypatch.setattr(datasets_cli, "write_shards", _never_run)  # refused before any reading
    for name in ("measure_platform", "keep_platform", "draw", "weed_server"):  # before measuring
        monkeypatch.setattr(predict_cli, name, _never_run)
    if case.entry == "ps":  # no S3 to reach unless a case sets one; the secret its env: names
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "no-aws-config"))
        monkeypatch.setenv(ps_cases.SECRET_ENV, "bad-input-secret")
    main = {"plan": provisioner_run, "emulator": emulator_cli.main, "profile": profile_cli.main,
            "calibrate": calibrate_cli.main, "catalog_from_runs": catalog_from_runs_cli.main,
            "ps": ps_cli.main, "datasets": datasets_cli.main,
            "predict": predict_cli.command}  # fmt: skip
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main[case.entry](args)
        except SystemExit as exit_:  # argparse errors
            code = int(exit_.code or 0)
    return code, err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=command)
def test_bad_input_is_one_line_naming_it(
    case: Case, valid_plan: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _files(tmp_path, case, valid_plan)
    code, stderr = run_case(case, tmp_path, monkeypatch)
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert case.says in stderr
    assert code == case.code


def test_the_valid_plan_gets_through_so_each_case_fails_for_its_own_reason(
    valid_plan: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(emulator_cli, "run", lambda plan, options: ran.append(options))
    (tmp_path / "plan.json").write_text(json.dumps(valid_plan), encoding="utf-8")
    assert emulator_cli.main([str(tmp_path / "plan.json"), "--out", str(tmp_path / "r")]) == 0
    assert ran[0].out_dir == tmp_path / "r"


def test_there_are_at_least_40_cases_and_the_table_lists_each() -> None:
    assert len(CASES) >= 40
    table = TABLE.read_text(encoding="utf-8")
    missing = [readme_row(c) for c in CASES if readme_row(c) not in table]
    assert not missing, (
        "docs/bad-inputs.md lacks rows (python -m tests.test_bad_inputs prints them):\n"
        + "\n".join(missing)
    )


def test_a_refused_memory_ceiling_writes_no_plan(tmp_path: Path) -> None:
    """The ceiling below the largest block is refused after the planner read the profile: the
    plan --out names is still not written."""
    catalog = tmp_path / "local.json"
    catalog.write_text(json.dumps(shared_core_catalog_dict()), encoding="utf-8")
    out = tmp_path / "plan.json"
    args = ["plan", "--workload", "digits-mlp-blocks", "--deadline", "1h", "--catalog",
            str(catalog), "--memory-ceiling", "200", "--out", str(out)]  # fmt: skip
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert provisioner_run(args) == 2
    assert "needs 224 MB alone" in err.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.json"]


def test_the_synthetic_bound_is_the_same_in_the_image() -> None:
    from functions.datasets import MAX_SYNTHETIC_SAMPLES as IN_IMAGE

    assert IN_IMAGE == MAX_SYNTHETIC_SAMPLES


def test_a_full_disk_while_writing_the_chart_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from matplotlib.figure import Figure

    def full_disk(self: Figure, path: str, **_: Any) -> None:
        Path(path).write_bytes(b"half a png")
        raise OSError(errno.ENOSPC, "No space left on device", path)

    png = tmp_path / "frontier.png"
    png.write_bytes(b"the old chart")
    monkeypatch.setattr(Figure, "savefig", full_disk)
    code = provisioner_run(["frontier", *HOUR, "--png", str(png)])
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"error: cannot write {str(png)!r}: No space left on device\n"
    assert png.read_bytes() == b"the old chart"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frontier.png"]


def test_a_full_disk_during_an_emulator_run_is_one_line_and_exit_1(
    valid_plan: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    def full_disk(*_: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "runs/x/report.json")

    monkeypatch.setattr(emulator_cli, "run", full_disk)
    (tmp_path / "plan.json").write_text(json.dumps(valid_plan), encoding="utf-8")
    assert emulator_cli.main([str(tmp_path / "plan.json"), "--out", str(tmp_path / "r")]) == 1
    assert capsys.readouterr().err == (
        "emulator: run failed: cannot write runs/x/report.json: No space left on device\n"
    )


def test_a_full_disk_while_writing_plan_json_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app

    def full_disk(source: str, target: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", target)

    plan_json = tmp_path / "plan.json"
    plan_json.write_text("the old plan")
    monkeypatch.setattr(app.os, "replace", full_disk)
    result = run_synth({"deadline": "2h"}, str(tmp_path))
    assert result.code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: cannot write {plan_json}: No space left on device"
    )
    assert plan_json.read_text() == "the old plan"
    assert not (tmp_path / "plan.json.partial").exists()
    assert "Traceback" not in result.stderr


def test_a_full_disk_while_writing_the_report_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emulator.report import write_text_atomically

    real_write = Path.write_text

    def full_disk(self: Path, text: str, **kwargs: Any) -> int:
        real_write(self, text[:5], **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    report = tmp_path / "report.json"
    report.write_text('{"status": "old"}')
    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(report, '{"status": "new"}')
    monkeypatch.undo()
    assert report.read_text() == '{"status": "old"}'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_symlinked_run_folder_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    from emulator.naming import run_dir

    victim = tmp_path / "victim"
    (victim / "logs").mkdir(parents=True)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "job").symlink_to(victim)
    with pytest.raises(ValueError, match="resolves outside"):
        run_dir("job", None, runs)
    out = tmp_path / "out"
    out.mkdir()
    (out / "logs").symlink_to(victim / "logs")
    with pytest.raises(ValueError, match="'logs' leads outside it"):
        run_dir("job", out, runs)
    assert (victim / "logs").is_dir()


if __name__ == "__main__":
    sys.stdout.write("| Command | Given | Exit | The one line says |\n|---|---|---|---|\n")
    sys.stdout.write("".join(readme_row(c) + "\n" for c in CASES))
