"""bench.lab.init_cores: the cores n cold starts at once get, read from finished runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.lab import init_cores


def _report(run_id: str, n: int, startup_s: float | None, status: str = "done") -> dict:
    return {
        "run_id": run_id,
        "status": status,
        "plan": {"model": "mlp", "dataset": "digits", "local_batch": 16, "n_workers": n},
        "terms": [
            {"term": "load", "measured_s": 9.0},
            {"term": "startup", "measured_s": startup_s},
        ],
    }


def _bench(rows: list[tuple[str, int, float]], machine: str | None = "m") -> dict:
    return {
        "meta": {"machine": machine},
        "rows": [
            {"workload": w, "n": n, "terms": {"startup": {"measured_s": s}}} for w, n, s in rows
        ],
    }


def test_cores_at_n_are_n_times_one_alone_over_n_at_once_per_source_and_workload() -> None:
    """Source a ran at half source b's speed, and the CNN builds slower than the MLP: each
    reads its own one-alone time, so all four readings at n = 4 say 2 cores (4 · 1/2), and
    one at n = 2 says 1.6 (2 · 1/1.25). A workload with no run alone gives no reading."""
    runs = [
        ("a", "mlp", 1, 2.0, None), ("a", "mlp", 4, 4.0, None),
        ("a", "cnn", 1, 3.0, None), ("a", "cnn", 1, 3.2, None), ("a", "cnn", 4, 6.2, None),
        ("b", "mlp", 1, 1.0, None), ("b", "mlp", 4, 2.0, None), ("b", "mlp", 2, 1.25, None),
        ("b", "cnn", 1, 1.5, None), ("b", "cnn", 4, 3.0, None),
        ("b", "alone-never", 8, 1.0, None),
    ]  # fmt: skip
    got = init_cores.cores_by_n(runs, cores=2.0)
    assert got.by_n == ((2, 1.6), (4, 2.0)) and got.readings == 5 and got.startups == 11


def test_cores_stay_within_one_and_the_machines_cores() -> None:
    """A crowd that took longer than n one-alone start-ups is at least one core; one faster
    than one alone (noise) at most the machine's cores."""
    runs = [
        ("s", "w", 1, 1.0, None), ("s", "w", 2, 0.9, None), ("s", "w", 4, 5.0, None),
    ]  # fmt: skip
    assert init_cores.cores_by_n(runs, cores=2.0).by_n == ((2, 2.0), (4, 1.0))


def test_no_workload_run_alone_and_with_more_is_refused() -> None:
    with pytest.raises(ValueError, match="no workload ran both with one worker and with more"):
        init_cores.cores_by_n([("s", "w", 1, 1.0, None), ("t", "w", 4, 2.0, None)], cores=2.0)


def test_startups_are_read_from_reports_folders_and_bench_results(tmp_path: Path) -> None:
    """A run folder holds its report twice (report.json and the artifacts' copy) and the
    artifacts' own report.json (no terms): the run counts once. Unfinished runs and runs
    without a start-up give nothing; bench results give one reading per row."""
    runs = tmp_path / "runs"
    for i, (n, startup, status) in enumerate([(1, 1.0, "done"), (2, 1.2, "done"),
                                              (4, None, "done"), (4, 9.0, "failed")]):  # fmt: skip
        doc = json.dumps(_report(f"r{i}", n, startup, status))
        (runs / f"case-{i}" / "artifacts").mkdir(parents=True)
        (runs / f"case-{i}" / "report.json").write_text(doc)
        (runs / f"case-{i}" / "artifacts" / "report.json").write_text(doc)
    (runs / "case-0" / "artifacts" / "other").mkdir()
    (runs / "case-0" / "artifacts" / "other" / "report.json").write_text('{"accuracy": 1}')
    got = init_cores.startups_in(runs)
    assert sorted(got.values()) == [
        (str(runs), "mlp/digits/batch 16", 1, 1.0, None),
        (str(runs), "mlp/digits/batch 16", 2, 1.2, None),
    ]
    bench = tmp_path / "predict.json"
    bench.write_text(json.dumps(_bench([("digits-mlp", 1, 1.3), ("digits-mlp", 8, 5.0)])))
    assert sorted(init_cores.startups_in(bench).values()) == [
        (str(bench), "digits-mlp", 1, 1.3, "m"),
        (str(bench), "digits-mlp", 8, 5.0, "m"),
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot be read"),
        ('{"hello": 1}', "neither a run report (terms) nor bench.predict results (rows)"),
        (json.dumps(_report("r", 1, None)), "holds no finished run with a measured start-up"),
    ],
)
def test_a_file_with_no_startup_is_one_line_naming_it(
    content: str, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="x.json") as err:
        init_cores.startups_in(path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_only_this_machines_runs_count_and_runs_naming_none_are_taken(tmp_path: Path) -> None:
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps(_bench([("w", 1, 1.0), ("w", 2, 1.0)], machine="here")))
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(_bench([("w", 1, 1.0), ("w", 2, 2.0)], machine="there")))
    older = tmp_path / "older.json"
    older.write_text(json.dumps(_bench([("w", 1, 1.0), ("w", 4, 2.0)], machine=None)))
    got = init_cores.startups_from([ours, theirs, older], machine="here")
    assert sorted((s[0], s[2]) for s in got) == [
        (str(older), 1), (str(older), 4), (str(ours), 1), (str(ours), 2),
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"ran on there, not on this machine \(here\)"):
        init_cores.startups_from([theirs], machine="here")


def test_with_init_cores_replaces_the_two_figures_only() -> None:
    doc = {"lambda": {"init_cores": 1, "init_cores_by_n": 2, "cold_start_s": 3}, "network": {}}
    got = init_cores.with_init_cores(doc, {"value": "b"}, {"value": "s"})
    assert got == {
        "lambda": {"init_cores": {"value": "s"}, "init_cores_by_n": {"value": "b"},
                   "cold_start_s": 3},
        "network": {},
    }  # fmt: skip
    assert doc["lambda"]["init_cores"] == 1  # the input is not changed
