"""Datasets as equal shards in S3: `manifest.json`, `shard-NNNNN.npz` (one per worker), `test.npz`.

Sources (`load_source`):
- `builtin:digits` — scikit-learn's bundled 8×8 digits (1,797 samples, no download), as 1×8×8;
- `synthetic-cifar:<samples>` — SYNTHETIC CIFAR-shaped data (3×32×32, 10 classes: a fixed random
  template per class plus noise), for benchmarks only; the manifest says `"synthetic": true`;
- `synthetic-tokens:<samples>` — SYNTHETIC token sequences for the zoo's GPT-2 models: windows of
  256 token ids (carried as float32) from one fixed random stream, the label the next token (the
  GPT-2 vocabulary's 50,257 classes); for profiling and benchmarks only, synthetic too;
- a user's files, local or `s3://bucket/prefix` (`functions.formats`): `.npz` arrays `x` and `y`,
  class folders of images (the ImageFolder layout), or a `.csv` table of numeric features and a
  label column (`table.csv#label=<column>`; `label` by default). Each needs at least 2 classes;
- any other format, when the model file defines `read_dataset(path) -> (x, y)`: it gets the
  local path (an `s3://` prefix is first copied to TMPDIR) and returns the arrays.

`write_shards` shuffles with the seed, holds out a test split, and cuts the rest into n shards of
exactly equal size (the remainder is dropped, as BSP needs equal local batches). Workers read
only their shard through `load_shard`, cached in TMPDIR (/tmp in Lambda) after a size check.

CLI: `python -m functions.datasets shard --source builtin:digits --shards 4 --bucket B --prefix P`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from functions.formats import DatasetError, read_files
from functions.oneline import OneLineParser

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
SYNTHETIC_CIFAR_CLASSES = 10
SYNTHETIC_TOKENS_VOCAB = 50_257  # GPT-2's byte-pair vocabulary: the next token's classes
SYNTHETIC_TOKENS_SEQUENCE = 256  # tokens a sample holds (functions.zoo.GPT2_SEQUENCE says why)
SYNTHETIC_TOKENS_PERIOD = 4_096  # the stream: windows repeat, so the next token is learnable
# Generated whole in memory: the same bound as provisioner.parse.MAX_SYNTHETIC_SAMPLES (the image
# does not ship the planner; a test holds the two equal).
MAX_SYNTHETIC_SAMPLES = 60_000


@dataclass(frozen=True)
class SourceData:
    """A source's samples: x float32 (samples first), y int64, and what the manifest says of it."""

    x: np.ndarray
    y: np.ndarray
    synthetic: bool = False
    class_names: tuple[str, ...] | None = None  # None where the source does not name its classes


