"""bench.lab.catalog_anchor: a round's anchor of the catalog's loop figures changes only them."""

from __future__ import annotations

import json

from bench.lab import catalog_anchor
from emulator.calibration import catalog
from provisioner.catalog import catalog_from_dict
from tests.emulator.test_calibrate import REFERENCE, WHERE, fake_measurements


def test_a_loop_anchored_catalog_changes_only_the_figures_read_and_says_where() -> None:
    doc = catalog.build_catalog(fake_measurements(), REFERENCE, WHERE)
    before = json.dumps(doc)
    figures = {"function_ps_rtt_s": 0.00012, "ps_request_cpu_s": 0.0002345678}
    out = catalog_anchor.loop_anchored(doc, figures, "round 2's anchor", WHERE)
    assert json.dumps(doc) == before  # the start catalog is not touched
    assert out["network"]["function_ps_rtt_s"]["value"] == 0.00012
    assert out["network"]["ps_request_cpu_s"]["value"] == 0.000235
    assert out["network"]["ps_request_cpu_s"]["source"].startswith("round 2's anchor: 1000 ")
    assert out["network"]["ps_request_cpu_s"]["unit"] == "CPU s per push+pull"
    assert out["network"]["function_ps_rtt_s"]["date"] == WHERE.date
    for section in ("lambda", "parameter_servers"):
        assert out[section] == doc[section]
    exchange = out["network"]["exchange_cpu_fraction"]
    assert exchange == doc["network"]["exchange_cpu_fraction"]  # not read: kept
    assert catalog_from_dict(out).ps_request_cpu_s == 0.000235
