"""The hash locks (tools/lock.py) agree with the top-level pins and lock everything with hashes.

A lock that drifted from a pin would install something the tests never ran; an entry without a
hash would make `pip install --require-hashes` fail on a fresh machine; CUDA wheels in the image
lock would put 3 GB of nvidia libraries into every Lambda image.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\],]+)==([^\s;\\]+)")


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw.split("[")[0]).lower()


def top_level_pins(path: Path) -> dict[str, str]:
    """name → version of a requirements file and the files it includes (-r), markers ignored
    except that the Linux torch pin wins (the locks are for Linux)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("-r "):
            pins.update(top_level_pins(path.parent / line[3:].strip()))
        elif (m := PIN.match(line)) and 'sys_platform != "linux"' not in line:
            pins[_name(m.group(1))] = m.group(2)
    return pins


def locked(path: Path) -> dict[str, tuple[str, int]]:
    """name → (version, number of hashes) of a uv-compiled lock."""
    entries: dict[str, tuple[str, int]] = {}
    current = None
    for line in path.read_text().splitlines():
        if m := PIN.match(line):
            current = _name(m.group(1))
            version, count = entries.get(current, (m.group(2), 0))
            entries[current] = (version, count)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, count = entries[current]
            entries[current] = (version, count + 1)
    return entries


@pytest.mark.parametrize(
    ("source", "lock"),
    [
        ("requirements-dev.txt", "requirements.lock"),
        ("requirements-synth.txt", "requirements-synth.lock"),
    ],
)
def test_every_pin_is_locked_at_its_version_and_every_entry_has_a_hash(
    source: str, lock: str
) -> None:
    pins, entries = top_level_pins(ROOT / source), locked(ROOT / lock)
    for name, version in pins.items():
        assert entries.get(name, ("missing", 0))[0] == version, (lock, name)
    assert all(count >= 1 for _, count in entries.values())
    assert len(entries) > len(pins)  # the dependencies are locked too, not just the pins


def test_the_host_lock_has_the_cpu_torch_and_no_cuda() -> None:
    entries = locked(ROOT / "requirements.lock")
    assert entries["torch"][0].endswith("+cpu")
    assert not [name for name in entries if name.startswith(("nvidia-", "cuda-", "triton"))]


def test_the_image_lock_is_the_image_pins_but_torch_and_holds_nothing_of_cuda() -> None:
    pins = top_level_pins(ROOT / "functions" / "requirements.txt")
    entries = locked(ROOT / "functions" / "requirements.lock")
    assert "torch" in pins and "torch" not in entries  # from the CPU index, by the Dockerfile
    for name, version in pins.items():
        if name != "torch":
            assert entries[name][0] == version, name
    assert all(count >= 1 for _, count in entries.values())
    assert not [name for name in entries if name.startswith(("nvidia-", "cuda-", "triton"))]
    dockerfile = (ROOT / "functions" / "Dockerfile").read_text()
    assert "--require-hashes" in dockerfile and "functions/requirements.lock" in dockerfile


def test_setup_installs_the_host_lock_with_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps" in makefile and "-r requirements.lock" in makefile
