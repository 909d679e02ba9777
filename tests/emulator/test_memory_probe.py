"""The memory probe: the fresh-memory line read from per-block costs, and one real probe."""

from __future__ import annotations

import pytest

from emulator.calibration import catalog, memory_probe
from provisioner.catalog import catalog_from_dict
from tests.emulator.test_calibrate import REFERENCE, WHERE, fake_measurements

WARM, COLD = 0.0007, 0.003  # s/MB: 2.7 and 11.7 µs a 4 KiB page, as the VM this was written on


def test_the_line_is_where_every_block_after_costs_more() -> None:
    """The first block pays the process's own first faults and is read by no median; a spell
    of slow blocks before the line is not the line."""
    costs = [0.002, WARM, WARM, 0.0025, WARM, WARM, WARM, COLD, COLD, COLD, COLD]
    got = memory_probe.fresh_memory_figures(costs, chunk_mb=128)
    assert got.warm_mb == 7 * 128
    assert got.warm_s_per_mb == pytest.approx(WARM)
    assert got.cold_s_per_mb == pytest.approx(COLD)
    assert got.probed_mb == len(costs) * 128


def test_no_line_within_the_probe_is_none() -> None:
    got = memory_probe.fresh_memory_figures([0.002, WARM, WARM * 1.1, WARM * 0.9], chunk_mb=128)
    assert got.warm_mb is None and got.cold_s_per_mb is None
    assert got.warm_s_per_mb == pytest.approx(WARM)
    with pytest.raises(ValueError, match="mapped nothing"):
        memory_probe.fresh_memory_figures([])


def test_the_cap_leaves_the_machine_its_spare_memory() -> None:
    assert memory_probe.probe_cap_mb(64 * 1024) == memory_probe.CAP_MB
    assert memory_probe.probe_cap_mb(8 * 1024) == 8 * 1024 - memory_probe.SPARE_MB
    assert memory_probe.probe_cap_mb(100) == memory_probe.CHUNK_MB


def test_the_catalog_keeps_a_line_and_leaves_out_none() -> None:
    """A line found gives the catalog its three figures, which load; none gives none."""
    line = memory_probe.FreshMemory(WARM, 5504.0, COLD, 6016.0)
    with_line = catalog.build_catalog(fake_measurements(fresh_memory=line), REFERENCE, WHERE)
    lam = with_line["lambda"]
    assert lam["fresh_memory_warm_mb"]["value"] == 5504.0
    assert lam["fault_cold_s_per_mb"]["tag"] == "measured"
    loaded = catalog_from_dict(with_line)
    assert (loaded.fresh_memory_warm_mb, loaded.fault_warm_s_per_mb) == (5504.0, WARM)
    assert loaded.fault_cold_s_per_mb == COLD
    flat = memory_probe.FreshMemory(WARM, None, None, 6016.0)
    for m in (fake_measurements(fresh_memory=flat), fake_measurements()):
        doc = catalog.build_catalog(m, REFERENCE, WHERE)
        assert "fresh_memory_warm_mb" not in doc["lambda"]
        assert catalog_from_dict(doc).fresh_memory_warm_mb is None


def test_a_line_needs_all_three_figures() -> None:
    line = memory_probe.FreshMemory(WARM, 5504.0, COLD, 6016.0)
    doc = catalog.build_catalog(fake_measurements(fresh_memory=line), REFERENCE, WHERE)
    del doc["lambda"]["fault_cold_s_per_mb"]
    name = doc["name"]
    with pytest.raises(ValueError, match=f"catalog {name}: lambda.fresh_memory_warm_mb is given "
                       "without fault_cold"):  # fmt: skip
        catalog_from_dict(doc)


def test_the_probe_times_real_blocks_within_its_cap() -> None:
    """Measures this machine, so asserts only what holds anywhere: each block cost kernel time
    or none, and no more was mapped than asked."""
    got = memory_probe.measure_fresh_memory(cap_mb=3 * memory_probe.CHUNK_MB)
    assert got.probed_mb <= 3 * memory_probe.CHUNK_MB
    assert got.warm_s_per_mb >= 0.0
