"""The block child: `python -m emulator.profiling.block_child --model M --source S --batch B ...`.

It imports the worker module before anything else, as a worker's cold start does, and reads its
resident set then: the runtime's memory before any model (runtime_memory_mb). Then it enters its
CPU group (the share holds from the build on, as in emulator.profiling.child), builds the model,
times its start-up as that child does, checks that its blocks compose to it
(functions.blocks.check_blocks_compose), measures the blocks one by one on the dataset's first
`batch` samples (emulator.profiling.block_measure), and prints one JSON line for the parent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from functions import worker  # first: the runtime's memory is read after this import alone

RUNTIME_RSS_MB = worker.peak_rss_mb()  # nothing else loaded yet: the peak is the resident set


def run(args: argparse.Namespace) -> dict[str, object]:
    """The child's figures: runtime memory, start-up, each block's figures."""
    import torch

    from emulator.profiling.block_measure import measure_blocks
    from functions import datasets, models
    from functions.blocks import block_names, check_blocks_compose, model_blocks

    if args.cpu_group_procs:
        Path(args.cpu_group_procs).write_text(str(os.getpid()))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y, _ = datasets.load_source(args.source, seed=0, reader=models.dataset_reader(args.model))
    built_at_s = time.perf_counter()
    model = models.build(args.model, list(x.shape[1:]), int(y.max()) + 1, seed=0)
    startup_s = worker.IMPORT_S + time.perf_counter() - built_at_s
    # blocks that do not compute the model would give a plan whose stages train another model
    check_blocks_compose(model, list(x.shape[1:]))
    batch = torch.from_numpy(x[: args.batch])
    measured = measure_blocks(
        model_blocks(model), batch, min_steps=args.min_steps, measure_s=args.measure_s
    )
    return {
        "runtime_memory_mb": RUNTIME_RSS_MB,
        "startup_s": startup_s,
        "batch": int(batch.shape[0]),
        "threads": torch.get_num_threads(),
        "blocks": [
            {
                "name": name,
                "measured_on": index,
                "parameter_bytes": f.parameter_bytes,
                "output_bytes_per_sample": f.output_bytes_per_sample,
                "activation_bytes_per_sample": f.activation_bytes_per_sample,
                "samples_per_s": f.samples_per_s,
            }
            for name, (f, index) in zip(block_names(model), measured, strict=True)
        ],
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The child's arguments, as emulator.profiling.blocks gives them."""
    parser = argparse.ArgumentParser(prog="python -m emulator.profiling.block_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-steps", type=int, required=True)
    parser.add_argument("--measure-s", type=float, required=True)
    parser.add_argument("--cpu-group-procs")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """The child's run; a dataset or model that cannot be built is one line on stderr, exit 2."""
    from functions.formats import DatasetError
    from functions.model_spec import ModelError

    try:
        print(json.dumps(run(parse_args(argv))))
    except (DatasetError, ModelError) as err:  # its one line is the parent's (child_result)
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
