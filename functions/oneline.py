"""The one command-line parser (the image's and the planner's): a bad flag is one line on stderr and
exit code 2."""

from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag gives one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]  # argparse returns NoReturn
        self.exit(2, f"{self.prog}: error: {message}\n")
