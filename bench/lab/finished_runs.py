"""Finished runs named on the command line, for the catalog figures read from them.

`python -m bench.lab.catalog_from_runs --slack-from RUNS...` (bench/lab/slack.py) and
`--init-cores-from RUNS...` (bench/lab/init_cores.py) take the same RUNS: a run's report.json,
a folder of runs (searched through), or bench.predict results. This module reads them; each
figure's module says what it takes from a report or a results file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Kind = Literal["report", "bench"]


def positive(value: Any) -> float | None:
    """A finite number above 0 read from a report, as a float; None for anything else."""
    ok = isinstance(value, int | float) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def machine_named(value: Any) -> str | None:
    """The machine a report or results file names (cpu.this_machine), None where it names
    none."""
    return value if isinstance(value, str) and value else None


def _read(path: Path, option: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{option} {str(path)!r} cannot be read: {err}") from None


def _is_report(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("terms"), list)


def documents(path: Path, option: str) -> Iterator[tuple[Kind, dict[str, Any]]]:
    """("report", doc) for every run report under a folder (a run folder also holds the
    artifacts' own report.json, without terms: passed over), or for the one file given, which
    may also be bench.predict results ("bench", doc). ValueError (one line naming the file and
    `option`) for a file that cannot be read, or a file given that is neither."""
    if path.is_dir():
        for f in sorted(path.rglob("report.json")):
            if _is_report(doc := _read(f, option)):
                yield "report", doc
        return
    doc = _read(path, option)
    if _is_report(doc):
        yield "report", doc
    elif isinstance(doc, dict) and isinstance(doc.get("rows"), list):
        yield "bench", doc
    else:
        raise ValueError(
            f"{option} {str(path)!r} is neither a run report (terms) nor bench.predict results "
            "(rows)"
        )


def on_machine(
    found: Sequence[T], ran_on: Callable[[T], str | None], machine: str | None, option: str,
    why: str,
) -> list[T]:  # fmt: skip
    """The readings of `found` taken on `machine` (cpu.this_machine) or naming none (reports
    written before they did are taken as they are); all of them where `machine` is None.
    ValueError when every one ran on another machine, `why` saying what the figure is for."""
    mine = [r for r in found if machine is None or ran_on(r) in (None, machine)]
    if not mine:
        others = sorted({m for r in found if (m := ran_on(r))})
        raise ValueError(
            f"{option}: its {len(found)} runs ran on {', '.join(others)}, not on this machine "
            f"({machine}): {why}"
        )
    return mine
