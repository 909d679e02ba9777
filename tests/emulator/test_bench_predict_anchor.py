"""bench.predict's catalog anchor on the real pieces: a round reads the catalog's loop figures
through real PS shards, the load's CPU-bound part through real runners and an S3 request's CPU
through the worker's own exchange (against a real S3 server) and writes the round's catalog."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import bench.predict as bp
from bench.lab import catalog_anchor
from emulator.calibration import ps_probe
from emulator.s3server import S3Endpoint
from provisioner.catalog import load_catalog
from tests.emulator.leftovers import survivors
from tests.local_catalog import local_catalog_dict


def test_a_rounds_anchor_reads_real_shards_and_loads_and_writes_a_catalog_that_loads(
    tmp_path: Path, s3_endpoint: S3Endpoint
) -> None:
    start = tmp_path / "local.json"
    start.write_text(json.dumps(local_catalog_dict()))
    out = tmp_path / "anchors" / "local-round3.json"
    t0 = time.perf_counter()
    assert bp.anchor_catalog(start, s3_endpoint, tmp_path / "work", out, 3) == out
    anchor_s = time.perf_counter() - t0
    catalog = load_catalog(out)
    doc = json.loads(out.read_text())
    for field in catalog_anchor.LOOP_FIGURES:
        figure = doc["network"][field]
        assert figure["source"].startswith("round 3's anchor of bench.predict, ")
        assert math.isfinite(figure["value"]) and figure["value"] >= 0, field
    # A real exchange: a shard's request costs CPU, and a reading's exchanges cost no more than
    # every core for the anchor's whole wall time (plus one 10 ms /proc tick) whatever the
    # machine's speed or load; a unit slip (ms for s) would not fit.
    cores = len(os.sched_getaffinity(0))
    assert 0 < catalog.ps_request_cpu_s * ps_probe.LOOP_EXCHANGES <= anchor_s * cores + 0.01
    assert 0 < catalog.exchange_cpu_fraction <= 1
    load = doc["lambda"]["load_cpu_s"]
    assert load["source"].startswith("round 3's anchor of bench.predict, ")
    # a real first load (S3 client, two GETs, np.load): not 0, and inside the anchor's wall
    assert 0 < catalog.load_cpu_s < anchor_s
    # a real S3 request costs its client CPU, less than the anchor's whole wall per request
    requests = {f: doc["network"][f] for f in catalog_anchor.REQUEST_FIGURES if f in doc["network"]}
    assert "s3_request_cpu_s" in requests
    for field, figure in requests.items():
        assert figure["source"].startswith("round 3's anchor of bench.predict, "), field
    assert 0 < catalog.s3_request_cpu_s < anchor_s
    kept = {f: doc["network"][f]["value"] for f in (*catalog_anchor.LOOP_FIGURES, *requests)}
    assert bp.anchored_figures_of(out) == {**kept, "load_cpu_s": load["value"]}
    start_doc = json.loads(start.read_text())
    for section in ("lambda", "network"):  # only the anchored figures move
        for field, figure in start_doc[section].items():
            if field not in bp.ANCHORED_FIGURES:
                assert doc[section][field] == figure, f"{section}.{field}"
    assert {k: v for k, v in doc.items() if k not in ("lambda", "network")} == {
        k: v for k, v in start_doc.items() if k not in ("lambda", "network")
    }
    # the next round reads again on the same server, into the same bucket
    again = bp.anchor_catalog(start, s3_endpoint, tmp_path / "work", out.with_name("r4.json"), 4)
    assert load_catalog(again).load_cpu_s > 0
    assert json.loads(again.read_text())["lambda"]["load_cpu_s"]["source"].startswith("round 4")
    # every shard and runner stopped: their TMPDIR, under the round's work folder, is in no
    # live environment
    assert survivors(f"TMPDIR={tmp_path / 'work'}", wait_s=5.0) == []
