"""A profile's blocks measured on this machine: `python -m emulator.profiling.blocks`.

`python -m emulator.profiling.blocks --workload digits-mlp [--shares 0.5,1,2] --write`
adds `blocks` and `runtime_memory_mb` to a profile and changes nothing else in it;
`--derive` also writes the whole-model figures from the blocks (model_bytes, training_rate,
min_memory_mb) with the start-up and PS update rate, for a model no function's step holds
(profiles/synthetic-tokens-gpt2-large.json), where no whole step can be timed.

For each share a fresh child (emulator.profiling.block_child) enters a CPU group of that many
cores, as the profiler's children do (emulator.profiling.children), builds the model and times
each block's forward + backward alone on the dataset's first `--batch` samples.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator import cpu, lifeline
from emulator.profiling.block_document import blocks_of, reused_text, with_blocks, with_whole_model
from emulator.profiling.children import REPO_ROOT, child_result, dataset_source
from emulator.profiling.document import machine_description, write_profile
from emulator.profiling.rounds import ps_update_mb_s, this_arch

DEFAULT_SHARES = "0.5,1,2"


@dataclass(frozen=True)
class BlocksRound:
    """The block children of profile `raw`: one per share, `repeats` times round the shares."""

    raw: dict[str, Any]
    shares: list[float]
    repeats: int
    batch: int
    min_steps: int
    measure_s: float

    def source(self) -> str:
        return dataset_source(self.raw["dataset"], int(self.raw["dataset_samples"]))

    def spawn(self, limiter: cpu.CpuLimiter, k: int, share: float) -> subprocess.Popen[str]:
        """The block child in a group of `share` cores (torch threads as the worker sets them)."""
        placement = limiter.place(f"blocks-{k}-{share:g}", share)
        argv = [
            sys.executable, "-m", "emulator.profiling.block_child", f"--model={self.raw['model']}",
            f"--source={self.source()}", f"--batch={self.batch}",
            f"--threads={max(1, int(share))}", f"--min-steps={self.min_steps}",
            f"--measure-s={self.measure_s}", f"--cpu-group-procs={placement.procs_file or ''}",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        return lifeline.popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip

    def run(self) -> list[dict[str, Any]]:
        """Every child's reading, with its share. RuntimeError where the shares cannot be held
        or a child failed (its one line)."""
        readings = []
        with cpu.CpuLimiter(f"lambda-dnn-blocks-{os.getpid()}") as limiter:
            if not limiter.enforced:
                raise RuntimeError(f"cannot hold the vCPU shares here: {limiter.status()}")
            for k in range(self.repeats):
                for share in sorted(self.shares):
                    load = os.getloadavg()[0]
                    readings.append({**child_result(self.spawn(limiter, k, share), share),
                                     "load_average": load})  # fmt: skip
                    say(readings[-1])
        return readings

    def method(self, readings: list[dict[str, Any]], cpu_limit: str, machine: str) -> str:
        """The source entry's method for `blocks`."""
        return (
            "measured: python -m emulator.profiling.blocks (median of the repeats); each block's "
            "forward + backward alone at batch "
            f"{self.batch} on {self.source()} (at least {self.min_steps} steps and "
            f"{self.measure_s:g} s after a warm-up step) in a {cpu_limit} of "
            f"{', '.join(f'{s:g}' for s in sorted(self.shares))} cores (1 local core = 1 Lambda "
            "vCPU), torch threads = max(1, floor(share)); activation bytes: the storages "
            "autograd saves for the block's backward (torch.autograd.graph.saved_tensors_hooks, "
            "parameters left out), per sample; "
            f"{reused_text(readings)}; {machine}; the host's load average "
            f"{readings[0]['load_average']:.1f} at the first child (a shared host's other work "
            "slows the shares above 1 most: their threads wait for each other)"
        )


def say(reading: dict[str, Any]) -> None:
    """One child's reading, one line a distinct block, on stderr."""
    for i, block in enumerate(reading["blocks"]):
        if block["measured_on"] == i:
            print(f"share {reading['vcpu_share']:>4g} {block['name']:<24} "
                  f"{block['samples_per_s']:10.3f} samples/s", file=sys.stderr)  # fmt: skip


