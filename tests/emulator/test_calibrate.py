"""emulator.calibrate: the fits recover known figures, the writer's catalog loads with its
provenance, bad input is one line, and one real `--quick` run measures this machine end to end."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from bench.lab.catalog_anchor import LOOP_FIGURES
from emulator import calibrate
from emulator.calibration import (
    catalog,
    cpu_probe,
    fits,
    measurements,
    ps_probe,
    runner_probe,
    timing,
)
from provisioner.catalog import CATALOG_DIR, catalog_from_dict, load_catalog, resolve_data_path
from tests.emulator.leftovers import survivors

REFERENCE = json.loads((CATALOG_DIR / "lambda-2025.json").read_text(encoding="utf-8"))
WHERE = catalog.Provenance(machine="Test CPU, 2 cores", date="2026-11-23")
TAGS = {"measured", "policy", "copied"}


def fake_measurements(**changes: Any) -> measurements.Measurements:
    values: dict[str, Any] = {
        "cores": 2,
        "total_vcpu": 1.5,
        "cfs_period_s": 0.02,
        "cpu_share_ratio": 0.97,
        "cpu_share_note": "busy loop",
        "ps_rtt_s": 0.0003,
        "exchange_cpu_fraction": 0.4,
        "ps_request_cpu_s": 0.0003,
        "ps_mb_s": 900.0,
        "ps_aggregate_mb_s": 1500.0,
        "s3_get_latency_s": 0.004,
        "s3_get_mb_s": 400.0,
        "s3_put_latency_s": 0.006,
        "s3_put_mb_s": 120.0,
        "checkpoint_latency_s": 0.03,
        "checkpoint_mb_s": 90.0,
        "cold_start_s": 1.8,
        "launch_s": 0.4,
        "warm_start_s": 0.005,
        "init_cores": 1.55,
        "load_cpu_s": 0.3,
        "restart_s": 0.2,
        "memory_gib": 8.0,
        "arch": "x86_64",
        "repeats": 3,
    }
    values.update(changes)
    return measurements.Measurements(**values)


def _figures(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every figure (a dict with a 'value') in the document, with its path."""
    found = []
    if isinstance(node, dict):
        if "value" in node:
            return [(where, node)]
        for key, child in node.items():
            found += _figures(child, f"{where}.{key}")
    elif isinstance(node, list):
        for k, child in enumerate(node):
            found += _figures(child, f"{where}[{k}]")
    return found


# -- fits ---------------------------------------------------------------------------------------
def test_fit_exchange_recovers_rtt_and_bandwidth_exactly() -> None:
    sizes_mb = [0.07, 1.0, 10.0, 40.0]
    times_s = [2 * 0.0004 + 2 * d / 850.0 for d in sizes_mb]
    fit = fits.fit_exchange(sizes_mb, times_s)
    assert fit.latency_s == pytest.approx(0.0004, rel=1e-9)
    assert fit.mb_s == pytest.approx(850.0, rel=1e-9)
    assert (fit.bound, fit.note) == (False, "")


def test_the_round_trip_is_a_small_exchange_less_its_transfer() -> None:
    # 0.07 MB each way at 700 MB/s is 0.2 ms of the 0.5 ms exchange: 0.15 ms each way
    assert fits.rtt_from_exchange_s(0.07, 0.0005, 700.0) == pytest.approx(0.00015)
    # noise can make the exchange look faster than its bytes: no negative round trip
    assert fits.rtt_from_exchange_s(0.07, 0.0001, 700.0) == 0.0


def test_fit_request_recovers_latency_and_bandwidth_exactly() -> None:
    sizes_mb = [0.064, 1.0, 8.0, 32.0]
    times_s = [0.003 + d / 420.0 for d in sizes_mb]
    fit = fits.fit_request(sizes_mb, times_s)
    assert fit.latency_s == pytest.approx(0.003, rel=1e-9)
    assert fit.mb_s == pytest.approx(420.0, rel=1e-9)
    assert (fit.bound, fit.note) == (False, "")


def test_fit_reads_a_negative_intercept_as_zero_latency() -> None:
    fit = fits.fit_exchange([1.0, 2.0], [0.0019, 0.0039])
    assert fit.latency_s == 0.0
    assert fit.mb_s == pytest.approx(1000.0)
    assert not fit.bound


