"""The held-out protocol of bench.predict (no emulator run): the draw, the summary, the table,
the command's wiring and the host's id."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import bench.predict as bp
from bench.predict import cli, heldout
from bench.predict.heldout import Here, draw_cases, draw_configuration, memory_grid_mb
from bench.predict.heldout_results import heldout_summary, render_any
from bench.predict.host import cgroup_version, host_id, memory_gib
from provisioner import load_profile
from provisioner.catalog import catalog_from_dict
from tests.local_catalog import local_catalog_dict

MEMORY_MAX_MB = 2653  # this VM's local catalog: 2 cores × 0.75 × 1769 MB


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Here:
    """A 2-core machine whose local catalog is the tests' stand-in, capped as a 2-core one is."""
    doc = local_catalog_dict()
    doc["lambda"]["memory_max_mb"] = {**doc["lambda"]["memory_max_mb"], "value": MEMORY_MAX_MB}
    path = tmp_path_factory.mktemp("catalog") / "local.json"
    path.write_text(json.dumps(doc))
    return Here(catalog_from_dict(doc), path, 2.0)


def test_a_seed_draws_the_same_cases_and_another_seed_others(here: Here) -> None:
    first, again, other = draw_cases(4, 11, here), draw_cases(4, 11, here), draw_cases(4, 12, here)
    assert first.cases == again.cases and first.targets_s == again.targets_s
    assert first.cases != other.cases
    record = first.record()
    assert record["seed"] == 11 and record["cases"] == 4
    assert [d["case"] for d in record["draws"]] == [c.label for c in first.cases]


def test_many_draws_cover_every_axis_and_keep_to_the_space(here: Here) -> None:
    rng = random.Random(0)
    drawn = [draw_configuration(rng, here.catalog) for _ in range(600)]
    cases = [c for c, _ in drawn]
    assert {c.workload for c in cases} == set(heldout.WORKLOADS)
    assert {c.n for c in cases} == set(range(1, 13))
    assert {c.sync for c in cases} == {"ps", "s3"}
    assert {c.ps_count for c in cases if c.sync == "ps"} == {1, 2, 3}
    assert {c.reducers for c in cases if c.sync == "s3"} == {1, 2, 3}
    assert {c.cpu_scale for c in cases} == {"1", "auto"}
    assert {links for _, links in drawn} == {1, 2, 3}
    for c in cases:
        low = load_profile(c.workload).min_memory_mb
        assert low <= c.memory_mb <= MEMORY_MAX_MB and c.memory_mb % 64 == 0
        assert c.sync == "ps" or (1 <= c.reducers <= min(c.n, 3) and c.ps_count == 0)
    spread = [c.memory_mb for c in cases if c.workload == "digits-mlp"]
    assert min(spread) <= 640 and max(spread) >= 2400  # across the range, not one corner


def test_the_memory_grid_starts_at_the_workloads_minimum_on_64_mb_steps(here: Here) -> None:
    sizes = memory_grid_mb(1216, here.catalog)
    assert sizes[0] == 1216 and sizes[-1] == 2624
    assert all(b - a == 64 for a, b in zip(sizes, sizes[1:], strict=False))
    assert memory_grid_mb(1217, here.catalog)[0] == 1280