# -- sources ---------------------------------------------------------------------------------
def load_source(
    source: str, seed: int = 0, s3: Any = None, reader: Reader | None = None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(x float32 with samples first, y int64, synthetic?) for a source string."""
    data = read_source(source, seed, s3, reader)
    return data.x, data.y, data.synthetic


Reader = Callable[[str], Any]  # a model file's read_dataset(path) -> (x, y)


def read_source(
    source: str, seed: int = 0, s3: Any = None, reader: Reader | None = None
) -> SourceData:
    """The samples of a source string (see the module docstring); a user's files through
    `reader` when the model file brings one."""
    if source == "builtin:digits":
        from sklearn.datasets import load_digits  # ships its data; no download

        digits = load_digits()
        x = (digits.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
        return SourceData(x, digits.target.astype(np.int64))
    if source.startswith("synthetic-cifar:"):
        count = source.split(":", 1)[1]
        if not count.isdigit() or not 1 <= int(count) <= MAX_SYNTHETIC_SAMPLES:
            raise DatasetError(
                f"bad source {source!r}: expected synthetic-cifar:<samples> with samples "
                f"from 1 to {MAX_SYNTHETIC_SAMPLES}"
            )
        return SourceData(*synthetic_cifar(int(count), seed), synthetic=True)
    if source.startswith("synthetic-tokens:"):
        count = source.split(":", 1)[1]
        if not count.isdigit() or not 1 <= int(count) <= MAX_SYNTHETIC_SAMPLES:
            raise DatasetError(
                f"bad source {source!r}: expected synthetic-tokens:<samples> with samples "
                f"from 1 to {MAX_SYNTHETIC_SAMPLES}"
            )
        return SourceData(*synthetic_tokens(int(count), seed), synthetic=True)
    if reader is not None:
        return _read_with(reader, source, s3)
    loaded = read_files(source, s3)
    labels = np.unique(loaded.y)
    if len(labels) < 2:
        only = f"label {labels[0]}" if len(labels) else "no samples"
        if loaded.class_names and len(labels):
            only = f"class {loaded.class_names[int(labels[0])]!r}"
        raise DatasetError(
            f"bad source {source!r}: every sample has {only}; a classifier needs 2 classes or more"
        )
    return SourceData(loaded.x, loaded.y, class_names=loaded.class_names)


def _read_with(reader: Reader, source: str, s3: Any) -> SourceData:
    """The model file's reader on a local path (an S3 source copied to TMPDIR first), its
    arrays checked: x numeric with samples first, y whole class indices ≥ 0, as many of each."""
    local = (
        _local_copy(source, s3) if source.startswith("s3://") else contextlib.nullcontext(source)
    )
    from functions import models  # the reader is a model file's: models is loaded already

    with local as path:
        try:
            x, y = reader(path)
            x, y = np.asarray(x), np.asarray(y)
        except models.USER_CODE_ERRORS as err:  # the user's code: any error is theirs
            raise DatasetError(
                f"bad source {source!r}: the model file's read_dataset failed: "
                f"{models.named_error(err)}"
            ) from None
    wrong = ""
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.number):
        wrong = f"x is {x.dtype} shaped {x.shape}, expected numbers with samples first"
    elif y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or (len(y) and y.min() < 0):
        wrong = f"y is {y.dtype} shaped {y.shape}, expected one class index ≥ 0 per sample"
    elif len(x) != len(y):
        wrong = f"x has {len(x)} samples but y has {len(y)}"
    elif len(np.unique(y)) < 2:
        wrong = "every sample has one class; a classifier needs 2 classes or more"
    if wrong:
        raise DatasetError(f"bad source {source!r}: read_dataset returned {wrong}")
    return SourceData(x.astype(np.float32, copy=False), y.astype(np.int64, copy=False))


@contextlib.contextmanager
def _local_copy(source: str, s3: Any) -> Iterator[str]:
    """The objects under an `s3://bucket/prefix` copied to a fresh TMPDIR folder, their paths
    below the prefix kept: that folder (or the one object's file), removed on exit.

    Removed because a warm Lambda keeps /tmp between invocations: every prepare left a copy of
    the user's data behind, and a later one on the same instance had that much less of its
    ephemeral storage for its own copy and the shards."""
    bucket, _, prefix = source[len("s3://") :].partition("/")
    from functions.aws import download_to, list_keys, s3_client

    if s3 is None:
        s3 = s3_client()
    with tempfile.TemporaryDirectory(prefix="ldnn-source-", dir=default_cache_dir().parent) as tmp:
        folder = Path(tmp)
        keys = list_keys(s3, bucket, prefix)
        if keys == [prefix]:  # one object named by its key
            target = folder / Path(prefix).name
            download_to(s3, bucket, prefix, target)
            yield str(target)
            return
        base = prefix.rstrip("/") + "/" if prefix else ""
        for key in keys:
            download_to(s3, bucket, key, folder / key[len(base) :])
        yield str(folder)


def synthetic_cifar(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """SYNTHETIC 3×32×32 images: class template + Gaussian noise (learnable, not CIFAR)."""
    rng = np.random.default_rng([seed, 0xC1FA])
    templates = rng.standard_normal((SYNTHETIC_CIFAR_CLASSES, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, SYNTHETIC_CIFAR_CLASSES, samples, dtype=np.int64)
    x = rng.standard_normal((samples, 3, 32, 32), dtype=np.float32)
    x += 0.5 * templates[y]
    return x, y


def synthetic_tokens(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """SYNTHETIC next-token data: windows of one fixed random token stream, x the window's token
    ids as float32 (exact: float32 holds whole numbers to 2^24), y the token after it. Sample 0's
    label is the last token id, so the class count read from the labels is the whole vocabulary."""
    rng = np.random.default_rng([seed, 0x70CE])
    stream = rng.integers(0, SYNTHETIC_TOKENS_VOCAB, SYNTHETIC_TOKENS_PERIOD, dtype=np.int64)
    stream[0] = SYNTHETIC_TOKENS_VOCAB - 1
    starts = rng.integers(0, SYNTHETIC_TOKENS_PERIOD, samples)
    starts[0] = SYNTHETIC_TOKENS_PERIOD - SYNTHETIC_TOKENS_SEQUENCE  # its label: stream[0]
    window = starts[:, None] + np.arange(SYNTHETIC_TOKENS_SEQUENCE + 1)
    tokens = stream[window % SYNTHETIC_TOKENS_PERIOD]
    return tokens[:, :-1].astype(np.float32), tokens[:, -1].copy()


# -- writing shards --------------------------------------------------------------------------
def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _key(prefix: str, name: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{name}" if prefix else name


def write_shards(
    s3: Any,
    source: str,
    n_shards: int,
    bucket: str,
    prefix: str,
    seed: int = 0,
    test_fraction: float = 0.2,
    reader: Reader | None = None,
) -> dict[str, Any]:
    """Shuffle, split off a test set, upload n equal shards and the manifest; returns it."""
    if n_shards < 1:
        raise DatasetError(f"n_shards {n_shards}: expected an integer >= 1")
    if not 0 <= test_fraction < 1:
        raise DatasetError(f"test_fraction {test_fraction}: expected 0 <= fraction < 1")
    data = read_source(source, seed, s3, reader)
    x, y = data.x, data.y
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test_idx, train_idx = order[:n_test], order[n_test:]
    per_shard = len(train_idx) // n_shards
    if per_shard < 1:
        raise DatasetError(
            f"{len(train_idx)} training samples cannot fill {n_shards} shards: use fewer shards"
        )
    shards = []
    for k in range(n_shards):
        idx = np.sort(train_idx[k * per_shard : (k + 1) * per_shard])
        body = _npz_bytes(x=x[idx], y=y[idx])
        name = f"shard-{k:05d}.npz"
        s3.put_object(Bucket=bucket, Key=_key(prefix, name), Body=body)
        shards.append({"key": name, "bytes": len(body), "samples": per_shard})
    test_body = _npz_bytes(x=x[test_idx], y=y[test_idx])
    s3.put_object(Bucket=bucket, Key=_key(prefix, "test.npz"), Body=test_body)
    manifest = {
        "format_version": FORMAT_VERSION,
        "source": source,
        "synthetic": data.synthetic,
        "seed": seed,
        "n_shards": n_shards,
        "samples_per_shard": per_shard,
        "train_samples": per_shard * n_shards,
        "dropped_samples": len(train_idx) - per_shard * n_shards,
        "test_samples": int(n_test),
        "input_shape": [int(d) for d in x.shape[1:]],
        "classes": int(y.max()) + 1 if len(y) else 0,
        "class_names": list(data.class_names) if data.class_names else None,
        "x_dtype": "float32",
        "shards": shards,
        "test": {"key": "test.npz", "bytes": len(test_body), "samples": int(n_test)},
        "dataset_bytes": sum(s["bytes"] for s in shards),
    }
    s3.put_object(
        Bucket=bucket,
        Key=_key(prefix, MANIFEST),
        Body=json.dumps(manifest, indent=2, sort_keys=True).encode(),
        ContentType="application/json",
    )
    return manifest


# -- reading shards --------------------------------------------------------------------------
def read_manifest(s3: Any, bucket: str, prefix: str) -> dict[str, Any]:
    body = s3.get_object(Bucket=bucket, Key=_key(prefix, MANIFEST))["Body"].read()
    manifest: dict[str, Any] = json.loads(body)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"manifest format {manifest.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    return manifest


def default_cache_dir() -> Path:
    return Path(os.environ.get("TMPDIR") or "/tmp") / "ldnn-shards"


def check_fits(shard_bytes: int, ephemeral_storage_mb: int, cache_dir: Path) -> None:
    """A shard must fit the function's /tmp and the disk actually free; else a clear error."""
    limit_bytes = ephemeral_storage_mb * 1024 * 1024
    if shard_bytes > limit_bytes:
        raise DatasetError(
            f"shard of {shard_bytes / 1e6:.1f} MB does not fit ephemeral storage of "
            f"{ephemeral_storage_mb} MB: raise ephemeral_storage_mb or use more shards"
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    free_bytes = shutil.disk_usage(cache_dir).free
    if shard_bytes > free_bytes:
        raise DatasetError(
            f"shard of {shard_bytes / 1e6:.1f} MB exceeds the {free_bytes / 1e6:.1f} MB free "
            f"in {cache_dir}"
        )


def _cached_object(s3: Any, bucket: str, key: str, size: int, path: Path) -> Path:
    """Download `key` to `path` unless a file of the expected size is already there."""
    if path.exists() and path.stat().st_size == size:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # One partial file per thread, not per process: two threads of one process (the offline
    # state-machine tests run handlers in threads) may fetch the same shard at once.
    part = path.with_suffix(f".part{os.getpid()}-{threading.get_ident()}")
    s3.download_file(bucket, key, str(part))
    if part.stat().st_size != size:
        part.unlink()
        raise DatasetError(f"s3://{bucket}/{key} has a different size than the manifest says")
    part.replace(path)
    return path


def load_shard(
    s3: Any,
    bucket: str,
    prefix: str,
    rank: int,
    manifest: Mapping[str, Any],
    ephemeral_storage_mb: int = 512,
    cache_dir: Path | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Worker `rank`'s shard (x, y), through the /tmp cache."""
    shards = manifest["shards"]
    if not 0 <= rank < len(shards):
        raise DatasetError(f"rank {rank} has no shard: the dataset has {len(shards)} shards")
    entry = shards[rank]
    cache_dir = cache_dir or default_cache_dir()
    check_fits(int(entry["bytes"]), ephemeral_storage_mb, cache_dir)
    path = cache_dir / bucket / prefix.strip("/") / entry["key"]
    _cached_object(s3, bucket, _key(prefix, entry["key"]), int(entry["bytes"]), path)
    with np.load(path) as data:
        return data["x"], data["y"]


def load_test(
    s3: Any, bucket: str, prefix: str, manifest: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    body = s3.get_object(Bucket=bucket, Key=_key(prefix, manifest["test"]["key"]))["Body"].read()
    with np.load(io.BytesIO(body)) as data:
        return data["x"], data["y"]


def batch_indices(
    seed: int, rank: int, iteration: int, local_batch: int, shard_samples: int
) -> np.ndarray:
    """Sample indices of `rank`'s batch at `iteration`: a pure function of its arguments.

    Each worker walks its shard in a fresh permutation per epoch (seeded by seed, rank, epoch),
    so a resumed worker draws exactly the batches the uninterrupted one would have.
    """
    positions = iteration * local_batch + np.arange(local_batch, dtype=np.int64)
    epochs, offsets = np.divmod(positions, shard_samples)
    out = np.empty(local_batch, dtype=np.int64)
    for epoch in np.unique(epochs):
        perm = np.random.default_rng([seed, rank, int(epoch)]).permutation(shard_samples)
        mask = epochs == epoch
        out[mask] = perm[offsets[mask]]
    return out


# -- entry points ----------------------------------------------------------------------------
def _layouts(event: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The event's optional `layouts` (a run that re-plans: one per worker count it may take),
    checked; DatasetError names the bad entry and what is accepted."""
    value = event.get("layouts", [])
    expected = 'a list of {"n_shards": integer >= 1, "dataset_prefix": non-empty string}'
    if not isinstance(value, list):
        raise DatasetError(f"prepare event key 'layouts' = {value!r}: expected {expected}")
    out = []
    for entry in value:
        ok = isinstance(entry, dict) and set(entry) == {"n_shards", "dataset_prefix"}
        n, prefix = (entry.get("n_shards"), entry.get("dataset_prefix")) if ok else (None, None)
        if not (type(n) is int and n >= 1 and isinstance(prefix, str) and prefix):
            raise DatasetError(f"prepare event 'layouts' entry {entry!r}: expected {expected}")
        out.append((n, prefix))
    return out


def _prepared(s3: Any, bucket: str, prefix: str, source: str, n: int, seed: int) -> bool:
    """Whether `prefix` already holds this layout (its manifest names the source, the count
    and the seed): a re-run of the prepare step does not write it again."""
    try:
        manifest = read_manifest(s3, bucket, prefix)
    except Exception:  # noqa: BLE001  # no manifest, or an unreadable one: prepare it
        return False
    return (manifest.get("source"), manifest.get("n_shards"), manifest.get("seed")) == (
        source, n, seed)  # fmt: skip


def prepare_handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda/emulator step: {source, n_shards, dataset_bucket, dataset_prefix, seed?,
    test_fraction?, model?, layouts?} → the manifest (also written to S3). `model`, a user's
    model file, brings its `read_dataset` if it defines one. `layouts`: further
    {n_shards, dataset_prefix} of the same data and seed (the worker counts a re-plan may
    take), each prepared unless already there."""
    from functions.aws import naming_s3_failures, s3_client

    try:
        source = str(event["source"])
        n_shards = int(event["n_shards"])
        bucket = str(event["dataset_bucket"])
        prefix = str(event["dataset_prefix"])
    except KeyError as exc:
        raise DatasetError(f"prepare event is missing key {exc.args[0]!r}") from None
    layouts = _layouts(event)
    seed = int(event.get("seed", 0))
    reader = None
    if event.get("model"):
        from functions import models  # torch: only for a user's file

        reader = models.dataset_reader(str(event["model"]))
    with naming_s3_failures():
        s3 = s3_client()

        def write(n: int, at: str) -> dict[str, Any]:
            return write_shards(s3, source, n, bucket, at, seed=seed,
                                test_fraction=float(event.get("test_fraction", 0.2)),
                                reader=reader)  # fmt: skip

        manifest = write(n_shards, prefix)
        for n, at in layouts:
            if at != prefix and not _prepared(s3, bucket, at, source, n, seed):
                write(n, at)
        return manifest


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m functions.datasets")
    sub = parser.add_subparsers(dest="command", required=True)
    shard = sub.add_parser("shard", help="split a dataset into equal shards in S3")
    shard.add_argument(
        "--source",
        required=True,
        help="builtin:digits | synthetic-cifar:<samples> | file.npz | table.csv[#label=<column>] "
        "| dir (npz files, class folders of images, one csv) | s3://bucket/prefix or key",
    )
    shard.add_argument("--shards", type=int, required=True)
    shard.add_argument("--bucket", required=True)
    shard.add_argument("--prefix", default="")
    shard.add_argument("--seed", type=int, default=0)
    shard.add_argument("--test-fraction", type=float, default=0.2)
    args = parser.parse_args(argv)
    from functions.aws import s3_client

    try:
        manifest = write_shards(
            s3_client(),
            args.source,
            args.shards,
            args.bucket,
            args.prefix,
            args.seed,
            args.test_fraction,
        )
    except DatasetError as exc:
        print(f"functions.datasets: error: {exc}", file=sys.stderr)
        return 2
    summary = {
        k: manifest[k]
        for k in (
            "n_shards",
            "samples_per_shard",
            "test_samples",
            "input_shape",
            "classes",
            "dataset_bytes",
            "synthetic",
        )
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
