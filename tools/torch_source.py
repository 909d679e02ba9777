"""Print the pip option that finds torch's CPU build, if its index answers; else nothing.

`requirements.txt` pins `torch==2.13.0+cpu` on Linux: PyPI's Linux wheel is the CUDA build
(about 3 GB of nvidia wheels), and the +cpu wheels are listed on the PyTorch index's page.
pip re-fetches an unreachable find-links page for every package it resolves (about 9 s each,
retrying), so `make setup` asks once here, with a 3 s connect, and passes the page to the torch
install only when it answers. Behind a mirror that already holds the +cpu wheel (this project's
CI), nothing is printed and pip's own configuration finds it.
"""

from __future__ import annotations

import socket
import sys

TORCH_WHEELS = "https://download.pytorch.org/whl/torch/"
HOST = "download.pytorch.org"


def reachable(host: str, port: int = 443, timeout_s: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def main() -> int:
    if reachable(HOST):
        print(f"--find-links {TORCH_WHEELS}")
    else:
        print(f"tools.torch_source: {HOST} unreachable; torch from pip's configured sources",
              file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
