"""`python -m functions.ps`'s command line: the flags, each refused in one line naming the bad
value (exit code 2) before the shard listens, and `main` (READY on stdout, a checkpoint on
SIGTERM)."""

from __future__ import annotations

import argparse
import logging
import math
import re
import signal
import sys
import threading

from functions.aws import S3Unreachable, naming_s3_failures
from functions.oneline import OneLineParser
from functions.ps.config import HANDSHAKE_TIMEOUT_S, MAX_UNAUTHENTICATED, PSConfig
from functions.ps.server import ParameterServer

LOG = logging.getLogger(__name__)
# The job id a HELLO must name: provisioner.parse.JOB_NAME_PATTERN (the image does not ship the
# planner; a test holds the two equal). An empty id would admit HELLOs that name no job.
JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,31}")
JOB_ID_FORMS = "1-32 letters, digits or hyphens starting with a letter, e.g. digits-demo"
# Far past any account's Lambda concurrency: a larger count is a typo, and a shard waits for
# every one of them each iteration.
MAX_WORKERS = 100_000
# S3's rule for bucket names (lowercase letters, digits, dots, hyphens; 3-63 characters).
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def build_parser() -> argparse.ArgumentParser:
    # The package docstring's first line, looked up when called: the package imports this module.
    summary = (sys.modules["functions.ps"].__doc__ or "").partition("\n")[0]
    p = OneLineParser(prog="python -m functions.ps", description=summary)
    p.add_argument("--job-id", required=True)
    p.add_argument("--shard", type=int, default=0, help="this shard's index (0-based)")
    p.add_argument("--shards", type=int, default=1, help="number of PS shards of the job")
    p.add_argument("--workers", type=int, required=True, help="n: gradients per BSP iteration")
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 on EC2)")
    p.add_argument("--port", type=int, default=0, help="0 lets the OS choose (see READY line)")
    p.add_argument("--secret-ref", required=True, help="env:NAME or a Secrets Manager id/ARN")
    p.add_argument("--model", default="", help="model zoo key (recorded, for logs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learning-rate", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--artifacts-bucket", default="", help="empty: no checkpoints")
    p.add_argument("--checkpoint-prefix", default="")
    p.add_argument("--checkpoint-every", type=int, default=0, help="iterations; 0 = on request")
    p.add_argument("--idle-timeout-s", type=float, default=900.0)
    p.add_argument("--wait-timeout-s", type=float, default=900.0)
    p.add_argument("--max-shard-mb", type=float, default=4096.0)
    p.add_argument(
        "--handshake-timeout-s",
        type=float,
        default=HANDSHAKE_TIMEOUT_S,
        help="how long a new connection may take to authenticate",
    )
    p.add_argument(
        "--max-unauthenticated",
        type=int,
        default=MAX_UNAUTHENTICATED,
        help="connections in the handshake at once; a new one evicts the oldest",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def config_from_args(args: argparse.Namespace) -> PSConfig:
    """Validate flags; raises ValueError with one line naming the bad value."""
    if not JOB_ID.fullmatch(args.job_id):
        raise ValueError(f"--job-id {args.job_id!r}: expected {JOB_ID_FORMS}")
    if not 1 <= args.workers <= MAX_WORKERS:
        raise ValueError(f"--workers {args.workers}: expected an integer from 1 to {MAX_WORKERS}")
    if args.shards < 1:
        raise ValueError(f"--shards {args.shards}: expected an integer >= 1")
    if not 0 <= args.shard < args.shards:
        raise ValueError(f"--shard {args.shard}: expected 0..{args.shards - 1}")
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port {args.port}: expected 0..65535")
    # `not x > 0` rather than `x <= 0`: NaN compares false both ways and must be refused.
    if not (math.isfinite(args.learning_rate) and args.learning_rate > 0):
        raise ValueError(f"--learning-rate {args.learning_rate}: expected a finite number > 0")
    if not 0 <= args.momentum < 1:
        raise ValueError(f"--momentum {args.momentum}: expected a number in [0, 1)")
    if args.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every {args.checkpoint_every}: expected >= 0")
    for flag in ("idle_timeout_s", "wait_timeout_s", "max_shard_mb", "handshake_timeout_s"):
        value = getattr(args, flag)
        if not (math.isfinite(value) and value > 0):
            name = "--" + flag.replace("_", "-")
            raise ValueError(f"{name} {value}: expected a finite number > 0")
    if args.max_unauthenticated < 1:
        raise ValueError(f"--max-unauthenticated {args.max_unauthenticated}: expected >= 1")
    if args.artifacts_bucket:
        _check_artifacts_bucket(args.artifacts_bucket)
    from functions.aws import resolve_secret

    return PSConfig(
        job_id=args.job_id,
        shard=args.shard,
        shards=args.shards,
        workers=args.workers,
        secret=resolve_secret(args.secret_ref),
        host=args.host,
        port=args.port,
        model=args.model,
        seed=args.seed,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
        artifacts_bucket=args.artifacts_bucket,
        checkpoint_prefix=args.checkpoint_prefix,
        checkpoint_every=args.checkpoint_every,
        idle_timeout_s=args.idle_timeout_s,
        wait_timeout_s=args.wait_timeout_s,
        max_shard_mb=args.max_shard_mb,
        handshake_timeout_s=args.handshake_timeout_s,
        max_unauthenticated=args.max_unauthenticated,
    )


def _check_artifacts_bucket(bucket: str) -> None:
    """ValueError unless `bucket` is a bucket name and S3 can be found: an endpoint (local S3)
    or a region (AWS). Checked before listening: without them the shard would serve and then
    fail its first checkpoint."""
    from functions.aws import s3_is_configured

    if not BUCKET_NAME.fullmatch(bucket):
        raise ValueError(
            f"--artifacts-bucket {bucket!r}: expected an S3 bucket name (3-63 lowercase letters, "
            "digits, dots or hyphens), or '' for no checkpoints"
        )
    if not s3_is_configured():
        raise ValueError(
            f"--artifacts-bucket {bucket!r}: no S3 endpoint or region is configured; set "
            "AWS_ENDPOINT_URL_S3 (a local S3) or AWS_REGION, or give '' for no checkpoints"
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s ps %(message)s"
    )
    try:
        config = config_from_args(args)
        server = ParameterServer(config)
        with naming_s3_failures():  # start() restores the newest checkpoint from S3
            host, port = server.start()
    except (ValueError, OSError) as exc:
        print(f"functions.ps: error: {exc}", file=sys.stderr)
        return 2
    except S3Unreachable as exc:
        print(f"functions.ps: error: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    # SIGTERM (EC2 stop, emulator teardown) checkpoints before leaving.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {host}:{port}", flush=True)
    while not stop.wait(0.5):
        pass
    try:
        with naming_s3_failures():
            server.checkpoint()
    except Exception as exc:  # noqa: BLE001  # the exit path must not hide the shutdown
        LOG.error("final checkpoint failed: %s", exc)
    server.stop()
    return 0
