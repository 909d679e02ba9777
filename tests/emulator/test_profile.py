"""The profiler's output is a profile the provisioner loads, with dated, machine-named sources."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from emulator import cpu
from emulator.profiling import children, rounds
from emulator.profiling.child import warmup_cpu_s, warmup_steps
from emulator.profiling.children import crowd_iterations, dataset_source
from emulator.profiling.document import (
    LAMBDA_MAX_MEMORY_MB,
    check_fits_lambda,
    new_profile,
    updated_profile,
)
from emulator.profiling.figures import (
    crowded_figures,
    crowded_step_ratio,
    crowded_warmup_iterations,
    interleaved_shares,
    lockstep_samples_s,
    lockstep_wait_fraction,
    paired_speed_ratio,
    share_point,
)
from emulator.profiling.reading import factor_at_share, share_factors
from functions.model_spec import file_digest
from provisioner import load_profile
from provisioner.profile import profile_from_dict

REPO = Path(__file__).resolve().parents[2]


def test_updated_profile_loads_and_replaces_only_measured_fields(tmp_path: Path) -> None:
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [
        {"vcpu_share": 0.5, "samples_per_s": 1000.0, "startup_s": 9.0},
        {"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0},
    ]
    doc = updated_profile(
        raw,
        points,
        4.0,
        900.0,
        "x86_64",
        "2026-11-22",
        "test machine",
        cpu_limit="cgroup v2 cpu.max",
    )
    path = tmp_path / "digits-mlp.json"
    path.write_text(json.dumps(doc))
    profile = load_profile(path)
    curve = profile.rate("x86_64")
    assert curve is not None and curve.vcpu_shares == (0.5, 1.0)
    assert curve.samples_per_s == (1000.0, 1800.0)
    assert profile.startup_s == 4.0 and profile.ps_aggregation_mb_s_per_core == 900.0
    assert profile.dataset_samples == raw["dataset_samples"]  # untouched
    assert doc["sources"]["training_rate"]["tag"] == "measured"
    assert "test machine" in doc["sources"]["training_rate"]["method"]
    assert "in a cgroup v2 cpu.max of 0.5, 1 cores" in doc["sources"]["training_rate"]["method"]
    assert doc["sources"]["training_rate"]["date"] == "2026-11-22"
    assert raw["training_rate"] != doc["training_rate"]  # the input was not mutated


def test_dataset_source_names_the_runtime_loader_sources() -> None:
    assert dataset_source("digits", 1797) == "builtin:digits"
    assert dataset_source("synthetic-cifar", 50000) == "synthetic-cifar:2048"
    # CIFAR-10 is timed on same-shaped synthetic data (the rate depends on the shape only)
    assert dataset_source("cifar10", 50000) == "synthetic-cifar:2048"
    # a user's dataset: a path in the project (read from there) or an S3 prefix
    assert dataset_source("examples/own-model/data", 0) == str(REPO / "examples/own-model/data")
    assert dataset_source("s3://bucket/cats", 0) == "s3://bucket/cats"


def test_a_new_profile_names_the_users_file_and_reads_the_data_without_timing() -> None:
    spec = "examples/own-model/model.py:build"
    settings = {"epochs": 2, "profiled_local_batch": 16, "max_global_batch": 256,
                "learning_rate": 0.05, "momentum": 0.9}  # fmt: skip
    doc = new_profile(spec, "digits", name="own", when="2026-11-24", settings=settings)
    assert doc["model"] == spec and doc["model_digest"] == file_digest(spec)
    assert (doc["input_shape"], doc["dataset_samples"]) == ([1, 8, 8], 1797)
    assert doc["dataset_bytes"] == 1797 * 64 * 4 + 1797 * 8
    # the example CNN: conv 3×3 1→16, conv 3×3 16→32, linear 32→10 (with biases), in fp32
    assert doc["model_bytes"] == 4 * ((9 * 16 + 16) + (9 * 16 * 32 + 32) + (32 * 10 + 10))
    assert doc["epochs"] == 2 and doc["sources"]["epochs"]["tag"] == "design"


def test_a_model_lambda_cannot_hold_is_refused_with_its_size() -> None:
    doc = {"model": "big.py:build", "dataset": "data", "min_memory_mb": LAMBDA_MAX_MEMORY_MB}
    check_fits_lambda(doc)  # the largest function holds it
    with pytest.raises(ValueError) as err:
        check_fits_lambda({**doc, "min_memory_mb": 12288})
    assert str(err.value) == (
        "model big.py:build on data needs 12288 MB (the peak resident set of a training step "
        "with headroom); a Lambda function has at most 10240 MB: use a smaller model or batch, "
        "or a dataset of fewer samples per worker"
    )


def test_the_measured_peak_resident_set_sets_min_memory(tmp_path: Path) -> None:
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [{"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0, "peak_rss_mb": 300.0}]
    doc = updated_profile(raw, points, 4.0, 900.0, "x86_64", "2026-11-24", "m", cpu_limit="x")
    assert doc["min_memory_mb"] == 384  # 300 MB × 1.2 = 360, in 64 MB steps
    assert doc["sources"]["min_memory_mb"]["tag"] == "measured"


def test_the_loops_extra_cpu_is_written_per_share_with_its_source() -> None:
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [
        {"vcpu_share": 0.5, "samples_per_s": 900.0, "startup_s": 4.0, "loop_extra_cpu_s": 3e-4,
         "loop_overhead_s": 9e-4},
        {"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0, "loop_extra_cpu_s": 2e-4,
         "loop_overhead_s": 5e-4},
    ]  # fmt: skip
    doc = updated_profile(raw, points, 4.0, 900.0, "x86_64", "2026-11-24", "m", cpu_limit="x")
    assert doc["loop_extra_cpu_s"] == [
        {"vcpu_share": 0.5, "cpu_s": 0.0003},
        {"vcpu_share": 1.0, "cpu_s": 0.0002},
    ]
    assert doc["sources"]["loop_extra_cpu_s"]["tag"] == "measured"
    assert profile_from_dict(doc).loop_extra_cpu == ((0.5, 0.0003), (1.0, 0.0002))
    assert doc["loop_overhead_s"] == [
        {"vcpu_share": 0.5, "s": 0.0009},
        {"vcpu_share": 1.0, "s": 0.0005},
    ]
    assert doc["sources"]["loop_overhead_s"]["tag"] == "measured"
    assert profile_from_dict(doc).loop_overhead == ((0.5, 0.0009), (1.0, 0.0005))


def test_the_repeats_go_round_the_shares_so_a_slow_spell_meets_one_of_each() -> None:
    assert interleaved_shares([1.0, 0.5, 2.0], 3) == [0.5, 1.0, 2.0] * 3
    assert interleaved_shares([1.0, 1.0], 2) == [1.0, 1.0]  # a share given twice is one share
    assert interleaved_shares([0.25], 1) == [0.25]


class FakeLimiter:
    """emulator.cpu.CpuLimiter, holding nothing: the CLI's tests fake its children."""

    enforced, mechanism = True, "cgroup v1 CFS quota"

    def __init__(self, name: str) -> None:
        pass

    def status(self) -> str:
        return "CPU share enforced: fake"

    def __enter__(self) -> FakeLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_the_profiler_measures_round_the_shares_and_writes_each_shares_median(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI itself, its children faked: the order they run in and the points it writes."""
    import contextlib

    from emulator import profile as prof

    order: list[float] = []

    def child(limiter: Any, share: float, **kwargs: Any) -> dict[str, Any]:
        order.append(share)
        slow = len(order) == 2  # the first repeat at 1 vCPU ran in a slow spell
        return {"vcpu_share": share, "samples_per_s": 1000.0 * share / (3 if slow else 1),
                "startup_s": 1.5, "warmup_iterations": 2.0, "iterations": 50,
                "loop_extra_cpu_s": 9e-4 if slow else 3e-4, "loop_overhead_s": 4e-4,
                "step_cpu_s": 1e-3, "threads": 1, "peak_rss_mb": 200.0}  # fmt: skip

    monkeypatch.setattr(cpu, "CpuLimiter", FakeLimiter)
    monkeypatch.setattr(cpu, "machine_cores", lambda: 1.0)  # no pairs, no crowds
    monkeypatch.setattr(children, "loopback_ps", lambda: contextlib.nullcontext("127.0.0.1:1"))
    monkeypatch.setattr(children, "measure_share", child)
    monkeypatch.setattr(rounds, "ps_update_mb_s", lambda: 900.0)
    out = tmp_path / "p.json"
    assert prof.main(["--workload", "digits-mlp", "--shares", "1,0.5", "--repeats", "3",
                      "--output", str(out)]) == 0  # fmt: skip
    assert order == [0.5, 1.0] * 3
    doc = json.loads(out.read_text())
    points = doc["training_rate"][platform.machine().replace("aarch64", "arm64")]["points"]
    assert [p["samples_per_s"] for p in points] == [500.0, 1000.0]  # the spell left no trace
    assert [p["cpu_s"] for p in doc["loop_extra_cpu_s"]] == [3e-4, 3e-4]


def test_a_shares_point_takes_each_figure_median_of_its_repeats_apart() -> None:
    """One repeat in a slow spell (the 3x CPU and exchange of the second run) moves no figure;
    the rate's point is the median run's, so its own fields stay together."""
    runs = [
        {"vcpu_share": 1.0, "samples_per_s": 31000.0, "startup_s": 1.5, "warmup_iterations": 4.0,
         "loop_extra_cpu_s": 2.4e-4, "loop_overhead_s": 3.5e-4, "step_cpu_s": 5.1e-4},
        {"vcpu_share": 1.0, "samples_per_s": 12000.0, "startup_s": 1.9, "warmup_iterations": 9.0,
         "loop_extra_cpu_s": 7.3e-4, "loop_overhead_s": 10.6e-4, "step_cpu_s": 13e-4},
        {"vcpu_share": 1.0, "samples_per_s": 32000.0, "startup_s": 1.4, "warmup_iterations": 5.0,
         "loop_extra_cpu_s": 2.9e-4, "loop_overhead_s": 3.8e-4, "step_cpu_s": 5.0e-4},
    ]  # fmt: skip
    point = share_point(runs)
    assert point["samples_per_s"] == 31000.0 and point["step_cpu_s"] == 5.1e-4
    assert point["startup_s"] == 1.5
    assert point["warmup_iterations"] == 5.0
    assert point["loop_extra_cpu_s"] == 2.9e-4
    assert point["loop_overhead_s"] == 3.8e-4
    assert runs[0]["loop_extra_cpu_s"] == 2.4e-4  # the runs are not changed
    # a child run without a PS shard has no loop figures, and its point has none either
    bare = [{k: v for k, v in r.items() if not k.startswith("loop_")} for r in runs]
    assert "loop_extra_cpu_s" not in share_point(bare)


def test_the_parallel_ratio_is_the_median_of_back_to_back_pairs() -> None:
    """Each together run is read against the alone run just before it: a machine that slowed by
    a quarter between the first and the later pairs still shows the sharing (0.8), where the
    first alone run against the later together runs would show 0.6."""
    pairs = [(100.0, 80.0), (75.0, 60.0), (75.0, 61.0)]
    assert paired_speed_ratio(pairs) == pytest.approx(0.8)
    # faster together only saw less noise: each pair is held to 1 before the median
    assert paired_speed_ratio([(50.0, 60.0), (50.0, 55.0), (50.0, 40.0)]) == 1.0


def test_a_crowds_children_give_their_lockstep_speed_and_median_cpu_figures() -> None:
    """The lockstep speed is the mean over the ranks of the batch over each one's step wall (a
    rank that stepped twice as long counts at half the speed); the crowd's CPU figures are the
    medians over its children."""
    children = [
        {"crowded_step_s": 0.1, "crowded_step_cpu_s": 0.09, "crowded_warmup_cpu_s": 0.5},
        {"crowded_step_s": 0.2, "crowded_step_cpu_s": 0.12, "crowded_warmup_cpu_s": 0.1},
        {"crowded_step_s": 0.4, "crowded_step_cpu_s": 0.30, "crowded_warmup_cpu_s": 0.2},
    ]
    assert lockstep_samples_s(children, 32) == pytest.approx((320 + 160 + 80) / 3)
    assert crowded_figures(children) == (0.12, 0.2)


def test_the_crowded_ratio_is_the_median_of_pairs_and_written_with_its_source() -> None:
    """A crowd's step CPU is read against the step alone timed just before it; a crowd that
    came out cheaper only saw less noise (held to 1). The profile keeps the ratio and the crowd's
    size, and the provisioner reads them."""
    assert crowded_step_ratio([(0.6e-3, 1.2e-3), (0.5e-3, 0.9e-3), (0.6e-3, 1.5e-3)]) == 2.0
    assert crowded_step_ratio([(1.0, 0.9), (1.0, 0.95), (1.0, 1.2)]) == 1.0
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [{"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0}]
    doc = updated_profile(raw, points, 4.0, 900.0, "x86_64", "2026-11-25", "m", cpu_limit="x",
                          crowd=(1.734, 4))  # fmt: skip
    assert (doc["crowded_step_ratio"], doc["crowded_processes"]) == (1.734, 4)
    assert doc["sources"]["crowded_step_ratio"]["tag"] == "measured"
    profile = profile_from_dict(doc)
    assert (profile.crowded_step_ratio, profile.crowded_processes) == (1.734, 4)
    for bad in ({"crowded_step_ratio": 0.9}, {"crowded_processes": 1}):
        with pytest.raises(ValueError, match="crowded_step_ratio"):
            profile_from_dict({**doc, **bad})


def test_the_crowds_warmup_is_in_steps_alone_and_written_only_with_its_crowd() -> None:
    """The crowd's first steps' excess CPU is read in steps of the step alone timed just before
    (the median of the pairs, at least 0); the profile keeps it beside the crowd it was
    measured in, and the provisioner reads it and refuses it without a crowd."""
    assert crowded_warmup_iterations([(0.5, 1.0), (0.4, 1.2), (0.5, 0.5)]) == 2.0
    assert crowded_warmup_iterations([(0.5, -0.2), (0.5, -0.1), (0.5, 0.1)]) == 0.0
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [{"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0}]
    args = (raw, points, 4.0, 900.0, "x86_64", "2026-11-26", "m")
    doc = updated_profile(*args, cpu_limit="x", crowd=(1.2, 4), crowd_warmup=1.234)
    assert doc["crowded_warmup_iterations"] == 1.23
    assert doc["sources"]["crowded_warmup_iterations"]["tag"] == "measured"
    assert profile_from_dict(doc).crowded_warmup_iterations == 1.23
    # no crowd, no crowd's warm-up: the field is left as it was
    kept = updated_profile(*args, cpu_limit="x", crowd=None, crowd_warmup=1.234)
    assert kept.get("crowded_warmup_iterations") == raw.get("crowded_warmup_iterations")
    no_crowd = {k: v for k, v in doc.items() if k not in ("crowded_step_ratio",
                                                            "crowded_processes")}  # fmt: skip
    with pytest.raises(ValueError, match="'crowded_warmup_iterations': 1.23 needs crowded_proc"):
        profile_from_dict(no_crowd)
    with pytest.raises(ValueError, match="'crowded_warmup_iterations': -1 is not a number in"):
        profile_from_dict({**doc, "crowded_warmup_iterations": -1})


def test_the_first_steps_excess_is_read_against_their_own_steady_half() -> None:
    """A first step that faults its memory in costs 1.5 s more; the steps after it are the
    steady ones (the median of the second half, so one slow late step does not move it)."""
    steps = [2.5, 1.2, 1.0, 1.0, 1.0, 1.0, 0.9, 1.1, 1.0, 3.0]
    assert warmup_cpu_s(steps) == pytest.approx(sum(steps) - 10 * 1.0)
    assert warmup_cpu_s([1.0] * 10) == 0.0


def test_a_crowd_runs_about_the_measuring_time_at_its_share_of_the_cores() -> None:
    # 25,000 samples/s alone at a batch of 16, 4 workers on 2 cores: ~781 iterations a second
    assert crowd_iterations(25_000.0, 16, 2, 4, 3.0) == 2344
    assert crowd_iterations(40.0, 32, 2, 4, 3.0) == 10  # slow steps: the minimum


def test_the_speed_factor_between_anchored_shares_is_linear_and_flat_outside() -> None:
    factors = {0.5: 0.9, 1.0: 1.2}
    assert factor_at_share(factors, 0.75) == pytest.approx(1.05)
    assert factor_at_share(factors, 0.56) == pytest.approx(0.936)
    assert factor_at_share(factors, 0.25) == 0.9 and factor_at_share(factors, 2.0) == 1.2
    assert factor_at_share({1.0: 1.1}, 0.3) == 1.1


def test_an_anchor_at_shares_the_profile_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no anchored share is a point of the profile"):
        share_factors({0.5: 10.0, 1.0: 20.0}, {0.75: 15.0})


def _profile_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.profile", *args],
        # --anchor starts six children (three at each of two shares): 54 s here; the guard
        # stays under pytest's 300 s a test (pyproject.toml) so a hang reports as this call
        capture_output=True, text=True, cwd=REPO, timeout=280,
    )  # fmt: skip


def test_anchor_writes_the_profile_at_this_moments_speed_or_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    """`--anchor` (make demo): the committed curve × the rate read now at each share, in a real
    CPU group, as measured; where no group can be held, exit 1 and one line, and nothing
    written."""
    out = tmp_path / "digits-mlp.json"
    done = _profile_cli("--workload", "digits-mlp", "--anchor", "--output", str(out))
    with cpu.CpuLimiter(f"lambda-dnn-test-probe-{os.getpid()}") as limiter:
        enforced = limiter.enforced
    if not enforced:
        assert done.returncode == 1 and "no profile written" in done.stderr
        assert not out.exists()
        return
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    factors = {float(k): v for k, v in doc["anchor"]["speed_factor_by_share"].items()}
    assert set(factors) == {0.5, 1.0} and min(factors.values()) > 0 and doc["startup_s"] > 0
    for before, after in zip(raw["training_rate"]["x86_64"]["points"],
                             doc["training_rate"]["x86_64"]["points"], strict=True):  # fmt: skip
        read = factors[min(max(before["vcpu_share"], 0.5), 1.0)]
        assert after["samples_per_s"] == pytest.approx(before["samples_per_s"] * read, rel=1e-3)
    assert load_profile(out).name == "digits-mlp"


@pytest.mark.parametrize(
    "args", [["--workload", "digits-mlp", "--anchor"], ["--workload", "digits-mlp", "--anchor",
                                                       "--write"]]
)  # fmt: skip
def test_anchor_without_an_output_is_refused_in_one_line(args: list[str]) -> None:
    done = _profile_cli(*args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --anchor moves an existing profile (--workload) to this moment's speed and "
        "writes it to --output (not --write: a reading of the moment is not the profile)"
    ]


def test_the_loops_exchange_is_timed_around_the_exchange_itself() -> None:
    """Through a real PS shard on loopback: the exchange's wall is timed around the exchange (a
    positive figure, well under the test's own time), the extra CPU against back-to-back steps;
    measure_s 0 runs each block's minimum number of iterations, whatever the machine's speed."""
    import types

    from emulator.profiling.child import LOOP_MIN_ITERATIONS, loop_per_iteration_s
    from emulator.profiling.children import loopback_ps
    from functions import datasets, models

    x, y, _ = datasets.load_source("builtin:digits", seed=0, reader=models.dataset_reader("mlp"))
    model = models.build("mlp", list(x.shape[1:]), int(y.max()) + 1, seed=0)
    run = types.SimpleNamespace(
        task=types.SimpleNamespace(seed=0, rank=0, local_batch=16),
        flat=models.flat_parameters(model), x=x, y=y, loss_fn=models.loss_function("mlp"),
    )  # fmt: skip
    t0 = time.perf_counter()
    with loopback_ps() as endpoint:
        started = time.perf_counter()
        extra_cpu_s, exchange_s = loop_per_iteration_s(run, endpoint, measure_s=0.0)
        looped_s = time.perf_counter() - started
    # at least LOOP_MIN_ITERATIONS exchanges fit in the loop's own wall
    assert 0 < exchange_s * LOOP_MIN_ITERATIONS < looped_s < time.perf_counter() - t0
    assert math.isfinite(extra_cpu_s)


def test_the_lockstep_wait_is_what_each_iterations_slowest_step_adds_to_the_stragglers() -> None:
    """Per iteration the straggler (the rank whose steps took longest, as a run's report picks
    it) waits for that iteration's slowest step; the mean of that, in its mean steps."""
    together = [
        {"crowded_steps_s": [0.10, 0.14, 0.10, 0.12]},  # 0.46 in all: the straggler
        {"crowded_steps_s": [0.12, 0.10, 0.11, 0.10]},  # 0.43
    ]
    waits = [0.02, 0.0, 0.01, 0.0]
    assert lockstep_wait_fraction(together) == pytest.approx((sum(waits) / 4) / (0.46 / 4))
    even = [{"crowded_steps_s": [0.1, 0.1]}, {"crowded_steps_s": [0.1, 0.1]}]
    assert lockstep_wait_fraction(even) == 0.0
    raw = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    points = [{"vcpu_share": 1.0, "samples_per_s": 1800.0, "startup_s": 4.0}]
    doc = updated_profile(raw, points, 4.0, 900.0, "x86_64", "2026-11-26", "m", cpu_limit="x",
                          parallel=(0.9, 2), lockstep_wait=0.04321,
                          parallel_readings=[0.9, 0.8123, 1.0])  # fmt: skip
    assert doc["sources"]["parallel_speed_ratio"]["readings"] == [0.9, 0.812, 1.0]  # the spread
    assert doc["lockstep_wait_fraction"] == 0.0432
    assert doc["sources"]["lockstep_wait_fraction"]["tag"] == "measured"
    assert profile_from_dict(doc).lockstep_wait_fraction == 0.0432
    with pytest.raises(ValueError, match="lockstep_wait_fraction"):
        alone = ("parallel_speed_ratio", "parallel_processes")  # no ranks to wait for
        profile_from_dict({k: v for k, v in doc.items() if k not in alone})


