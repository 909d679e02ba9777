"""Files written whole or not at all: a full disk or an interrupt leaves the old file in place
and no partial file beside it (the OSError that ended the write names the path)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def replace_atomically(path: str | os.PathLike[str], write: Callable[[str], Any]) -> None:
    """`write(partial)` to `<path>.partial`, then rename it over `path` in one step; whatever
    fails, the partial file is removed and the error raised."""
    partial = f"{os.fspath(path)}.partial"
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    """UTF-8 `text` into `path`, whole or not at all (replace_atomically)."""
    replace_atomically(path, lambda partial: Path(partial).write_text(text, encoding="utf-8"))