def document(
    round_: BlocksRound, readings: list[dict[str, Any]], *, derive: bool, when: str
) -> dict[str, Any]:
    """The profile with its blocks (and with `derive`, its whole-model figures) from the
    readings."""
    arch, machine = this_arch(), machine_description()
    blocks = blocks_of(readings, arch)
    runtime_mb = statistics.median(r["runtime_memory_mb"] for r in readings)
    limit = "cgroup CPU quota"
    raw = round_.raw if not derive else {k: v for k, v in round_.raw.items() if k != "model_bytes"}
    doc = with_blocks(raw, blocks, runtime_mb,
                      method=round_.method(readings, limit, machine), when=when)  # fmt: skip
    if not derive:
        return doc
    nearest = min((r["vcpu_share"] for r in readings), key=lambda s: abs(s - 1.0))
    startup_s = statistics.median(r["startup_s"] for r in readings if r["vcpu_share"] == nearest)
    return with_whole_model(doc, arch, startup_s=startup_s, agg_mb_s=ps_update_mb_s(),
                            when=when, machine=machine)  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m emulator.profiling.blocks")
    p.add_argument("--workload", required=True, help="profiles/<name>.json or a path")
    p.add_argument("--shares", default=DEFAULT_SHARES)
    p.add_argument("--repeats", type=int, default=1, help="children per share; the median counts")
    p.add_argument(
        "--batch", type=int, help="samples a block is timed on (default: the profile's local batch)"
    )
    p.add_argument("--min-steps", type=int, default=3)
    p.add_argument("--measure-s", type=float, default=1.0)
    p.add_argument(
        "--derive",
        action="store_true",
        help="also derive model_bytes, training_rate and min_memory_mb from the blocks",
    )
    p.add_argument("--output", type=Path, help="where to write (default: print only)")
    p.add_argument(
        "--name",
        help="the written profile's name (default: the workload's own), e.g. for a "
        "copy of a profile with blocks beside the one without",
    )
    p.add_argument("--write", action="store_true", help="update the workload's own file")
    return p


def round_of(args: argparse.Namespace) -> tuple[BlocksRound, Path | None]:
    """The round the options ask for and where it writes; ValueError naming a bad option."""
    import json

    path = Path(args.workload)
    if not path.is_file():
        path = REPO_ROOT / "profiles" / f"{args.workload}.json"
    if not path.is_file():
        raise ValueError(f"bad --workload {args.workload!r}: no file {path}")
    try:
        shares = [float(s) for s in args.shares.split(",")]
    except ValueError:
        shares = []
    if not shares or not all(0 < s <= cpu.machine_cores() for s in shares):  # NaN too
        raise ValueError(f"bad --shares {args.shares!r}: expected positive numbers up to "
                         f"{cpu.machine_cores():.0f} (this machine's cores)")  # fmt: skip
    for name in ("repeats", "batch", "min_steps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"bad --{name.replace('_', '-')} {getattr(args, name)!r}: "
                             "expected a whole number, 1 or more")  # fmt: skip
    if not 0 <= args.measure_s <= 120:
        raise ValueError(f"bad --measure-s {args.measure_s!r}: expected seconds from 0 to 120")
    raw = json.loads(path.read_text())
    batch = int(raw["profiled_local_batch"]) if args.batch is None else args.batch
    round_ = BlocksRound(raw, shares, args.repeats, batch, args.min_steps, args.measure_s)
    return round_, path if args.write else args.output


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    when = dt.datetime.now(dt.UTC).date().isoformat()
    try:
        round_, target = round_of(args)
        doc = document(round_, round_.run(), derive=args.derive, when=when)
        if args.name is not None:
            doc = {**doc, "name": args.name}
    except (ValueError, RuntimeError) as err:
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 2 if isinstance(err, ValueError) else 1
    if target is None:
        import json

        print(json.dumps(doc, indent=2))
    else:
        write_profile(target, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
