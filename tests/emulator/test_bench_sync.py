"""bench.sync's S3 exchange on a tiny cell against the session's SeaweedFS, so it cannot rot:
the real exchange runs, its requests equal the formula, and the report has the S3 rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import s3exchange
from bench.sync import Row, write_markdown
from emulator.s3server import S3Endpoint
from tests.local_catalog import local_catalog


def test_s3_cell_is_measured_counted_and_reported(
    s3_endpoint: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prediction needs a local catalog; catalog/local.json is per machine (`make calibrate`)
    # and absent from a fresh clone, so the test's stand-in is used.
    real = s3exchange.predict_s
    monkeypatch.setattr(s3exchange, "predict_s", lambda *args: real(*args, catalog=local_catalog()))
    env = s3_endpoint.client_env()
    s3exchange.create_bucket(env)
    row = s3exchange.measure(env, 0.07, 2, 2, steps=3, tag="test")
    assert row.step_s > 0 and math.isfinite(row.predicted_s) and row.predicted_s > 0
    assert row.formula == (6, 8, 2)  # PUT n·k + k, GET 2·n·k, DELETE k
    found_gets = row.gets - row.get_misses  # every GET less the polls that found nothing
    assert (row.puts, found_gets, row.deletes) == pytest.approx(row.formula)
    ps = Row(0.07, 2, 3, ours_step_s=0.001, raw_step_s=0.0005, gloo_step_s=None)
    write_markdown([ps], [row], tmp_path / "sync.md", 1.0, (0.0, 0.0), 1)
    text = (tmp_path / "sync.md").read_text()
    assert '## The exchange through S3 (sync "s3")' in text
    assert "| 0.07 | 2 | 2 | 3 |" in text
    assert "equal to the formula in every configuration" in text
