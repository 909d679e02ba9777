"""What a benchmark leaves in bench/results/: `<name>.json` (the figures), `<name>.md` (the
table) and `<name>.png` (the chart), drawn without a display."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: these machines have no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    """Lay out, write at 120 dpi and close (a benchmark draws one chart per run)."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def write_outputs(
    results: Path, name: str, doc: dict[str, Any], markdown: str, plot: Callable[[Path], None]
) -> str:
    """`<name>.json`, `<name>.md` and `<name>.png` under `results`; returns the markdown."""
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(doc, indent=1))
    (results / f"{name}.md").write_text(markdown)
    plot(results / f"{name}.png")
    return markdown
