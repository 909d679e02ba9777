"""The profiling child's entry: `python -m emulator.profile_child <child arguments>`.

It imports the worker module before anything else, as the emulator's runner does (stdlib
only before it), so the import the child reports is `functions.worker.IMPORT_S`, the figure a
run's worker reports as its cold start's import: the same start-up term by the same clock.
Entered through the profiler's command line instead, the child counted the interpreter and the
profiler's own imports (the provisioner, numpy) too: 0.3-0.5 s more than a run's start-up on 2
cores (the digits MLP's readings 2.61-2.85 s, its runs 2.48-2.52 s).
"""

from __future__ import annotations

import sys

from functions import worker  # noqa: F401  # first: its import is the cold start's (see above)


def main() -> int:
    from emulator.profiling import child

    return child.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
