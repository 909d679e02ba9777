"""What one page fault costs while k processes fault at once on this machine's cores.

`python -m bench.lab.page_faults` (a few seconds) writes
bench/results/hosts/<host>/page-faults.md. A cold worker's first step faults in the memory its
step touches (MobileNetV2 in a crowd of 8 on 2 cores: about 155,000 pages and 1.0-1.3 s of
kernel CPU each); this asks whether a plain fault costs more while others fault at once, free
or each held to a worker's CPU share in its own group (as the emulator holds its workers). It
does not: what grows is the memory all of them hold, past the machine's fresh-memory line
(emulator/calibration/memory_probe.py), which these children's 2 GB in all stay below. Per k,
k children start together and each writes one byte into every page of a fresh MEGABYTES block;
each reports its kernel CPU and minor faults over the writes. Reported: the median child's
kernel CPU per fault, and its ratio to one child alone. A lab probe of this machine, not a
figure any plan reads.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

MEGABYTES = 256
HELD_CORES = 1.23  # a 2,176 MB worker's share, as the held-out row's workers were held
PAGE = os.sysconf("SC_PAGE_SIZE")
REPEATS = 3


def touch(start: Any, out: Any, placement: Any = None) -> None:
    """Wait for the start, fault in a fresh block page by page, report kernel CPU and faults
    (in its CPU group first, where `placement` gives one)."""
    if placement is not None:
        placement.enter()
    block = bytearray(0)  # allocate after the start so every child faults at once
    start.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    block = bytearray(MEGABYTES * 2**20)
    view = memoryview(block)
    for offset in range(0, len(block), PAGE):
        view[offset] = 1
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.put((after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt))


def one_round(k: int, limiter: Any = None, cores: float = 0.0) -> float:
    """Median over k simultaneous children of kernel seconds per fault; each in a CPU group
    of `cores` where a `limiter` (emulator.cpu.CpuLimiter) is given, as the emulator's
    workers are held."""
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    places = [limiter.place(f"fault-{k}-{i}", cores) if limiter else None for i in range(k)]
    procs = [ctx.Process(target=touch, args=(start, out, p)) for p in places]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    return statistics.median(s / max(f, 1) for s, f in results)


def main() -> None:
    from bench.predict.host import this_host
    from emulator import cpu

    cores = int(cpu.machine_cores())
    counts = sorted({1, cores, 2 * cores, 4 * cores})
    rows = {k: statistics.median(one_round(k) for _ in range(REPEATS)) for k in counts}
    alone = rows[1]
    held: dict[int, float] = {}
    with cpu.CpuLimiter(f"lambda-dnn-faults-{os.getpid()}") as limiter:
        if limiter.enforced:  # each child held to a worker's share: 2,176 MB, 1.23 vCPU
            held = {k: statistics.median(one_round(k, limiter, HELD_CORES) for _ in range(REPEATS))
                    for k in counts}  # fmt: skip
    host = this_host()["id"]
    lines = [
        f"# Page faults under concurrency on {cpu.this_machine()}",
        "",
        "| processes faulting at once | kernel µs per fault (median child) | × one alone "
        f"| each held to {HELD_CORES} cores: µs per fault |",
        "|---:|---:|---:|---:|",
        *(
            f"| {k} | {rows[k] * 1e6:.2f} | {rows[k] / alone:.2f} | "
            + (f"{held[k] * 1e6:.2f}" if k in held else "not enforced")
            + " |"
            for k in counts
        ),  # fmt: skip
        "",
        f"Each child writes one byte a page into a fresh {MEGABYTES} MB block; medians of "
        f"{REPEATS} rounds. Command: `python -m bench.lab.page_faults`.",
    ]
    text = "\n".join(lines) + "\n"
    folder = Path(__file__).resolve().parents[1] / "results" / "hosts" / host
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "page-faults.md").write_text(text)
    doc = {"free": {str(k): rows[k] for k in counts}, "held": {str(k): v for k, v in held.items()}}
    (folder / "page-faults.json").write_text(json.dumps(doc) + "\n")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