def test_each_case_gets_iterations_its_plan_allows_and_a_cap_for_its_links(here: Here) -> None:
    draws = draw_cases(6, 3, here)
    for case in draws.cases:
        most = here.most_iterations(case)
        assert 1 <= case.iterations <= most  # the plan's sense check: k ≤ ⌈n_t·e / b_g⌉
        if case.per_invocation:
            links = -(-case.iterations // case.per_invocation)
            assert 1 <= links <= 3
        bp.plan_of(case, None, here.path)  # the case plans as drawn


def test_a_draw_that_cannot_run_is_drawn_again_and_counted(here: Here) -> None:
    refused: list[bp.Case] = []

    def refuse_three(case: bp.Case, links: int, where: Here) -> str | None:
        if len(refused) < 3:
            refused.append(case)
            return "no plan"
        return heldout.why_not(case, links, where)

    draws = draw_cases(1, 5, here, refuse=refuse_three)
    assert draws.record()["redrawn"] == 3 and draws.redrawn == {"no plan": 3}
    assert draws.cases[0] not in refused


def test_why_not_names_a_configuration_the_planner_or_the_run_cannot_take(here: Here) -> None:
    more_reducers_than_workers = bp.Case("digits-mlp", 1, 1024, 0, sync="s3", reducers=2)
    assert heldout.why_not(more_reducers_than_workers, 1, here) == "no plan"
    mobilenet = bp.Case("synthetic-cifar-mobilenetv2", 12, 1280, 1)
    assert heldout.why_not(mobilenet, 10**6, here) == "fewer iterations than links"
    assert heldout.why_not(bp.Case("digits-mlp", 2, 1024, 1), 1, here) is None
    with pytest.raises(ValueError, match="no runnable configuration"):
        draw_cases(1, 0, here, refuse=lambda *_: "no plan")


def test_an_aws_case_is_planned_on_lambda_2025_and_predicted_at_the_cores_it_gets(
    here: Here,
) -> None:
    case = bp.Case("digits-mlp", 6, 1769, 0, 50, sync="s3", reducers=2, cpu_scale="auto")
    plan = bp.plan_of(case, None, here.path)
    assert plan.catalog == "lambda-2025" and plan.sync == "s3" and plan.reducers == 2
    # 6 workers of one vCPU on 2 cores × 0.75: a quarter core each, as 442 MB here
    assert heldout.local_memory_mb(case, here) == round(0.25 * 1769)
    local = bp.Case("digits-mlp", 2, 1024, 2, 50)
    assert bp.plan_of(local, None, here.path).catalog == "local"
    assert heldout.local_memory_mb(local, here) == 1024


def test_old_rows_read_back_as_their_cases_and_old_labels_are_unchanged() -> None:
    old = {"workload": "digits-mlp", "n": 2, "memory_mb": 1024, "ps_count": 1,
           "iterations": 1500, "per_invocation": 500, "deadline_s": 0.0, "tight": 0.0}  # fmt: skip
    case = bp.case_of({"case": "x", "case_fields": old})
    assert case == bp.FIXED[2] and case.sync == "ps" and case.cpu_scale == "1"
    assert case.label == "digits-mlp n=2 m=1024 ps=1, 500/link"
    s3 = bp.Case("digits-mlp", 3, 1024, 0, 9, 3, sync="s3", reducers=2, cpu_scale="auto")
    assert s3.label == "digits-mlp n=3 m=1024 s3 k=2, 3/link, cpu auto"


def _row(
    case: str, measured: dict[str, float], predicted: dict[str, float], **extra: Any
) -> dict[str, Any]:
    terms = {
        t: {"predicted_local_s": predicted[t], "measured_s": measured[t]} for t in measured
    }  # fmt: skip
    total_p, total_m = predicted["total"], measured["total"]
    return {
        "case": case, "workload": "digits-mlp", "planned": False, "met_deadline": None,
        "iterations": 10, "links": [1], "terms": terms,
        "accuracy_local": {"total": 1 - abs(total_p - total_m) / total_m}, **extra,
    }  # fmt: skip


def _inside(inside: bool) -> dict[str, Any]:
    return {"level": 0.9, "low_s": 9.0, "high_s": 11.0, "inside": inside}


def _rows() -> list[dict[str, Any]]:
    a = _row("a", {"compute": 6.0, "startup": 4.0, "total": 10.0},
             {"compute": 6.5, "startup": 3.8, "total": 10.3},
             intervals_local=[_inside(True), _inside(False)])  # fmt: skip
    b = _row("b", {"compute": 15.0, "startup": 5.0, "total": 20.0},
             {"compute": 14.0, "startup": 5.0, "total": 19.0},
             intervals_local=[_inside(True), _inside(True)],
             requests_per_iteration={"measured": {"put": 4.4, "get": 10.0},
                                     "measured_runs": [{"put": 4.4, "get": 8.0},
                                                       {"put": 4.4, "get": 12.0}],
                                     "predicted_local": {"put": 4, "get": 8}})  # fmt: skip
    return [a, b]


def test_the_summary_reads_shares_coverage_and_requests_from_the_rows() -> None:
    summary = heldout_summary(_rows())
    assert summary["total"]["mean"] == pytest.approx((0.97 + 0.95) / 2)
    assert summary["total"]["worst"] == pytest.approx(0.95)
    compute = summary["abs_error_share_of_total"]["compute"]
    assert compute["mean"] == pytest.approx((0.05 + 0.05) / 2)  # 0.5/10 and 1/20, in size
    startup = summary["abs_error_share_of_total"]["startup"]
    assert startup["worst"] == pytest.approx(0.02) and startup["rows"] == 2
    cover = summary["interval_coverage"]
    assert (cover["inside"], cover["runs"], cover["levels"]) == (3, 4, [0.9])
    assert cover["coverage"] == pytest.approx(0.75)
    # billed at $5 per million PUTs and $0.40 per million GETs
    billed = (4.4 * 5 + 10.0 * 0.4) / (4 * 5 + 8 * 0.4)
    assert summary["requests_ratio"] == [
        {"case": "b", "put": pytest.approx(1.1), "get": pytest.approx(1.25),
         "billed": pytest.approx(billed), "get_runs_apart": pytest.approx(1.5)}
    ]  # fmt: skip


def test_a_run_without_intervals_says_so_and_the_table_renders_from_the_json(
    tmp_path: Path,
) -> None:
    rows = _rows()
    for r in rows:
        r.pop("intervals_local")
    meta = {
        "protocol": "held-out", "loadavg": "1 1 1", "cpu_share": "s",
        "command": "c", "repeats": 2,
        "host": {"id": "amd-epyc-2c", "cpu_model": "AMD EPYC", "cores": 2, "memory_gib": 23.5,
                 "python": "3.11", "torch": "2", "cgroup": "v1"},
        "held_out": {"seed": 7, "redrawn": 1, "redrawn_by_reason": {"no plan": 1}},
    }  # fmt: skip
    assert "interval_coverage" not in heldout_summary(rows)
    source = tmp_path / "predict-heldout.json"
    source.write_text(json.dumps({"meta": meta, "rows": rows}))
    text = render_any(source)
    assert source.with_suffix(".md").read_text() == text
    assert "AMD EPYC, 2 cores, 23.5 GiB memory; Python 3.11, torch 2; cgroup v1" in text
    assert "seed 7" in text and '{"no plan": 1}' in text
    assert "no run's report gave an interval" in text
    assert "| b | 10 | 1 |" in text and "put 4.4/4.0, get 10.0/8.0" in text
    assert "14.00/15.00 (-5.0%)" in text


def test_the_command_draws_runs_in_rounds_and_writes_under_the_hosts_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--held-out runs the draw through the grid's rounds (every case, then again) and hands
    the results to the host's folder with the seed and the draws."""
    cases = [bp.Case("digits-mlp", 2, 1024, 1, 10), bp.Case("synthetic-cifar-cnn", 1, 1024, 1, 5)]
    order: list[str] = []
    written: list[tuple[dict[str, Any], Path]] = []

    def fake_draw(count: int, seed: int, local: Path) -> heldout.Draws:
        draws = heldout.Draws(seed, cases[:count], [10.0] * count)
        draws.redrawn["no plan"] = 2
        return draws

    def fake_measure(case: bp.Case, *_: Any) -> dict[str, Any]:
        order.append(case.label)
        total = {"predicted_local_s": 1.0, "measured_s": 1.0, "predicted_aws_s": 1.0}
        return {"case": case.label, "case_fields": {}, "n": 1, "memory_mb": 1, "ps_count": 1,
                "iterations": 1, "terms": {"total": total}, "accuracy_local": {"total": 1.0},
                "deadline_s": None, "met_deadline": None, "run_s": 1.0,
                "cpu_share": "s"}  # fmt: skip

    monkeypatch.setattr(bp, "RESULTS", tmp_path)
    monkeypatch.setattr(bp, "measure", fake_measure)
    monkeypatch.setattr(bp, "draw", fake_draw)
    monkeypatch.setattr(bp, "load_catalog", lambda name: object())
    monkeypatch.setattr(bp, "keep_platform", lambda workloads, out: dict.fromkeys(workloads))
    monkeypatch.setattr(bp, "this_host", lambda: {"id": "test-host-2c"})
    monkeypatch.setattr(bp, "weed_server", lambda: contextlib.nullcontext("http://127.0.0.1:1"))
    monkeypatch.setattr(bp, "write_heldout", lambda rows, meta, folder: written.append(
        (meta, folder)) or "")  # fmt: skip
    assert bp.main(["--held-out", "2", "--seed", "7", "--reuse", "--no-anchor"]) == 0
    assert order == [cases[0].label, cases[1].label] * 2  # two runs a case by default, in rounds
    meta, folder = written[0]
    assert folder == tmp_path / "hosts" / "test-host-2c"
    assert meta["protocol"] == "held-out" and meta["repeats"] == 2
    assert meta["held_out"]["seed"] == 7 and meta["held_out"]["redrawn"] == 2
    assert meta["host"] == {"id": "test-host-2c"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--held-out", "0"], "bad --held-out 0: expected a whole number ≥ 1"),
        (["--seed", "3"], "bad --seed 3: only a held-out run"),
        (["--held-out", "2", "--seed", "-1"], "bad --seed -1"),
        (["--held-out", "2", "--quick"], "so --quick does not apply"),
        (["--held-out", "2", "--rescore"], "so --rescore does not apply"),
    ],
)
def test_bad_held_out_options_are_one_line(argv: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        bp.main(argv)


def test_a_host_is_named_by_its_cpu_model_and_cores() -> None:
    assert host_id("AMD EPYC", 2) == "amd-epyc-2c"
    assert host_id("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", 4) == "intel-xeon-e5-2686-v4-4c"
    assert memory_gib("MemTotal:       24641536 kB\n") == pytest.approx(23.5, abs=0.01)
    assert memory_gib("") is None


def test_the_cgroup_version_is_read_from_the_hierarchy(tmp_path: Path) -> None:
    assert cgroup_version(tmp_path) == "none found"
    (tmp_path / "cpu").mkdir()
    assert cgroup_version(tmp_path) == "v1"
    (tmp_path / "cgroup.controllers").write_text("cpu")
    assert cgroup_version(tmp_path) == "v2"


def test_a_held_out_run_is_rescored_against_its_own_measurements(tmp_path: Path) -> None:
    """--rescore-held-out predicts the kept run's rows again from the platform it kept: every
    measurement is the run's, the results sit beside it under their own name, and the table
    says it was re-scored."""
    kept = Path("bench/results/hosts/amd-epyc-2c")
    folder = tmp_path / "amd-epyc-2c"
    shutil.copytree(kept / "predict-heldout-platform", folder / "predict-heldout-platform")
    shutil.copy(kept / "predict-heldout.json", folder / "predict-heldout.json")
    source = folder / "predict-heldout.json"
    cli.rescore_heldout(source, "python -m bench.predict --rescore-held-out x")
    before = json.loads(source.read_text())["rows"]
    after = json.loads((folder / "predict-heldout-rescored.json").read_text())["rows"]
    assert [r["case"] for r in after] == [r["case"] for r in before]
    measured = [[r["terms"][t]["measured_s"] for t in r["terms"]] for r in before]
    assert [[r["terms"][t]["measured_s"] for t in r["terms"]] for r in after] == measured
    assert "Re-scored, nothing measured" in (folder / "predict-heldout-rescored.md").read_text()
    s3 = [(b, a) for b, a in zip(before, after, strict=True) if b.get("requests_per_iteration")]
    assert s3  # the kept run has S3 rows: their requests priced again, their counts kept
    for b, a in s3:
        assert a["requests_per_iteration"]["measured"] == b["requests_per_iteration"]["measured"]
        assert a["requests_per_iteration"]["predicted_local"]["get"] > 0


def test_a_held_out_rescoring_takes_a_catalog_what_if(tmp_path: Path) -> None:
    """--rescore-held-out --set changes every round's catalog of the kept run: the scheduler's
    tick moves a short step's wait for the cores from its compute to its communication, the
    total as it was, and the table says what was set."""
    kept = Path("bench/results/hosts/amd-epyc-2c")
    folder = tmp_path / "amd-epyc-2c"
    shutil.copytree(kept / "predict-heldout-platform", folder / "predict-heldout-platform")
    shutil.copy(kept / "predict-heldout.json", folder / "predict-heldout.json")
    source = folder / "predict-heldout.json"
    out = folder / "predict-heldout-rescored.json"

    def terms(settings: list[str]) -> list[dict[str, float]]:
        cli.rescore_heldout(source, "x", settings=settings)
        rows = json.loads(out.read_text())["rows"]
        return [{t: r["terms"][t]["predicted_local_s"] for t in r["terms"]} for r in rows]

    off, on = terms(["lambda.scheduler_tick_s=0"]), terms(["lambda.scheduler_tick_s=0.004"])
    assert "lambda.scheduler_tick_s=0.004" in json.loads(out.read_text())["meta"]["rescored"]
    assert [r["total"] for r in on] == pytest.approx([r["total"] for r in off])
    moved = [b["compute"] - a["compute"] for a, b in zip(on, off, strict=True)]
    assert all(m >= -1e-9 for m in moved) and max(moved) > 0
    for a, b, m in zip(on, off, moved, strict=True):
        assert a["communication"] - b["communication"] == pytest.approx(m, abs=1e-9)