def test_fit_refuses_samples_at_one_size() -> None:
    """One size is the caller's mistake, not the machine's noise: no slope exists to bound."""
    with pytest.raises(ValueError, match="two or more distinct sizes"):
        fits.fit_exchange([1.0, 1.0], [0.1, 0.2])


# Timings a fast or busy machine gives: the same time at every size (the bytes lost in the
# latency), a time falling with size (load that came and went), a jitter around a flat line
# (a growth of a few percent of the largest time), and a spike at the smallest size.
UNMEASURABLE = {
    "flat": ([0.07, 8.0], [0.004, 0.004]),
    "decreasing": ([0.07, 1.0, 10.0, 40.0], [0.009, 0.007, 0.005, 0.004]),
    "jitter": ([0.064, 1.0, 8.0, 32.0], [0.0100, 0.0102, 0.0101, 0.0104]),
    "spike": ([0.064, 8.0, 32.0], [0.5, 0.01, 0.02]),
}


@pytest.mark.parametrize("case", sorted(UNMEASURABLE))
@pytest.mark.parametrize(
    ("fit", "legs", "what"),
    [(fits.fit_exchange, 2, "exchange"), (fits.fit_request, 1, "request")],
)
def test_a_time_that_does_not_grow_with_size_gives_the_bound_and_says_so(
    case: str, fit: Any, legs: int, what: str
) -> None:
    """No slope to read: the bandwidth is the bound legs·d/t of the largest size (the bytes
    take no longer than the whole), the latency the smallest size's time over legs, so no
    transfer is predicted faster than this machine did one; the note names the fallback."""
    sizes, times = UNMEASURABLE[case]
    got = fit(sizes, times)
    assert got.bound
    assert got.note.startswith(f"fallback, {what} time ")
    assert got.mb_s == pytest.approx(legs * sizes[-1] / times[-1])
    assert got.latency_s == pytest.approx(times[0] / legs)
    for d, t in ((sizes[0], times[0]), (sizes[-1], times[-1])):
        assert legs * got.latency_s + legs * d / got.mb_s >= t * (1 - 1e-12)


def test_the_bound_names_why_the_slope_was_not_used() -> None:
    assert "does not grow with size" in fits.fit_request([1.0, 2.0], [0.2, 0.1]).note
    shallow = fits.fit_request(*UNMEASURABLE["jitter"]).note
    assert "within a busy machine's jitter (under 10%)" in shallow
    assert "B ≥ 1·d/t of the largest size (32 MB in 0.0104 s)" in shallow


def test_a_time_of_zero_is_a_clock_that_did_not_tick_not_an_infinite_bandwidth() -> None:
    fit = fits.fit_request([0.064, 8.0], [0.0, 0.0])
    assert fit.bound and math.isfinite(fit.mb_s) and fit.mb_s == 8.0 / fits.MIN_TIME_S


def test_median_rounds_times_every_size_once_a_round_in_turn() -> None:
    """A change of load meets every size alike: calls interleave, each size's median kept."""
    calls: list[str] = []
    readings = {"a": iter([3.0, 1.0, 2.0]), "b": iter([9.0, 7.0, 8.0])}

    def timer(name: str) -> Any:
        def timed() -> float:
            calls.append(name)
            return next(readings[name])

        return timed

    assert timing.median_rounds([timer("a"), timer("b")], 3) == [2.0, 8.0]
    assert calls == ["a", "b"] * 3


def test_grown_adds_a_larger_size_up_to_the_cap() -> None:
    assert fits.grown((0.07, 8.0)) == (0.07, 8.0, 32.0)
    assert fits.grown((0.07, 8.0, 32.0)) == (0.07, 8.0, 32.0, fits.GROWTH_MAX_MB)
    assert fits.grown(ps_probe.PS_SIZES_MB) == ps_probe.PS_SIZES_MB  # at the cap already


def test_fit_growing_takes_a_larger_size_and_more_rounds_until_the_time_grows() -> None:
    """A busy first attempt (flat) is taken again with a larger size and twice the rounds; the
    line fit of that attempt is the figure, and its note says which attempt gave it."""
    asked: list[tuple[tuple[float, ...], int]] = []

    def median_times(sizes: Any, rounds: int) -> list[float]:
        asked.append((tuple(sizes), rounds))
        if len(asked) == 1:
            return [0.004 for _ in sizes]
        return [0.001 + d / 500.0 for d in sizes]

    fit = fits.fit_growing(median_times, (0.064, 8.0), 3, fits.fit_request)
    assert asked == [((0.064, 8.0), 3), ((0.064, 8.0, 32.0), 6)]
    assert not fit.bound and fit.mb_s == pytest.approx(500.0)
    assert fit.note == "read at attempt 2 of 3 (sizes 0.064/8/32 MB, median of 6 rounds)"


