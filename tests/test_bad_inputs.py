"""Every bad input a user can give at an entry point, and what they see: one line, no traceback.

Entries: `python -m provisioner` (its `run(argv)`), `python -m emulator` (its `main(argv)`; the
run itself is replaced, so a case that slipped through validation fails instead of starting
servers) and `cdk synth -c key=value` (app.synth_job, as tests/stacks does, cdk.json context
underneath). README.md's "Bad input" table is this list: `python -m tests.test_bad_inputs`
prints it, and a test fails when a row is missing there.

In a case, `{dir}` is a scratch folder holding the files of FILES, and `plan.json`, written from
the case's `plan`: JSON text, or changes ("training.model": "gpt5"; DROP removes the field) to a
valid plan from the real planner.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import emulator.__main__ as emulator_cli
import emulator.calibrate as calibrate_cli
import emulator.profile as profile_cli
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.cli import run as provisioner_run
from provisioner.parse import MAX_SYNTHETIC_SAMPLES
from tests.provisioner.conftest import run_report_dict
from tests.stacks.conftest import run_synth

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DROP = object()
PROGRAMS = {"plan": "python -m provisioner", "emulator": "python -m emulator", "cdk": "cdk synth",
            "profile": "python -m emulator.profile", "calibrate": "python -m emulator.calibrate"}


def _profile(**changes: Any) -> str:
    data = json.loads((REPO / "profiles" / "digits-mlp.json").read_text(encoding="utf-8"))
    return json.dumps({**data, **changes}, ensure_ascii=False)


def _digits_report(**changes: Any) -> str:
    """A finished run's report.json of digits-mlp with the top-level changes shown."""
    report = run_report_dict(**changes)
    report["plan"].update(model="mlp", dataset="digits", local_batch=16)
    return json.dumps(report)


FILES: dict[str, str | bytes] = {
    "no-terms.json": json.dumps({"job_id": "demo", "complete": True}),
    "aws-run.json": json.dumps({"job_id": "demo", "complete": True, "workers": []}),
    "interrupted.json": _digits_report(status="interrupted"),
    "cnn-run.json": json.dumps(run_report_dict()),
    "no-iterations.json": _digits_report(iterations={"planned": 100, "completed": 0}),
    "momentum.json": _profile(momentum=1.0),
    "nan-rate.json": _profile(learning_rate=float("nan")),
    "latin1.json": _profile(name="caf\u00e9").encode("latin-1"),
    "a-file": "not a folder",
    "local.json": json.dumps({"name": "local"}),
}


@dataclass(frozen=True)
class Case:
    entry: str  # a key of PROGRAMS
    args: tuple[str, ...]  # argv; for cdk, key=value context (cdk.json's values underneath)
    code: int  # exit code; for cdk the app's (the cdk CLI reports any non-zero as 1)
    says: str  # a fragment of the one line on stderr
    plan: str | dict[str, Any] | None = None
    given: str = ""  # what a file in args holds, for the README


def plan_case(*args: str, says: str, code: int = 2, given: str = "") -> Case:
    return Case("plan", args, code, says, given=given)


def emu(*args: str, says: str, plan: str | dict[str, Any] | None = None, given: str = "") -> Case:
    if not given and isinstance(plan, dict):
        given = "plan.json: " + ", ".join(
            f"{key} {'removed' if value is DROP else json.dumps(value)}"
            for key, value in plan.items()
        )
    elif not given and plan is not None:
        given = f"plan.json: {plan}"
    return Case("emulator", ("{dir}/plan.json", *args), 2, says, plan=plan or {}, given=given)


def prof(*args: str, says: str, given: str = "") -> Case:
    return Case("profile", args, 2, says, given=given)


def slack_case(
    catalog: str, runs: str, says: str, given: str, option: str = "--slack-from"
) -> Case:
    """python -m emulator.calibrate --out {dir}/CATALOG OPTION {dir}/RUNS (--slack-from, or
    --init-cores-from)"""
    args = ("--out", f"{{dir}}/{catalog}", option, f"{{dir}}/{runs}")
    return Case("calibrate", args, 2, says, given=given)


def cdk(*args: str, says: str, code: int = 2, given: str = "") -> Case:
    return Case("cdk", args, code, says, given=given)


