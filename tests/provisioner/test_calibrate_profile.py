"""Calibration from a finished run: exact refits on a hand-built report, then the CLI end to end.

The report (tests/provisioner/conftest.py run_report_dict) trains 100 iterations × 32 samples in
20 s of compute at 0.75 local cores: R = 160 samples/s; communication 10 s of which 2 s wait on
the PS update: 8 s to move 2 × 4 MB × 100 iterations = 100 MB/s.
"""

from __future__ import annotations

import copy
import dataclasses
import errno
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.calibrate import alpha1_for_total, calibrate, report_of_aws_run, run_facts
from provisioner.catalog import CATALOG_DIR, catalog_from_dict, load_catalog
from provisioner.cli import run
from provisioner.plan import Goal, Plan
from provisioner.planner import build_plan
from provisioner.profile import RateCurve, load_profile, profile_from_dict
from provisioner.space import Choice, Limits
from tests.provisioner.conftest import profile_dict, run_report_dict

ROOT = Path(__file__).resolve().parents[2]
RUN = "runs/calib/report.json (job calib, 2026-11-20, n 2, 1024 MB, 0.75 local cores)"


def _calibrate(report: dict[str, Any], rtt_s: float = 0.0, **profile: Any) -> Any:
    return calibrate(profile_dict(**profile), report, "runs/calib/report.json", "2026-11-20", rtt_s)


def _points(doc: dict[str, Any], arch: str = "x86_64") -> list[tuple[float, float]]:
    return [(p["vcpu_share"], p["samples_per_s"]) for p in doc["training_rate"][arch]["points"]]


def _with_plan(**changes: Any) -> dict[str, Any]:
    report = run_report_dict()
    report["plan"].update(changes)
    return report


def _with_term(name: str, measured_s: float | None) -> dict[str, Any]:
    report = run_report_dict()
    for row in report["terms"]:
        if row["term"] == name:
            row["measured_s"] = measured_s
    return report


# --- the pure refit ------------------------------------------------------------------------------


def test_the_rate_at_the_run_share_is_added_and_the_rest_of_the_curve_kept() -> None:
    result = _calibrate(run_report_dict())
    assert _points(result.profile) == [(0.5, 100), (0.75, 160.0), (1.0, 180)]
    assert _points(result.profile, "arm64") == [(0.5, 90), (1.0, 170)]
    assert result.profile["sources"]["training_rate.x86_64.vcpu_share=0.75"] == {
        "method": f"calibrated from {RUN}: 3200 samples per worker in 20 s of measured compute",
        "date": "2026-11-20",
        "tag": "calibrated",
    }


def test_a_run_near_a_point_replaces_it_and_its_calibrated_source() -> None:
    report = run_report_dict(emulation={"worker_cores": 0.95})
    sources = {"training_rate.x86_64.vcpu_share=1": {"tag": "calibrated"}}
    result = _calibrate(report, sources=sources)
    assert _points(result.profile) == [(0.5, 100), (0.95, 160.0)]
    assert set(result.profile["sources"]) == {"training_rate.x86_64.vcpu_share=0.95", "startup_s"}
    assert "replaced the point at 1" in result.changes[0]


def test_an_aws_report_has_lambdas_share_memory_over_1769() -> None:
    report = _with_plan(memory_mb=1769)
    del report["emulation"]
    result = _calibrate(report)
    assert _points(result.profile) == [(0.5, 100), (1.0, 160.0)]
    assert "1769 MB, 1 vCPU)" in result.profile["sources"]["startup_s"]["method"]


def test_redone_iterations_count_as_trained_samples() -> None:
    report = run_report_dict(iterations={"planned": 100, "completed": 100, "redone": 25})
    assert _points(_calibrate(report).profile)[1] == (0.75, 200.0)  # 125 × 32 / 20


def test_a_linear_curve_keeps_its_slope_and_moves_through_the_run() -> None:
    linear = {"x86_64": {"linear": {"alpha1_samples_s_per_mb": 0.1, "beta1_samples_s": 5.0}}}
    report = _with_plan(memory_mb=1024)
    del report["emulation"]
    result = _calibrate(report, training_rate=linear)
    # 160 samples/s at 1,024 MB: β1 = 160 − 0.1 × 1024
    assert result.profile["training_rate"]["x86_64"] == {
        "linear": {"alpha1_samples_s_per_mb": 0.1, "beta1_samples_s": 57.6}
    }


def test_memory_keyed_points_get_a_point_at_the_memory_that_buys_the_share() -> None:
    points = {"x86_64": {"points": [{"memory_mb": 512, "samples_per_s": 50}]}}
    result = _calibrate(run_report_dict(), training_rate=points)
    # 0.75 local cores = 0.75 × 1769 MB = 1326.75, rounded to 1327 MB
    assert result.profile["training_rate"]["x86_64"]["points"] == [
        {"memory_mb": 512, "samples_per_s": 50},
        {"memory_mb": 1327, "samples_per_s": 160.0},
    ]