def test_fit_growing_ends_in_the_bound_of_its_last_attempt_and_never_raises() -> None:
    asked: list[tuple[tuple[float, ...], int]] = []

    def flat(sizes: Any, rounds: int) -> list[float]:
        asked.append((tuple(sizes), rounds))
        return [0.004 for _ in sizes]

    fit = fits.fit_growing(flat, (0.07, 8.0), 3, fits.fit_exchange)
    assert [rounds for _, rounds in asked] == [3, 6, 12]
    assert asked[-1][0] == (0.07, 8.0, 32.0, 40.0)
    assert fit.bound and fit.mb_s == pytest.approx(2 * 40.0 / 0.004)
    assert fit.note.startswith("fallback, exchange time does not grow with size: ")
    assert fit.note.endswith("; attempt 3 of 3 (sizes 0.07/8/32/40 MB, median of 12 rounds)")


def test_a_first_attempt_fit_has_no_note() -> None:
    def growing(sizes: Any, rounds: int) -> list[float]:
        return [0.001 + d / 500.0 for d in sizes]

    fit = fits.fit_growing(growing, (0.064, 8.0), 3, fits.fit_request)
    assert (fit.bound, fit.note) == (False, "")


def test_aggregate_counts_every_client_both_ways() -> None:
    # 4 clients × (10 MB up + 10 MB down) moved in 0.08 s once the two round trips are taken off
    fit = fits.aggregate_mb_s(4, 10.0, 0.08 + 2 * 0.001, 0.001)
    assert fit.mb_s == pytest.approx(1000.0) and not fit.bound


def test_an_exchange_no_longer_than_its_round_trips_gives_the_bound() -> None:
    """Noise made the round trip read longer than a whole exchange: the round trips are taken
    as 0, which bounds the bandwidth from below, and the note says so."""
    fit = fits.aggregate_mb_s(2, 1.0, 0.001, 0.001)
    assert fit.bound and fit.mb_s == pytest.approx(2 * 2 * 1.0 / 0.001)
    assert fit.note.startswith("fallback, the 2-client exchange of 0.001000 s is not longer")


def _fallback_measurements() -> measurements.Measurements:
    """Measurements from the synthetic timings above: every bandwidth a fallback."""
    ps = fits.fit_exchange(*UNMEASURABLE["flat"])
    get = fits.fit_request(*UNMEASURABLE["decreasing"])
    put = fits.fit_request(*UNMEASURABLE["jitter"])
    checkpoint = fits.fit_request(*UNMEASURABLE["spike"])
    aggregate = fits.aggregate_mb_s(4, 8.0, 0.0001, 0.001)
    notes = {"ps": ps, "aggregate": aggregate, "s3_get": get, "s3_put": put,
             "checkpoint": checkpoint}  # fmt: skip
    return fake_measurements(
        ps_mb_s=ps.mb_s,
        ps_rtt_s=fits.rtt_from_exchange_s(0.07, 0.0003, ps.mb_s),
        ps_aggregate_mb_s=max(ps.mb_s, aggregate.mb_s),
        s3_get_latency_s=get.latency_s,
        s3_get_mb_s=get.mb_s,
        s3_put_latency_s=put.latency_s,
        s3_put_mb_s=put.mb_s,
        checkpoint_latency_s=checkpoint.latency_s,
        checkpoint_mb_s=checkpoint.mb_s,
        fit_notes=tuple((key, fit.note) for key, fit in notes.items()),
    )