DIGITS = ("--workload", "digits-mlp")
HOUR = (*DIGITS, "--deadline", "1h")
CASES = [
    # python -m provisioner plan|frontier
    plan_case("plan", *DIGITS, "--deadline", "soon", says="duration 'soon' is not understood"),
    plan_case("plan", *DIGITS, "--budget", "-5", says="amount '-5' is not understood"),
    plan_case("plan", *DIGITS, says="give --deadline (e.g. 2h) or --budget (e.g. 5) or both"),
    plan_case("plan", "--workload", "nope", "--deadline", "1h", says="profile 'nope' not found"),
    plan_case("plan", *HOUR, "--slack", "95%", says="slack '95%' is out of range"),
    plan_case("plan", *DIGITS, "--budget", "5", "--slack", "10%",
              says="only a budget was given: add a deadline or drop the slack"),
    plan_case("plan", *HOUR, "--ps-types", ",,,", says="PS types: none given"),
    plan_case("plan", *HOUR, "--ps-types", "z9.huge",
              says="PS type 'z9.huge' is not in catalog lambda-2025"),
    plan_case("plan", *HOUR, "--job", "../../victim",
              says="job name '../../victim' is not accepted; use 1-32 letters"),
    plan_case("plan", *HOUR, "--max-memory-mb", "0", says="'0' is not a positive integer"),
    plan_case("plan", *HOUR, "--arch", "sparc", says="invalid choice: 'sparc'"),
    plan_case("plan", *HOUR, "--frobnicate", says="unrecognized arguments: --frobnicate"),
    plan_case("plan", *DIGITS, "--deadline", "1s", code=3,
              says="infeasible: no plan meets deadline 1.0s"),
    plan_case("frontier", *HOUR, "--png", "/no/such/folder/f.png",
              says="'/no/such/folder' does not exist"),
    plan_case("frontier", *HOUR, "--png", "{dir}/a-file/f.png",
              says="a-file' is not a folder", given="a-file: a file"),
    plan_case("frontier", *HOUR, "--png", "{dir}", says="is not a .png file path"),
    plan_case("plan", *HOUR, "--invocation-limit", "soon",
              says="--invocation-limit: duration 'soon' is not understood"),
    plan_case("plan", *HOUR, "--invocation-limit", "20m",
              says="--invocation-limit '20m' exceeds catalog lambda-2025's 900 s limit"),
    plan_case("plan", *HOUR, "--iterations-per-invocation", "-1",
              says="'-1' is not a whole number >= 0"),
    plan_case("plan", *HOUR, "--out", "/no/such/folder/plan.json",
              says="folder '/no/such/folder' does not exist"),
    plan_case("plan", "--workload", "{dir}/latin1.json", "--deadline", "1h",
              says="latin1.json' is not UTF-8 text", given="latin1.json: Latin-1 bytes"),
    plan_case("plan", "--workload", "{dir}/momentum.json", "--deadline", "1h",
              says="profile field 'momentum': 1.0 is not in [0, 1)",
              given="momentum.json: momentum 1.0"),
    plan_case("plan", "--workload", "{dir}/nan-rate.json", "--deadline", "1h",
              says="profile field 'learning_rate': nan is not a positive number",
              given="nan-rate.json: learning_rate NaN"),
    # python -m provisioner calibrate report.json
    plan_case("calibrate", "{dir}/no-report.json",
              says="no-report.json' cannot be read: No such file or directory"),
    plan_case("calibrate", "{dir}/no-terms.json", says="is not a run report: no 'terms'",
              given="no-terms.json: a job summary, not a run report"),
    plan_case("calibrate", "{dir}/aws-run.json", says="is an AWS run's report (the workers' "
              "links, no plan): give --plan", given="aws-run.json: what finalize writes"),
    plan_case("calibrate", "{dir}/aws-run.json", "--plan", "{dir}/no-plan.json",
              says="cannot read plan", given="aws-run.json: what finalize writes"),
    plan_case("calibrate", "{dir}/interrupted.json",
              says="is from an unfinished run (status 'interrupted')",
              given="interrupted.json: status \"interrupted\""),
    plan_case("calibrate", "{dir}/cnn-run.json", "--profile", "digits-mlp",
              says="is a run of cnn on synthetic-cifar, but profile 'digits-mlp' is mlp on digits",
              given="cnn-run.json: a run of the CNN"),
    plan_case("calibrate", "{dir}/no-iterations.json",
              says="completed 0 iterations: there is no rate to refit",
              given="no-iterations.json: iterations.completed 0"),
    # python -m emulator plan.json
    Case("emulator", ("{dir}/missing.json",), 2, "cannot read plan"),
    emu(plan="[]", says="plan: expected a JSON object, got list"),
    emu(plan='"plan"', says="plan: expected a JSON object, got str"),
    emu(plan="{", says="not JSON: Expecting property name"),
    emu(plan={"n_workers": 0}, says="plan field 'n_workers': 0 is out of range; use at least 1"),
    emu(plan={"n_workers": "2"}, says="plan field 'n_workers': '2' is not an integer"),
    emu(plan={"memory_mb": 0}, says="plan field 'memory_mb': 0 is out of range; use from 128"),
    emu(plan={"memory_mb": 20000}, says="plan field 'memory_mb': 20000 is out of range"),
    emu(plan={"ps_count": 0}, says="plan fields 'ps_count', 'reducers': 0, 0 do not fit sync 'ps';"
        " use ps_count at least 1 and reducers 0"),
    emu(plan={"sync": "s3", "reducers": 3},
        says="plan fields 'ps_count', 'reducers': 1, 3 do not fit sync 's3'; use ps_count 0 and"
        " reducers from 1 to n_workers"),
    emu(plan={"training.model": "gpt5"},
        says="plan field 'training.model': model 'gpt5' is not accepted; use a zoo name (mlp, "),
    emu(plan={"training.dataset": "/etc"},
        says="plan field 'training.dataset': '/etc' is not accepted; use digits, synthetic-cifar"),
    emu(plan={"training.iterations": -1}, says="plan field 'training.iterations': -1 is out of"),
    emu(plan={"training.momentum": 1.5}, says="'training.momentum': 1.5 is not in [0, 1)"),
    emu(plan={"training.learning_rate": 0}, says="'training.learning_rate': 0 is not positive"),
    emu(plan={"training.dataset": "synthetic-cifar", "training.dataset_samples": 10**14},
        says=f"synthetic samples is out of range; use from 1 to {MAX_SYNTHETIC_SAMPLES}"),
    emu(plan={"job": "../../victim"}, says="plan field 'job': job name '../../victim'"),
    emu(plan={"memory_mb": DROP}, says="plan field 'memory_mb' is missing"),
    emu(plan={"colour": "red"}, says="plan field 'colour' is not a plan field"),
    emu("--invocation-limit", "1h", says="bad --invocation-limit '1h': expected between 3s"),
    emu("--cpu-scale", "zero", says="bad --cpu-scale 'zero': expected a positive number"),
    emu("--cpu-scale", "1e-9", says="bad --cpu-scale '1e-9': a "),
    emu("--max-attempts", "x", says="bad --max-attempts 'x': expected a whole number, 1 or more"),
    emu("--max-attempts", "0", says="bad --max-attempts '0'"),
    emu("--s3", "minio", says="argument --s3: invalid choice: 'minio'"),
    emu("--out", "{dir}/a-file", says="a-file' is not a folder", given="a-file: a file"),
    emu("--out", "{dir}/a-file/run", says="a-file' is a file)", given="a-file: a file"),
    # python -m emulator.calibrate --slack-from RUNS (the catalog's slack from finished runs)
    slack_case("local.json", "no-terms.json", "is neither a run report (terms) nor bench."
               "predict results (rows)", "no-terms.json: a job summary, not a run report"),
    slack_case("local.json", "interrupted.json", "holds no finished run predicted for this "
               "machine", 'interrupted.json: status "interrupted"'),
    slack_case("missing.json", "interrupted.json", "cannot be read (FileNotFoundError): "
               "--slack-from updates a catalog", 'interrupted.json: status "interrupted"'),
    # python -m emulator.calibrate --init-cores-from RUNS (start-up cores from finished runs)
    slack_case("local.json", "no-terms.json", "is neither a run report (terms) nor bench."
               "predict results (rows)", "no-terms.json: a job summary, not a run report",
               option="--init-cores-from"),
    slack_case("local.json", "interrupted.json", "holds no finished run with a measured "
               "start-up", 'interrupted.json: status "interrupted"', option="--init-cores-from"),
    # python -m emulator.profile --model FILE:FUNCTION --dataset PATH (a new profile)
    prof("--model", "tests/fixtures/models/broken.py:build", "--dataset", "builtin:digits",
         says="model file tests/fixtures/models/broken.py does not import: ModuleNotFoundError: "
         "No module named 'not_installed_anywhere'", given="broken.py imports a missing module"),
    prof("--model", "tests/fixtures/models/wrong.py:build", "--dataset", "builtin:digits",
         says="model tests/fixtures/models/wrong.py:build returned int, expected a torch.nn.",
         given="build returns 42"),
    prof("--model", "tests/fixtures/models/wrong.py:five_classes", "--dataset", "builtin:digits",
         says="outputs (2, 5) for a batch shaped (2, 1, 8, 8); the labels need (2, 10)",
         given="five_classes: 5 scores; digits has 10 classes"),
    prof("--model", "tests/fixtures/models/wrong.py:absent", "--dataset", "builtin:digits",
         says="model file tests/fixtures/models/wrong.py has no function 'absent'; it defines: "),
    prof("--model", "/home/me/model.py:build", "--dataset", "builtin:digits",
         says="the file must be a path inside the project folder, relative to it"),
    prof("--model", "mlp", says="--model needs --dataset: a dataset path in the project, or s3://"),
    prof("--model", "mlp", "--dataset", "/data/cats",
         says="bad --dataset '/data/cats': expected a path relative to the project folder"),
    prof("--model", "mlp", "--dataset", "runs/no-such-folder",
         says="bad source"),
    prof("--model", "mlp", "--dataset", "builtin:digits", "--epochs", "0",
         says="bad --epochs 0: expected a whole number, 1 or more"),
    prof("--workload", "digits-mlp", "--pairs", "0",
         says="bad --pairs 0: expected a whole number of at least 1"),
    prof("--model", "mlp", "--workload", "digits-mlp",
         says="give --workload (re-measure a profile) or --model with --dataset (a new one)"),
    # cdk synth -c key=value
    cdk("job=../../victim", says="job='../../victim' is not a job name"),
    cdk("dataset=synthetic-cifar:99999999999999",
        says="dataset='synthetic-cifar:99999999999999' is not accepted"),
    cdk("dataset=synthetic-cifar:4096",
        says="gives 3×32×32 inputs but workload 'digits-mlp' was profiled on digits (1×8×8)"),
    cdk("deadline=bogus", says="deadline='bogus' is not accepted"),
    cdk("budget=5", "slack=10%", says="only a budget was given: add a deadline or drop the slack"),
    cdk("max_memory_mb=64", says="max_memory_mb='64' is out of range"),
    cdk("arch=sparc", says="arch='sparc' is not accepted; use one of x86_64, arm64, mixed, any"),
    cdk("ps_types=,,,", says="ps_types=',,,' is not accepted"),
    cdk("workload=nope", says="workload='nope': profile 'nope' not found"),
    cdk("reserve_concurency=true", says="reserve_concurency='true' is not a context key"),
    cdk("workload={dir}/latin1.json", says="latin1.json' is not UTF-8 text",
        given="latin1.json: Latin-1 bytes"),
]  # fmt: skip


def _shown(arg: str) -> str:
    return arg.replace("{dir}/", "").replace("{dir}", ".")


def command(case: Case) -> str:
    shown = [_shown(a) for a in case.args]
    if case.entry == "cdk":
        shown = [f"-c {a}" for a in shown]
    return " ".join([PROGRAMS[case.entry], *shown])


def readme_row(case: Case) -> str:
    """The case's row in README.md's Bad input table."""
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
    for name, body in FILES.items():
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
    monkeypatch.setattr(profile_cli, "measure_share", _never_run)  # refused before any timing
    err = io.StringIO()
    monkeypatch.setattr(calibrate_cli, "measure", _never_run)
    main = {"plan": provisioner_run, "emulator": emulator_cli.main, "profile": profile_cli.main,
            "calibrate": calibrate_cli.main}  # fmt: skip
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


def test_there_are_at_least_40_cases_and_the_readme_lists_each() -> None:
    assert len(CASES) >= 40
    readme = README.read_text(encoding="utf-8")
    missing = [readme_row(c) for c in CASES if readme_row(c) not in readme]
    assert not missing, "README.md lacks rows (python -m tests.test_bad_inputs prints them):\n" + (
        "\n".join(missing)
    )


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