def test_an_architecture_the_profile_lacks_gets_a_curve_of_the_run() -> None:
    report = _with_plan(arch="arm64")
    rates = {"x86_64": profile_dict()["training_rate"]["x86_64"]}
    assert _points(_calibrate(report, training_rate=rates).profile, "arm64") == [(0.75, 160.0)]


def test_startup_is_the_first_links_measured_start_up_or_kept() -> None:
    result = _calibrate(run_report_dict())
    assert result.profile["startup_s"] == 2.5
    assert result.profile["sources"]["startup_s"]["tag"] == "calibrated"
    kept = _calibrate(_with_term("startup", None))
    assert kept.profile["startup_s"] == 5.0 and "startup_s" not in kept.profile["sources"]


def test_bandwidth_is_a_catalog_override_net_of_the_ps_update_and_round_trips() -> None:
    figure = _calibrate(run_report_dict()).catalog_override["network"]["function_ps_mb_s"]
    assert figure["value"] == 100.0
    # rtt 5 ms: 8 s − 2 × 0.005 × 100 = 7 s for 800 MB
    override = _calibrate(run_report_dict(), rtt_s=0.005).catalog_override
    assert override["network"]["function_ps_mb_s"]["value"] == 114.3
    too_short = _calibrate(_with_term("communication", 2.5), rtt_s=0.005)
    assert too_short.catalog_override == {}
    why = "the 0.5 s of communication net of the PS update are within 100 round trips of 0.005"
    assert why in too_short.changes[2]


def test_the_override_is_a_catalog_figure_that_loads_in_place() -> None:
    override = _calibrate(run_report_dict()).catalog_override
    doc = json.loads((CATALOG_DIR / "lambda-2025.json").read_text(encoding="utf-8"))
    doc["network"].update(override["network"])
    assert catalog_from_dict(doc).function_ps_mb_s == 100.0


def test_the_result_loads_as_a_profile_and_the_input_is_untouched() -> None:
    given = profile_dict()
    before = copy.deepcopy(given)
    result = calibrate(given, run_report_dict(), "r.json", "2026-11-20")
    assert given == before
    assert profile_from_dict(result.profile).startup_s == 2.5


@pytest.mark.parametrize(
    ("report", "says"),
    [
        ({"job_id": "x", "complete": True}, "is not a run report: no 'terms'"),
        (run_report_dict(status="interrupted"), "unfinished run (status 'interrupted')"),
        (_with_plan(model="mlp", dataset="digits"),
         "is a run of mlp on digits, but profile 'test-workload' is cnn on synthetic-cifar"),
        (_with_plan(workload="other"), "is a run of other, but profile 'test-workload'"),
        (run_report_dict(iterations={"completed": 0}), "completed 0 iterations"),
        (_with_term("compute", None), "has no measured compute time"),
        (run_report_dict(iterations={}), "missing field 'iterations.completed'"),
        (_with_plan(local_batch=0), "'plan.local_batch': 0 is not a whole number of at least 1"),
    ],
)  # fmt: skip
def test_a_report_that_cannot_be_refitted_from_says_why(report: Any, says: str) -> None:
    with pytest.raises(ValueError, match="report 'runs/calib/report.json'") as err:
        _calibrate(report)
    assert says in str(err.value)


# --- the CLI -------------------------------------------------------------------------------------