def test_a_catalog_of_fallbacks_is_written_sound_and_names_each_fallback(tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    doc = catalog.build_catalog(_fallback_measurements(), REFERENCE, WHERE)
    catalog.write_catalog(doc, out)
    cat = load_catalog(out)
    for value in (cat.function_ps_mb_s, cat.s3_max_mb_s, cat.s3_put_mb_s, cat.ps_s3_mb_s,
                  cat.ps_type("loopback").baseline_gbps, cat.per_flow_cap_gbps):  # fmt: skip
        assert math.isfinite(value) and value > 0
    for value in (cat.function_ps_rtt_s, cat.s3_request_s, cat.put_latency_s,
                  cat.checkpoint_latency_s):  # fmt: skip
        assert math.isfinite(value) and value >= 0
    fallbacks = {
        ".network.function_ps_mb_s": "fallback, exchange time does not grow with size",
        ".network.function_ps_rtt_s": "fallback, exchange time does not grow with size",
        ".network.per_flow_cap_gbps": "fallback, exchange time does not grow with size",
        ".network.s3_max_mb_s": "fallback, request time does not grow with size",
        ".network.s3_mb_s_intercept": "fallback, request time does not grow with size",
        ".network.s3_request_s": "fallback, request time does not grow with size",
        ".network.s3_put_mb_s": "fallback, request time grows by 3.0% of the largest time",
        ".network.s3_put_request_s": "fallback, request time grows by 3.0% of the largest time",
        ".network.ps_s3_mb_s": "fallback, request time does not grow with size",
        ".network.ps_checkpoint_request_s": "fallback, request time does not grow with size",
        ".parameter_servers.candidates[0].baseline_gbps": "fallback, the 4-client exchange",
        ".parameter_servers.candidates[0].peak_gbps": "fallback, the 4-client exchange",
    }
    sources = {where: fig["source"] for where, fig in _figures(doc)}
    for where, why in fallbacks.items():
        assert sources[where].startswith(why), where
    assert not any("fallback" in source for where, source in sources.items()
                   if where not in fallbacks)  # fmt: skip
    plain = catalog.build_catalog(fake_measurements(), REFERENCE, WHERE)
    assert not any("fallback" in fig["source"] for _, fig in _figures(plain))


def test_memory_max_is_the_workers_cores_at_1769_mb_each_but_at_least_128() -> None:
    assert fits.memory_max_mb(1.5) == 2653  # floor(1.5 × 1769)
    assert fits.memory_max_mb(0.05) == 128


# -- the catalog ---------------------------------------------------------------------------------
def test_catalog_loads_with_the_local_platforms_fixed_choices() -> None:
    cat = catalog_from_dict(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE))
    ref = catalog_from_dict(REFERENCE)
    assert cat.name == "local"
    assert cat.mb_per_vcpu == 1769
    assert cat.max_vcpu == 1.5 and cat.memory_max_mb == 2653 and cat.memory_step_mb == 1
    assert cat.memory_ceiling_mb == 2653  # written: no ceiling below what the cores buy
    assert [p.name for p in cat.ps_types] == ["loopback"] and cat.ps_default_type == "loopback"
    assert cat.ps_type("loopback").baseline_gbps == cat.ps_type("loopback").peak_gbps == 12.0
    assert cat.interface_endpoints == () and cat.endpoint_usd_per_hour == 0
    assert cat.function_ps_mb_s == 900.0 and cat.function_ps_rtt_s == 0.0003
    assert cat.exchange_cpu_fraction == 0.4 and cat.ps_request_cpu_s == 0.0003
    assert cat.s3_mb_s_intercept == cat.s3_max_mb_s == 400.0 and cat.s3_mb_s_per_memory_mb == 0
    assert cat.per_flow_cap_gbps == pytest.approx(7.2)
    # the PS's checkpoint as the shard writes it, not a bare PUT
    assert (cat.ps_s3_mb_s, cat.checkpoint_latency_s, cat.put_latency_s) == (90.0, 0.03, 0.006)
    assert (cat.invocation_timeout_s, cat.safety_margin_s) == (900, 30.0)
    assert (cat.concurrency_limit, cat.unreserved_concurrency_min, cat.ps_max_shards) == (8, 0, 4)
    assert cat.restart_s == 0.2
    # runs here land up to 1.19× their predictions: plans hold 20% of a deadline back
    assert cat.default_slack == catalog.DEFAULT_SLACK == 0.2
    # prices copied, so the planner's objective is the one of lambda-2025
    # only the machine's own architecture (the emulator cannot run the other one's workers)
    assert cat.architectures == tuple(a for a in ref.architectures if a.arch == "x86_64")
    assert cat.usd_per_request == ref.usd_per_request
    assert cat.ps_type("loopback").usd_per_hour == ref.ps_type(ref.ps_default_type).usd_per_hour
    assert cat.sfn_usd_per_transition == ref.sfn_usd_per_transition


