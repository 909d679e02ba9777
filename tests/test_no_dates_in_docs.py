"""A results file says how much; git says when.

The README, the docs and the committed results tables carry no date and no clock time: a
stamp goes stale the moment the text is edited, and `git log` already records when each
figure was committed. The results files' meta (what the bench renderers write beside each
table) carries none either. Provenance inside data files the emulator writes (a catalog
figure's or a profile source's `date`) is not scanned here: it is part of those formats.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
# a clock time: two-digit hours (07:29, 16:25–18:13), or any hours followed by a zone
CLOCK = re.compile(r"\b(?:[01]\d|2[0-3]):[0-5]\d\b|\b\d{1,2}:\d\d\s*(?:UTC|GMT)\b")


def prose_files() -> list[Path]:
    """README.md, docs/**/*.md and bench/results/**/*.md."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted(RESULTS.rglob("*.md")),
    ]


def results_metas() -> list[Path]:
    """Every results JSON under bench/results with a top-level `meta` (a bench renderer's)."""
    found = []
    for path in sorted(RESULTS.rglob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and isinstance(doc.get("meta"), dict):
            found.append(path)
    return found


def stamps(text: str) -> list[str]:
    """Each line of `text` that holds a date or a clock time, with its line number."""
    return [
        f"{number}: {line.strip()[:120]}"
        for number, line in enumerate(text.splitlines(), 1)
        if DATE.search(line) or CLOCK.search(line)
    ]


def test_the_patterns_catch_dates_and_clock_times_and_nothing_else() -> None:
    """The scan can fail: a title with a date and a clock time is caught, figures are not."""
    assert stamps("# Held-out prediction on AMD EPYC, 2 cores (2026-11-29 07:29 UTC)")
    assert stamps("**The grid of 16:25–18:13, five runs per case**")
    assert stamps("took 87 s here, 2026-11-24")
    assert stamps("read at 9:11 UTC")
    clean = "0.952 / 0.829 over 24 rows, 1,769 MB, n = 8, 1.13–1.18×, ratio 1:2, grid 15, 95%"
    assert stamps(clean) == []


def test_the_scanned_files_are_found() -> None:
    """The globs reach the files the rule is about (an empty scan passes anything)."""
    names = {p.relative_to(ROOT).as_posix() for p in prose_files()}
    assert {"README.md", "bench/results/predict.md", "bench/results/predict-history.md"} <= names
    assert any(n.startswith("docs/") for n in names)
    assert ROOT / "bench" / "results" / "predict.json" in results_metas()


@pytest.mark.parametrize("path", prose_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_readme_docs_and_results_tables_carry_no_date_or_clock_time(path: Path) -> None:
    found = stamps(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: dates or clock times (git says when):\n" + (
        "\n".join(found)
    )


@pytest.mark.parametrize("path", results_metas(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_results_meta_carries_no_date(path: Path) -> None:
    meta = json.loads(path.read_text())["meta"]
    assert "date" not in meta, f"{path.relative_to(ROOT)}: meta has a date key"
    found = stamps(json.dumps(meta, ensure_ascii=False))
    assert not found, f"{path.relative_to(ROOT)}: meta holds a date or clock time: {found}"
