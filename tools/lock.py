"""The hash locks: every package `make setup` and the image install, pinned with its hashes.

`python tools/lock.py` (`make lock`) compiles them with uv from the top-level pins:
- requirements.lock: the host (synth, emulator, tests, torch's CPU build) for CPython 3.11 on
  Linux x86_64, the platform `make setup` and CI run on. torch's +cpu wheel is on the PyTorch
  index (pip's configured sources here), so the lock holds that one platform's hashes.
- requirements-synth.lock: what `cdk synth`/`cdk deploy` need, for every platform (universal):
  a user who only deploys installs it anywhere.
- functions/requirements.lock: the image's packages but torch (universal, so x86_64 and arm64).
  The Dockerfile installs torch==<pin> and its dependencies from the PyTorch CPU index first
  (unhashed: its wheels are not reachable from here to hash, and resolving torch on PyPI would
  lock its CUDA wheels), then this lock with --require-hashes.

`python tools/lock.py --matches` exits 0 when this interpreter's platform is the host lock's,
so `make setup` installs with `--require-hashes` there and from the top-level pins elsewhere.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST_PLATFORM = ("linux", "x86_64", (3, 11))  # sys.platform, machine, Python minor version
PYPI = "https://pypi.org/simple"
# (input, output, extra uv arguments)
LOCKS = (
    ("requirements-dev.txt", "requirements.lock", ["--python-platform", "x86_64-manylinux_2_28"]),
    ("requirements-synth.txt", "requirements-synth.lock", ["--universal"]),
    ("functions/requirements.txt", "functions/requirements.lock", ["--universal"]),
)  # fmt: skip


def host_matches() -> bool:
    """Is this interpreter on the platform requirements.lock was compiled for?"""
    want_os, want_machine, want_version = HOST_PLATFORM
    return (
        sys.platform == want_os
        and platform.machine() == want_machine
        and sys.version_info[:2] == want_version
    )


def torch_wheels() -> str:
    """Where torch's +cpu wheel is listed: the PyTorch index's page, or pip's local wheels."""
    sys.path.insert(0, str(ROOT))
    from tools.torch_source import HOST, TORCH_WHEELS, reachable

    return TORCH_WHEELS if reachable(HOST) else "/opt/wheels"


def _without_torch(requirements: Path) -> str:
    """The image's requirements minus torch, as a file uv can read (see the docstring)."""
    kept = [line for line in requirements.read_text().splitlines()
            if not line.startswith("torch==")]  # fmt: skip
    out = ROOT / "functions" / ".requirements-no-torch.txt"
    out.write_text("\n".join(kept) + "\n")
    return str(out.relative_to(ROOT))


def compile_locks() -> None:
    version = ".".join(map(str, HOST_PLATFORM[2]))
    for source, out, extra in LOCKS:
        temporary = source.startswith("functions/")
        if temporary:
            source = _without_torch(ROOT / source)
        args = ["uv", "pip", "compile", source, "--generate-hashes", "--python-version", version,
                "--index-url", PYPI, "--no-header", "--quiet", "-o", out, *extra]  # fmt: skip
        if out == "requirements.lock":
            args += ["--find-links", torch_wheels()]
        try:
            subprocess.run(args, cwd=ROOT, check=True)
        finally:
            if temporary:
                (ROOT / source).unlink()
        print(f"tools.lock: wrote {out}")


def main(argv: list[str]) -> int:
    if argv == ["--matches"]:
        return 0 if host_matches() else 1
    if argv:
        print(f"tools.lock: unknown arguments {' '.join(argv)!r}; expected none or --matches",
              file=sys.stderr)  # fmt: skip
        return 2
    compile_locks()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