def test_an_unread_shard_cpu_is_left_out_and_reads_as_zero() -> None:
    doc = catalog.build_catalog(fake_measurements(ps_request_cpu_s=None), REFERENCE, WHERE)
    assert "ps_request_cpu_s" not in doc["network"]
    assert catalog_from_dict(doc).ps_request_cpu_s == 0.0


def test_a_loop_reading_gives_the_round_trip_less_the_bytes_and_the_cpu_it_read() -> None:
    reading = ps_probe.LoopReading(exchange_s=0.0006, cpu_fraction=0.4, ps_request_cpu_s=2e-4)
    figures = ps_probe.loop_figures(reading, 0.07, 700.0)  # 2 × 0.07 MB at 700 MB/s = 0.2 ms
    assert figures == {
        "function_ps_rtt_s": pytest.approx(0.0002),
        "exchange_cpu_fraction": 0.4,
        "ps_request_cpu_s": 2e-4,
    }
    assert set(figures) == set(LOOP_FIGURES)
    unread = ps_probe.LoopReading(exchange_s=0.0006, cpu_fraction=0.4, ps_request_cpu_s=None)
    assert "ps_request_cpu_s" not in ps_probe.loop_figures(unread, 0.07, 700.0)


def test_process_cpu_is_read_from_proc_and_none_for_no_process() -> None:
    spent = ps_probe.process_cpu_s(os.getpid())
    assert spent is not None and 0 < spent <= time.process_time() + 0.02  # 10 ms clock ticks
    assert ps_probe.process_cpu_s(2**22 + 1) is None  # above pid_max: never a process


def test_catalog_writes_the_figures_the_model_engineer_adds() -> None:
    doc = catalog.build_catalog(fake_measurements(), REFERENCE, WHERE)
    lam = doc["lambda"]
    assert lam["cpu_throttle_period_s"]["value"] == 0.02
    assert lam["total_vcpu"]["value"] == 1.5
    # the cores n cold starts at once effectively shared (measured, not the machine's count)
    assert lam["init_cores"]["value"] == 1.55
    assert catalog.catalog_from_dict(doc).init_cores == 1.55
    assert "init_cores_by_n" not in lam  # not measured per n: init_cores at every n
    per_n = catalog.build_catalog(
        fake_measurements(init_cores_by_n=((2, 2.0), (4, 1.55), (8, 1.9))), REFERENCE, WHERE
    )
    assert per_n["lambda"]["init_cores_by_n"]["value"] == [[2, 2.0], [4, 1.55], [8, 1.9]]
    assert catalog.catalog_from_dict(per_n).init_cores_by_n == ((2, 2), (4, 1.55), (8, 1.9))
    # the import alone, the part of a start-up a crowd stretches: absent from older records
    assert "init_import_s" not in per_n["lambda"]
    assert catalog.catalog_from_dict(per_n).init_import_s is None
    timed = catalog.build_catalog(
        fake_measurements(init_cores_by_n=((2, 2.0),), init_import_s=1.04), REFERENCE, WHERE
    )
    assert timed["lambda"]["init_import_s"]["value"] == 1.04
    assert catalog.catalog_from_dict(timed).init_import_s == 1.04
    # the steps share every core (2 here), where the memories add up to total_vcpu at most
    assert catalog.catalog_from_dict(doc).compute_cores == float(fake_measurements().cores)
    assert doc["parameter_servers"]["candidates"][0]["burst_s"]["value"] == 0
    assert (lam["cold_start_s"]["value"], lam["warm_start_s"]["value"]) == (1.8, 0.005)
    assert lam["load_cpu_s"]["value"] == 0.3
    assert catalog.catalog_from_dict(doc).load_cpu_s == 0.3
    assert lam["cpu_share_achieved_ratio"]["tag"] == "measured"


def test_every_figure_carries_method_machine_date_and_a_local_tag() -> None:
    doc = catalog.build_catalog(fake_measurements(), REFERENCE, WHERE)
    figures = _figures(doc)
    assert len(figures) > 40
    for where, fig in figures:
        assert fig["tag"] in TAGS, where
        assert fig["source"] and fig["unit"], where
        assert (fig["machine"], fig["date"]) == (WHERE.machine, WHERE.date), where
    tags = {where: fig["tag"] for where, fig in figures}
    assert tags[".network.function_ps_mb_s"] == "measured"
    assert tags[".lambda.usd_per_request"] == "copied"
    assert tags[".lambda.mb_per_vcpu"] == "policy"