def test_the_childs_entry_imports_the_worker_before_the_profiler() -> None:
    """The child's start-up is the worker module's own clock of its import (IMPORT_S), as a
    run's worker reports it: its entry loads the worker first and nothing of the profiler (the
    provisioner, emulator.cpu) before it, whose imports a run's worker never pays."""
    probe = (
        "import sys, emulator.profile_child as c; "
        "print(sorted(m for m in ('provisioner', 'emulator.profiling', 'emulator.cpu') "
        "if m in sys.modules), 'functions.worker' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[] True"


def _one_child_result(share: float) -> dict[str, Any]:
    return {"vcpu_share": share, "samples_per_s": 1000.0 * share, "startup_s": 1.5,
            "warmup_iterations": 2.0, "iterations": 50, "loop_extra_cpu_s": 3e-4,
            "loop_overhead_s": 4e-4, "step_cpu_s": 1e-3, "threads": 1,
            "peak_rss_mb": 200.0}  # fmt: skip


def _fake_children(monkeypatch: pytest.MonkeyPatch, child: Any) -> Any:
    import contextlib

    from emulator import profile as prof

    monkeypatch.setattr(cpu, "CpuLimiter", FakeLimiter)
    monkeypatch.setattr(cpu, "machine_cores", lambda: 1.0)  # no pairs, no crowds
    monkeypatch.setattr(children, "loopback_ps", lambda: contextlib.nullcontext("127.0.0.1:1"))
    monkeypatch.setattr(children, "measure_share", child)
    monkeypatch.setattr(rounds, "ps_update_mb_s", lambda: 900.0)
    return prof


def test_an_output_that_is_a_folder_is_refused_before_any_profiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*_: Any, **__: Any) -> None:
        raise AssertionError("profiled before the output was checked")

    prof = _fake_children(monkeypatch, never)
    assert prof.main(["--workload", "digits-mlp", "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: bad --output {str(tmp_path)!r}: a folder; expected the path of a .json file to "
        "write the profile to\n"
    )
    (tmp_path / "a-file").write_text("x")
    assert prof.main(["--workload", "digits-mlp", "--output", str(tmp_path / "a-file/p.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_write_that_fails_after_profiling_is_one_line_and_leaves_no_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output turns into a folder while the children run: the write fails, in one line,
    and no .partial is left beside it."""
    out = tmp_path / "p.json"

    def child(limiter: Any, share: float, **kwargs: Any) -> dict[str, Any]:
        out.mkdir(exist_ok=True)
        return _one_child_result(share)

    prof = _fake_children(monkeypatch, child)
    assert prof.main(["--workload", "digits-mlp", "--shares", "1", "--repeats", "1",
                      "--output", str(out)]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: cannot write ")
    assert "Is a directory" in err.splitlines()[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"] and out.is_dir()


def test_an_output_in_a_folder_not_there_yet_is_written_with_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prof = _fake_children(monkeypatch, lambda limiter, share, **_: _one_child_result(share))
    out = tmp_path / "new" / "p.json"
    assert prof.main(["--workload", "digits-mlp", "--shares", "1", "--repeats", "1",
                      "--output", str(out)]) == 0  # fmt: skip
    assert json.loads(out.read_text())["name"] == "digits-mlp"
    assert [p.name for p in out.parent.iterdir()] == ["p.json"]


def test_a_child_that_fails_is_one_line_naming_its_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def child(limiter: Any, share: float, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError(f"profiling child at share {share} failed: bad source 'd': cannot "
                           "read 'x.npz': BadZipFile: File is not a zip file")  # fmt: skip

    prof = _fake_children(monkeypatch, child)
    assert prof.main(["--workload", "digits-mlp", "--shares", "1", "--repeats", "1"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: profiling child at share 1.0 failed: bad source 'd': cannot read 'x.npz': "
        "BadZipFile: File is not a zip file; no profile written"
    )


def test_a_child_on_a_corrupt_dataset_says_so_in_one_line_for_the_parent() -> None:
    """The real child on a re-measured profile whose dataset is corrupt (the parent does not
    read it first): exit 2 and one line naming the file, which child_result passes on."""
    from emulator.profiling.children import child_result

    corrupt = REPO / "tests" / "fixtures" / "datasets" / "corrupt-npz"
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.profile_child", "--model=mlp", f"--source={corrupt}",
         "--batch=8", "--threads=1", "--measure-s=0.1", "--cpu-group-procs="],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    with pytest.raises(RuntimeError) as err:
        child_result(proc, 1.0)
    assert proc.returncode == 2
    assert str(err.value) == (
        f"profiling child at share 1.0 failed: bad source {str(corrupt)!r}: cannot read "
        "'part-0.npz': BadZipFile: File is not a zip file"
    )


def test_the_warmup_alone_is_read_in_cpu_seconds_in_steady_steps() -> None:
    """The first steps' CPU less as many steady steps', in steady steps: 1.0 + 0.6 + 0.5 s of
    CPU against 0.5 s steps is 0.6 s more, 1.2 steps; never below 0; nothing without a step."""
    assert warmup_steps([1.0, 0.6, 0.5], 0.5) == pytest.approx(1.2)
    assert warmup_steps([0.4, 0.5], 0.5) == 0.0
    assert warmup_steps([1.0], 0.0) == 0.0
