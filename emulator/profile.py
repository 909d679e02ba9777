"""Measure a workload's profile on this machine: training rate per vCPU share, start-up, PS update.

`python -m emulator.profile --workload digits-mlp [--shares 0.25,0.5,1,2] [--write]`
`python -m emulator.profile --model path/to/file.py:build --dataset PATH --output P` (a new one)
`python -m emulator.profile --workload digits-mlp --anchor --output runs/demo/digits-mlp.json`

For each vCPU share a fresh process imports the worker (with whole cores, as Lambda's init phase
and the emulator's runner do) and then enters a CPU group limited to that many cores, one local
core standing for one Lambda vCPU; it times the worker's own step at the profile's local batch
(λDNN's R(m), compute only) and its loop through a loopback PS shard, and reports its start-up.
The same child, one per core at 1 vCPU, as the ranks of one BSP loop, gives the speed a worker
keeps while the machine's cores all train in lockstep (used on shared-core platforms only). The
PS update rate is timed on one core with the PS's own arithmetic. Without a CPU group the shares
cannot be held and the tool refuses to write.

`--anchor` reads a committed profile again on this machine (its rate at 0.5 and 1 vCPU and its
start-up, about a minute) and writes it with those figures as measured: a profile measured on
another machine is no estimate of this one's speed.

This module is the command line only: emulator/profiling/ holds the options, the children, the
figures, the rounds and the document.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

from emulator.profiling.document import check_fits_lambda, write_profile
from emulator.profiling.options import parser, request_of
from emulator.profiling.rounds import ProfileRound, ReadingRound


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    when = dt.datetime.now(dt.UTC).date().isoformat()
    try:
        request = request_of(args, when)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    round_: ProfileRound | ReadingRound = (
        ReadingRound(request.raw, when)
        if request.anchor
        else ProfileRound(
            request.raw, request.shares, args.repeats, args.pairs, args.measure_s, when
        )  # fmt: skip
    )
    try:
        doc: dict[str, Any] = round_.run()
        check_fits_lambda(doc)
    except ValueError as err:  # a model no Lambda function holds, or no 1-vCPU point to read
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 1 if request.anchor else 2
    except (RuntimeError, KeyError) as err:  # no CPU group, or a child's one line
        print(f"error: {err}; no profile written", file=sys.stderr)
        return 1
    try:
        if request.target is None:
            print(json.dumps(doc, indent=2) + "\n")
        else:
            write_profile(request.target, doc)
    except OSError as err:  # the old file, if any, is left as it was
        print(f"error: cannot write {err.filename or request.target}: {err.strerror or err}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