def test_an_unmeasurable_cpu_share_is_recorded_as_an_assumption() -> None:
    doc = catalog.build_catalog(
        fake_measurements(cpu_share_ratio=None, cpu_share_note="no cgroup v1 cpu controller at /x"),
        REFERENCE,
        WHERE,
    )
    share = doc["lambda"]["cpu_share_achieved_ratio"]
    assert (share["value"], share["tag"]) == (1.0, "policy")
    assert "no cgroup v1 cpu controller" in share["source"]


def test_write_catalog_loads_and_a_bad_document_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    catalog.write_catalog(catalog.build_catalog(fake_measurements(), REFERENCE, WHERE), out)
    assert load_catalog(out).name == "local"
    before = out.read_bytes()
    broken = catalog.build_catalog(fake_measurements(), REFERENCE, WHERE)
    del broken["network"]["function_ps_mb_s"]
    with pytest.raises(ValueError, match="function_ps_mb_s"):
        catalog.write_catalog(broken, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.json"]


def test_missing_local_catalog_says_to_run_make_calibrate(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:
        resolve_data_path("local", tmp_path, "catalog")
    message = str(err.value)
    assert "\n" not in message and "run `make calibrate`" in message


# -- CLI ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("local.txt", "expected a path ending in .json"),
        ("no-such-folder/local.json", "is not a writable folder"),
    ],
)
def test_bad_out_is_one_line_and_exit_2(
    out: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert calibrate.main(["--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_quick_run_measures_this_machine_with_real_servers(tmp_path: Path) -> None:
    marker = f"calibrate-test-{uuid.uuid4().hex}"
    out = tmp_path / "local.json"
    work = tmp_path / "tmp"
    work.mkdir()
    env = {**os.environ, "CALIBRATE_TEST_MARKER": marker, "TMPDIR": str(work)}
    done = subprocess.run(
        [sys.executable, "-m", "emulator.calibrate", "--quick", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"wrote {out}")
        cat = load_catalog(out)
        doc = json.loads(out.read_text(encoding="utf-8"))
    finally:
        assert survivors(marker, wait_s=5.0) == []
    assert list(work.iterdir()) == []  # the work folder (S3 data, logs) is gone
    assert cat.name == "local" and [p.name for p in cat.ps_types] == ["loopback"]
    measured = {w: f["value"] for w, f in _figures(doc) if f["tag"] == "measured"}
    for key in (
        ".network.function_ps_mb_s",
        ".network.function_ps_rtt_s",
        ".network.exchange_cpu_fraction",
        ".network.ps_request_cpu_s",
        ".network.s3_max_mb_s",
        ".network.ps_s3_mb_s",
        ".network.ps_checkpoint_request_s",
        ".lambda.cold_start_s",
        ".lambda.warm_start_s",
        ".lambda.load_cpu_s",
        ".lambda.restart_s",
        ".parameter_servers.candidates[0].baseline_gbps",
    ):
        assert key in measured, key
    cores = len(os.sched_getaffinity(0))
    by_n = measured.pop(".lambda.init_cores_by_n")  # the one curve: [n, cores] per n
    assert [n for n, _ in by_n] == list(runner_probe.init_counts(cores))
    assert all(1.0 <= c <= cores for _, c in by_n)
    assert cat.init_cores_by_n == tuple((float(n), float(c)) for n, c in by_n)
    assert measured[".lambda.init_import_s"] > 0 and cat.init_import_s is not None
    for where, value in measured.items():
        assert math.isfinite(value) and value >= 0, where
    for positive in (cat.function_ps_mb_s, cat.s3_max_mb_s, cat.ps_s3_mb_s, cat.max_vcpu):
        assert positive > 0
    assert doc["lambda"]["total_vcpu"]["value"] == pytest.approx(0.75 * cores)
    # Only what holds on a fast, slow or busy machine: times are positive, never how they
    # compare (the suite runs this beside other tests), and a bandwidth that could not be fit
    # is a bound its source names (a fallback), never a failed calibration.
    for start in ("cold_start_s", "warm_start_s", "load_cpu_s"):
        assert doc["lambda"][start]["value"] > 0, start
    for where, fig in _figures(doc):
        assert "fallback" not in fig["source"] or fig["source"].startswith("fallback, "), where
    assert doc["lambda"]["cold_start_s"]["machine"].endswith(f", {cores} cores")


def test_a_failed_measurement_is_one_line_and_keeps_the_old_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "local.json"
    out.write_text("old")

    folders: list[Path] = []

    def fail(quick: bool, work: Path) -> measurements.Measurements:
        folders.append(work)
        (work / "weed.log").write_text("the server's last words")
        raise TimeoutError("no 'READY' line within 60.0 s")

    monkeypatch.setattr(calibrate, "measure", fail)
    assert calibrate.main(["--quick", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    (work,) = folders
    try:
        assert err == (
            "error: calibration failed: TimeoutError: no 'READY' line within 60.0 s "
            f"(the servers' logs: {work})\n"
        )
        assert (work / "weed.log").read_text() == "the server's last words"  # kept to be read
    finally:
        shutil.rmtree(work)
    assert out.read_text() == "old"


def test_init_counts_are_one_two_and_four_runners_a_core_up_to_the_concurrency_limit() -> None:
    assert runner_probe.CONCURRENCY_LIMIT == 8
    assert runner_probe.init_counts(1) == (1, 2, 4)
    assert runner_probe.init_counts(2) == (2, 4, 8)
    assert runner_probe.init_counts(4) == (4, 8)  # not 16 runners: no plan starts more than 8
    assert runner_probe.init_counts(16) == (8,)


def test_the_single_init_cores_figure_is_the_curve_at_two_runners_a_core() -> None:
    curve = ((2, 1.5), (4, 1.7), (8, 1.9))
    assert runner_probe.single_init_cores(curve, 2) == pytest.approx(1.7)  # measured at 4
    assert runner_probe.single_init_cores(curve, 3) == pytest.approx(1.8)  # between 4 and 8
    assert runner_probe.single_init_cores(((8, 1.9),), 16) == pytest.approx(1.9)  # flat beyond


@pytest.mark.parametrize(
    ("one_s", "together_s", "k", "expected"),
    [
        (1.0, 2.0, 4, 2.0),  # four starts in twice the time of one: two cores' worth
        (1.0, 2.6, 4, 4 / 2.6),  # they wait on each other: fewer cores than the machine has
        (1.0, 0.5, 4, 2.0),  # never more than the machine's cores
        (1.0, 10.0, 4, 1.0),  # never less than one
        (0.0, 1.0, 4, 2.0),  # nothing measured: the machine's cores
    ],
)
def test_parallel_init_cores_is_k_starts_over_the_time_they_took(
    one_s: float, together_s: float, k: int, expected: float
) -> None:
    assert runner_probe.parallel_init_cores(one_s, together_s, k, cores=2) == pytest.approx(
        expected
    )


def test_the_kernels_tick_is_read_from_its_config_or_assumed_with_a_reason(tmp_path: Path) -> None:
    """CONFIG_HZ from the first config that says it (gzip or plain); where none does, the
    catalog's tick is Linux's default as a policy that names why."""
    import gzip

    plain, packed = tmp_path / "config", tmp_path / "config.gz"
    plain.write_text("CONFIG_HZ_250=y\nCONFIG_HZ=250\n")
    with gzip.open(packed, "wt") as f:
        f.write("# CONFIG_HZ_PERIODIC is not set\nCONFIG_HZ=1000\n")
    assert cpu_probe.kernel_hz((str(packed), str(plain))) == (1000, str(packed))
    assert cpu_probe.kernel_hz((str(tmp_path / "none"), str(plain))) == (250, str(plain))
    hz, why = cpu_probe.kernel_hz((str(tmp_path / "none"),))
    assert hz is None and "no CONFIG_HZ" in why
    read = catalog.build_catalog(
        fake_measurements(kernel_hz=1000, kernel_hz_note="/proc/config.gz"), REFERENCE, WHERE
    )
    tick = read["lambda"]["scheduler_tick_s"]
    assert (tick["value"], tick["tag"]) == (0.001, "measured") and "CONFIG_HZ=1000" in tick[
        "source"
    ]
    assert catalog_from_dict(read).scheduler_tick_s == 0.001
    assumed = catalog.build_catalog(
        fake_measurements(kernel_hz=None, kernel_hz_note=why), REFERENCE, WHERE
    )["lambda"]["scheduler_tick_s"]
    assert (assumed["value"], assumed["tag"]) == (0.004, "policy") and why in assumed["source"]