def _files(folder: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    (folder / "workload.json").write_text(json.dumps(profile_dict()), encoding="utf-8")
    return folder / "report.json", folder / "workload.json"


def test_cli_names_the_committed_profile_of_the_runs_model_and_writes_beside_the_report(
    tmp_path: Path,
) -> None:
    committed = (ROOT / "profiles" / "digits-mlp.json").read_bytes()
    report = _with_plan(model="mlp", dataset="digits", local_batch=16)
    (tmp_path / "report.json").write_text(json.dumps(report), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "provisioner", "calibrate", str(tmp_path / "report.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "calibrated digits-mlp from" in out.stdout
    refit = load_profile(tmp_path / "digits-mlp.calibrated.json")
    curve = refit.rate("x86_64")
    assert refit.startup_s == 2.5 and curve is not None and 0.75 in curve.vcpu_shares
    override = json.loads((tmp_path / "catalog-override.json").read_text(encoding="utf-8"))
    assert override["network"]["function_ps_mb_s"]["unit"] == "MB/s"
    assert (ROOT / "profiles" / "digits-mlp.json").read_bytes() == committed


def test_cli_out_and_catalog_take_a_profile_path_and_the_round_trip(tmp_path: Path) -> None:
    report, workload = _files(tmp_path, run_report_dict())
    out, override = tmp_path / "refit.json", tmp_path / "over.json"
    argv = ["calibrate", str(report), "--profile", str(workload), "--out", str(out)]
    argv += ["--catalog-out", str(override), "--catalog", "lambda-2025"]  # rtt 0.5 ms
    assert run(argv) == 0
    assert load_profile(out).startup_s == 2.5
    # 8 s − 2 × 0.0005 × 100 = 7.9 s for 800 MB
    assert json.loads(override.read_text())["network"]["function_ps_mb_s"]["value"] == 101.3


def test_cli_bad_report_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, workload = _files(tmp_path, run_report_dict(status="failed"))
    assert run(["calibrate", str(report), "--profile", str(workload)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "status 'failed'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "workload.json"]


def test_cli_refuses_to_write_over_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, workload = _files(tmp_path, run_report_dict())
    body = report.read_bytes()
    assert run(["calibrate", str(report), "--profile", str(workload), "--out", str(report)]) == 2
    assert "is the report itself" in capsys.readouterr().err
    assert report.read_bytes() == body


def test_cli_full_disk_keeps_the_old_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import provisioner.files

    def full_disk(source: str, target: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", target)

    report, workload = _files(tmp_path, run_report_dict())
    old = workload.read_bytes()
    monkeypatch.setattr(provisioner.files.os, "replace", full_disk)
    code = run(["calibrate", str(report), "--profile", str(workload), "--out", str(workload)])
    assert code == 1
    assert capsys.readouterr().err == (
        f"error: cannot write {str(workload)!r}: No space left on device\n"
    )
    assert workload.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "workload.json"]


def test_a_total_only_run_refits_alpha1_so_the_model_gives_that_total_back() -> None:
    """A run known by its total alone (a paper's table): α1 with which this model predicts it."""
    profile = load_profile("paper-cifar10-resnet50")
    catalog = load_catalog("lambda-2020")
    choice = Choice(4, 2048, "x86_64", "m5.large", 1)
    at_fit = build_plan(profile, catalog, choice, Goal(deadline_s=None), Limits(), job="fit")
    for slower in (1.3, 2.0):  # a measured total the committed rate is too fast for
        measured_s = at_fit.prediction.total_s * slower
        alpha1 = alpha1_for_total(profile, catalog, choice, measured_s)
        assert 0.0 < alpha1 < float(profile.rate("x86_64").alpha1_samples_s_per_mb or 0.0)
        refit = dataclasses.replace(
            profile,
            rates=(RateCurve(arch="x86_64", alpha1_samples_s_per_mb=alpha1, beta1_samples_s=0.0),),
        )
        again = build_plan(refit, catalog, choice, Goal(deadline_s=None), Limits(), job="fit")
        # At or just under the measurement: the total steps by whole checkpoint intervals.
        assert measured_s * 0.995 <= again.prediction.total_s <= measured_s


def test_a_total_the_other_terms_already_exceed_has_no_rate() -> None:
    profile = load_profile("paper-cifar10-resnet50")
    choice = Choice(8, 2560, "x86_64", "m5.large", 1)
    with pytest.raises(ValueError, match=r"measured total 200 s is not above .* other terms"):
        alpha1_for_total(profile, load_catalog("lambda-2020"), choice, 200.0)


def _aws_report(job: str = "sfn", **changes: Any) -> dict[str, Any]:
    """What functions/finalize.py writes: two ranks' link records, no terms, no plan."""

    def link(compute_s: float, comm_s: float) -> dict[str, Any]:
        timings = {"compute_s": compute_s, "communication_s": comm_s, "startup_s": 1.5,
                   "load_s": 0.25, "checkpoint_s": 0.0}  # fmt: skip
        return {"iterations_run": 50, "timings": timings}

    return {
        "job_id": job,
        "iteration": 100,
        "complete": True,
        "workers": [
            {"rank": 0, "links": [link(4.0, 3.0), link(4.0, 3.0)], "iterations_run": 100},
            {"rank": 1, "links": [link(5.0, 1.0), link(5.0, 1.0)], "iterations_run": 100},
        ],
        **changes,
    }


def _aws_plan(job: str = "sfn") -> Plan:
    from tests.stacks.conftest import make_plan

    return dataclasses.replace(make_plan(), job=job, n_workers=2, memory_mb=1769)


def test_an_aws_report_reads_its_terms_from_the_links_like_the_emulator() -> None:
    plan = _aws_plan()
    report = report_of_aws_run(_aws_report(), plan, "report.json")
    terms = {row["term"]: row["measured_s"] for row in report["terms"]}
    # compute and communication are the straggler's (rank 1), start-up the first link's
    assert (terms["compute"], terms["communication"], terms["startup"]) == (10.0, 2.0, 1.5)
    assert terms["chaining"] == 1.5 + 0.25  # the second link's start-up and reload
    assert report["iterations"] == {"completed": 100, "redone": 0}
    assert report["plan"]["local_batch"] == plan.training.local_batch
    facts = run_facts(report, "report.json")
    assert facts.share_unit == "vCPU" and facts.share_vcpu == 1.0  # Lambda's: 1,769 MB
    assert facts.samples_trained == 100 * plan.training.local_batch


@pytest.mark.parametrize(
    ("report", "says"),
    [
        (_aws_report(job="other"), "run of job 'other', the plan is job 'sfn'"),
        (_aws_report(workers=[]), "no worker link records"),
    ],
)
def test_an_aws_report_that_cannot_be_read_says_why(report: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        report_of_aws_run(report, _aws_plan(), "report.json")


def test_cli_an_aws_report_without_its_plan_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps(_aws_report()))
    assert run(["calibrate", str(report)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --plan" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
