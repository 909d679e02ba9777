"""The host a run measured on: a short id its results are kept under, and what it is.

Figures from one machine say little about another (the model scored 0.96 on the machine it was
tuned on and 0.88 on another), so held-out results are kept per host:
bench/results/hosts/<host-id>/, the id from the CPU model and the cores (`amd-epyc-2c`).
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from pathlib import Path
from typing import Any

from emulator import cpu

# Words a CPU's model name carries that tell two hosts apart no better without them
NOISE_WORDS = ("(r)", "(tm)", "processor", "cpu")


def host_id(model: str | None, cores: int) -> str:
    """`<model>-<cores>c` in lower-case letters, digits and hyphens: 'AMD EPYC', 2 →
    'amd-epyc-2c'; the clock speed and trademark signs dropped."""
    text = (model or platform.machine() or "unknown").lower()
    text = re.sub(r"@.*$", "", text)  # "… @ 2.20GHz"
    for word in NOISE_WORDS:
        text = text.replace(word, " ")
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"
    return f"{slug}-{cores}c"


def cgroup_version(root: Path = Path("/sys/fs/cgroup")) -> str:
    """'v2' (a unified hierarchy), 'v1' (a cpu controller of its own) or 'none found'."""
    if (root / "cgroup.controllers").exists():
        return "v2"
    if (root / "cpu").exists() or (root / "cpu,cpuacct").exists():
        return "v1"
    return "none found"


def memory_gib(meminfo: str) -> float | None:
    """MemTotal from /proc/meminfo's text, in GiB."""
    match = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.MULTILINE)
    return None if match is None else int(match.group(1)) / 2**20


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def this_host() -> dict[str, Any]:
    """This host as the results name it: id, CPU model, cores, memory, Python, torch, cgroup."""
    model = cpu.model_name(cpu.read_cpuinfo())
    cores = int(cpu.machine_cores())
    try:
        memory = memory_gib(Path("/proc/meminfo").read_text())
    except OSError:
        memory = None
    return {
        "id": host_id(model, cores),
        "cpu_model": model or platform.machine() or "unknown",
        "cores": cores,
        "memory_gib": None if memory is None else round(memory, 1),
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "cgroup": cgroup_version(),
    }


def host_text(host: dict[str, Any]) -> str:
    """One line naming the host."""
    memory = "?" if host.get("memory_gib") is None else f"{host['memory_gib']:g} GiB"
    return (
        f"{host['cpu_model']}, {host['cores']} cores, {memory} memory; Python {host['python']}, "
        f"torch {host['torch']}; cgroup {host['cgroup']} (host id `{host['id']}`)"
    )
