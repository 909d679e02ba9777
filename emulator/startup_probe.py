"""A handler that does nothing, in a module that imports the worker handler's module.

`python -m emulator.calibrate` invokes it through the emulator's runner to time start-up: the
first invocation of a fresh environment pays what a worker's cold start pays (interpreter,
runner, `functions.worker` with torch), a second one in the same environment the warm path.
An event with `dataset_bucket` and `dataset_prefix` instead runs the worker's load (S3 client,
manifest, shard 0 through a fresh /tmp cache) and returns the seconds it took.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import functions.worker  # noqa: F401 - imported for its cost: the cold start being timed
from functions import aws, datasets


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Return at once (start-up and dispatch), after `sleep_s` (a link that works for a while,
    so the orchestrator's poll sees it at a random phase), or time the worker's load of a tiny
    dataset."""
    if "dataset_bucket" not in event:
        time.sleep(float(event.get("sleep_s", 0.0)))
        # the worker module's own import time, the start-up a worker reports (and the emulator's
        # report measures): no spawn, no poll
        return {"ok": True, "import_s": functions.worker.IMPORT_S}
    bucket, prefix = str(event["dataset_bucket"]), str(event["dataset_prefix"])
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()  # as functions.worker.run_task times its load
        s3 = aws.s3_client()
        manifest = datasets.read_manifest(s3, bucket, prefix)
        datasets.load_shard(s3, bucket, prefix, 0, manifest, cache_dir=Path(cache))
        return {"ok": True, "load_s": time.perf_counter() - t0}
