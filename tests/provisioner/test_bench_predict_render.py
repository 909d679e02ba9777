"""`python -m bench.predict --render`: a committed results file's table again, measuring nothing,
with every term's miss as a share of the measured total and no negative figure."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench.predict.results import render

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_render_writes_the_table_beside_the_json_with_no_negative_figure(tmp_path: Path) -> None:
    source = tmp_path / "predict.json"
    shutil.copy(RESULTS / "predict.json", source)
    text = render(source)
    assert (tmp_path / "predict.md").read_text() == text
    summary = text[text.index("| term |") :]
    assert not re.search(r"\|\s*-\d", summary), "a negative figure in the term table"
    assert re.search(r"\d+% (over|under)", summary)


def test_render_refuses_a_file_that_is_not_results(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    with pytest.raises(ValueError, match="not a bench.predict results file"):
        render(bad)
