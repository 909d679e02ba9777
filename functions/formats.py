"""Dataset files a user already has, read alike from a local folder or an S3 prefix.

A folder (or `s3://bucket/prefix`) is read by what it holds, checked in this order:
- `.npz` files at its top: arrays `x` (samples first) and `y` (int labels), concatenated;
- class sub-folders of images (torchvision's ImageFolder layout): `<class>/<file>` with .png,
  .jpg, .jpeg, .bmp or .gif files (at any depth under the class folder; other files ignored);
  classes are the sorted folder names, a sample's label the index of its folder. Images become
  float32 C×H×W in [0, 1]: greyscale (modes 1, L, LA, 16-bit I;16/I, and a palette of greys only,
  as greyscale GIFs are saved) as one channel, every other mode through Pillow's RGB conversion
  (palette expanded, alpha dropped, not composited); a GIF gives its first frame. All images must
  share one C×H×W;
- exactly one table at its top, `.csv` or `.parquet`: numeric feature columns (in column
  order) and a label column, `label` unless the source says otherwise with `#label=<column>`.
  Labels that are all non-negative integers are used as they are; otherwise each distinct value
  is a class name, sorted, and a label is its index.
A source may also name one `.npz`, `.csv` or `.parquet` file (`data/table.csv#label=species`,
`s3://bucket/key.parquet`); a `#` in a source always starts its options. Hidden files and
folders (`.name`, `__MACOSX`) are skipped.
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from functions.aws import list_keys

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
TABLE_SUFFIXES = (".csv", ".parquet")
DEFAULT_LABEL_COLUMN = "label"
# Pillow modes read as one channel; the 16-bit ones ("I;16", "I;16B", "I", ...) full-scale 65535.
GREY_MODES = ("1", "L", "LA")
S3_READ_THREADS = 16  # small objects (one per image): latency-bound, so fetch several at once


class DatasetError(ValueError):
    """A bad dataset source or a shard that cannot be used; one-line message."""


@dataclass(frozen=True)
class Loaded:
    """What a source holds: x float32 (samples first), y int64, class names when the files say."""

    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...] | None = None


class Files(Protocol):
    """A folder's files by relative POSIX name, sub-folders as `name/`, hidden ones left out."""

    def names(self) -> list[str]: ...

    def read(self, names: Sequence[str]) -> Iterator[bytes]: ...


def _hidden(parts: Sequence[str]) -> bool:
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


class LocalFolder:
    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self) -> list[str]:
        names = []
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root)
            if _hidden(rel.parts):
                continue
            if path.is_file():
                names.append(rel.as_posix())
            elif len(rel.parts) == 1:  # a class folder may be empty: list it to say so
                names.append(f"{rel.as_posix()}/")
        return sorted(names)

    def read(self, names: Sequence[str]) -> Iterator[bytes]:
        for name in names:
            try:
                yield (self.root / name).read_bytes()
            except OSError as exc:  # unreadable, or a folder named like a file
                raise DatasetError(f"cannot read {name!r}: {exc.strerror or exc}") from None


class S3Prefix:
    def __init__(self, s3: Any, bucket: str, prefix: str) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.strip("/")

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def names(self) -> list[str]:
        start = f"{self.prefix}/" if self.prefix else ""
        names = []
        for key in list_keys(self.s3, self.bucket, start):
            name = key[len(start) :]
            if name and not _hidden(name.split("/")):  # "" is the prefix's own marker
                names.append(name)
        return sorted(names)

    def read(self, names: Sequence[str]) -> Iterator[bytes]:
        def get(name: str) -> bytes:
            body: bytes = self.s3.get_object(Bucket=self.bucket, Key=self._key(name))["Body"].read()
            return body

        pool = ThreadPoolExecutor(max_workers=S3_READ_THREADS)
        try:
            yield from pool.map(get, names)
        finally:  # a reader that stops at a bad file does not wait for the rest
            pool.shutdown(cancel_futures=True)


# -- layout ----------------------------------------------------------------------------------
def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def detect_layout(names: Sequence[str]) -> tuple[str, list[str]]:
    """("npz" | "images" | "csv", the names to read) of a folder's names (see the docstring)."""
    top = [n for n in names if "/" not in n]
    npz = [n for n in top if n.lower().endswith(".npz")]
    if npz:
        return "npz", npz
    nested = [n for n in names if "/" in n]
    if any(_is_image(n) for n in nested):
        _class_images(nested)  # every class folder must hold an image
        return "images", nested
    tables = [n for n in top if n.lower().endswith(TABLE_SUFFIXES)]
    if len(tables) > 1:
        raise DatasetError(f"{len(tables)} tables ({', '.join(tables)}): name one of them")
    if tables:
        return tables[0].rsplit(".", 1)[1].lower(), tables
    raise DatasetError("no .npz files, no class folders of images and no .csv or .parquet table")


def _class_images(nested: Sequence[str]) -> dict[str, list[str]]:
    """Class name → its image names (sorted), from `<class>/...` names."""
    classes: dict[str, list[str]] = {}
    for name in nested:
        folder, _, rest = name.partition("/")
        images = classes.setdefault(folder, [])
        if _is_image(rest):
            images.append(name)
    for folder, images in sorted(classes.items()):
        if not images:
            raise DatasetError(
                f"class folder {folder!r} holds no images ({', '.join(IMAGE_SUFFIXES)})"
            )
    return {folder: sorted(classes[folder]) for folder in sorted(classes)}


def split_options(source: str) -> tuple[str, str]:
    """(location, label column) of `location[#label=<column>]`."""
    location, hashed, options = source.partition("#")
    if not hashed:
        return location, DEFAULT_LABEL_COLUMN
    key, _, column = options.partition("=")
    if key != "label" or not column:
        raise DatasetError(f"option #{options} is not accepted; use #label=<column>")
    return location, column


# -- reading ---------------------------------------------------------------------------------
def read_files(source: str, s3: Any = None) -> Loaded:
    """The samples of a local path or `s3://` source; DatasetError naming the source if bad."""
    try:
        files, kind, names, label_column = resolve(source, s3)
        if kind == "npz":
            return _read_npz(names, files.read(names))
        if kind == "images":
            return _read_images(files, _class_images(names))
        blob = next(iter(files.read(names)))
        with reading(names[0]):
            if kind == "parquet":
                return _read_parquet(blob, names[0], label_column)
            return _read_table(blob, names[0], label_column)
    except DatasetError as exc:
        raise DatasetError(f"bad source {source!r}: {exc}") from None


def resolve(source: str, s3: Any = None) -> tuple[Files, str, list[str], str]:
    """(the files, their layout "npz" | "images" | "csv" | "parquet", the names to read, the
    label column)
    of a source, from its file names alone: synth checks a local source with it too."""
    location, label_column = split_options(source)
    files, name = _open(location, s3)
    if name:
        kind, names = name.rsplit(".", 1)[1].lower(), [name]
    else:
        kind, names = detect_layout(files.names())
    if label_column != DEFAULT_LABEL_COLUMN and kind not in ("csv", "parquet"):
        raise DatasetError(
            "#label= names a column of a .csv or .parquet table, and this is not one"
        )
    return files, kind, names, label_column


def _open(location: str, s3: Any) -> tuple[Files, str]:
    """The folder to read and, when the location names one .npz/.csv/.parquet file, its name."""
    single = location.lower().endswith((".npz", *TABLE_SUFFIXES))
    if location.startswith("s3://"):
        bucket, _, key = location[len("s3://") :].partition("/")
        if s3 is None:
            from functions.aws import s3_client

            s3 = s3_client()
        if single:
            parent, file = PurePosixPath(key).parent, PurePosixPath(key).name
            return S3Prefix(s3, bucket, "" if str(parent) == "." else str(parent)), file
        return S3Prefix(s3, bucket, key), ""
    path = Path(location)
    if single and path.is_file():
        return LocalFolder(path.parent), path.name
    if path.is_dir():
        return LocalFolder(path), ""
    raise DatasetError(
        "expected builtin:digits, synthetic-cifar:<samples>, a .npz, .csv or .parquet file, a "
        "folder of .npz files, of class folders of images or with one table, or "
        "s3://bucket/prefix"
    )


@contextlib.contextmanager
def reading(name: str) -> Iterator[None]:
    """Any failure while decoding the file `name` as a DatasetError naming it: the decoders
    (numpy's zip reader, csv, Pillow, Arrow) each raise their own families (BadZipFile, a CRC
    error, csv.Error, struct.error), and a corrupt file must be one line that says which."""
    try:
        yield
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - a third-party decoder's: any error is the file's
        reason = (str(exc).splitlines() or [""])[0]
        raise DatasetError(
            f"cannot read {name!r}: {type(exc).__name__}" + (f": {reason}" if reason else "")
        ) from None


def _npz_arrays(name: str, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of one .npz file: x numeric with samples first, y one integer label each."""
    with reading(name), np.load(io.BytesIO(blob)) as data:
        if "x" not in data.files or "y" not in data.files:
            raise DatasetError(f"{name!r} holds arrays {data.files}, expected 'x' and 'y'")
        x, y = data["x"], data["y"]
    wrong = ""
    if x.ndim < 2 or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        wrong = f"x is {x.dtype} shaped {x.shape}, expected numbers with samples first"
    elif y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        wrong = f"y is {y.dtype} shaped {y.shape}, expected one integer label per sample"
    elif len(x) != len(y):
        wrong = f"x has {len(x)} samples but y has {len(y)}"
    if wrong:
        raise DatasetError(f"{name!r}: {wrong}")
    return x, y


def _read_npz(names: Sequence[str], blobs: Iterator[bytes]) -> Loaded:
    xs, ys = [], []
    for name, blob in zip(names, blobs, strict=True):
        x, y = _npz_arrays(name, blob)
        if xs and x.shape[1:] != xs[0].shape[1:]:
            raise DatasetError(
                f"{name!r}: x samples are {_shape(x.shape[1:])}, expected "
                f"{_shape(xs[0].shape[1:])} like {names[0]!r}"
            )
        xs.append(x)
        ys.append(y)
    x, y = np.concatenate(xs), np.concatenate(ys)
    if np.issubdtype(x.dtype, np.integer):
        x = x.astype(np.float32) / 255.0  # integer images: scale to [0, 1]
    return Loaded(x.astype(np.float32, copy=False), y.astype(np.int64))


def _read_images(files: Files, classes: dict[str, list[str]]) -> Loaded:
    names = [name for images in classes.values() for name in images]
    labels = [label for label, images in enumerate(classes.values()) for _ in images]
    x: np.ndarray | None = None
    first = ("", "")  # the name and mode every other image is held to
    for i, (name, blob) in enumerate(zip(names, files.read(names), strict=True)):
        with reading(name):
            pixels, mode = _decode(name, blob)
        if x is None:
            x, first = np.empty((len(names), *pixels.shape), np.float32), (name, mode)
        elif pixels.shape != x.shape[1:]:
            raise DatasetError(
                f"image {name!r} is {_shape(pixels.shape)} (mode {mode}), expected "
                f"{_shape(x.shape[1:])} like {first[0]!r} (mode {first[1]}): "
                "give the images one size and colour mode"
            )
        x[i] = pixels
    assert x is not None  # detect_layout found at least one image
    return Loaded(x, np.array(labels, np.int64), tuple(classes))


def _shape(shape: Sequence[int]) -> str:
    return "×".join(map(str, shape))


def _decode(name: str, blob: bytes) -> tuple[np.ndarray, str]:
    """(C×H×W float32 in [0, 1], Pillow mode) of one image file."""
    from PIL import Image, UnidentifiedImageError  # the image reader only: synth lacks Pillow

    try:
        with Image.open(io.BytesIO(blob)) as image:
            image.load()
            return _pixels(image), image.mode
    except UnidentifiedImageError:
        raise DatasetError(f"cannot read image {name!r}: not an image Pillow knows") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise DatasetError(f"cannot read image {name!r}: {reason}") from None


def _pixels(image: Any) -> np.ndarray:
    """One channel for greyscale, three (RGB) for every other mode; see the module docstring."""
    if image.mode.startswith("I"):  # 16-bit greyscale (PNG): full scale is 65535
        return np.clip(np.asarray(image, np.float32) / 65535.0, 0.0, 1.0)[None]
    if image.mode in GREY_MODES or (image.mode == "P" and _grey_palette(image)):
        return (np.asarray(image.convert("L"), np.float32) / 255.0)[None]
    return np.asarray(image.convert("RGB"), np.float32).transpose(2, 0, 1) / 255.0


def _grey_palette(image: Any) -> bool:
    """Is every palette entry grey (r = g = b), as in a greyscale image saved as GIF?"""
    palette = image.getpalette() or []
    return all(palette[i] == palette[i + 1] == palette[i + 2] for i in range(0, len(palette), 3))


def _feature_columns(header: list[str], label_column: str, name: str) -> list[str]:
    """A table's columns but the label's, in order; DatasetError when the label column is
    missing or nothing else is there (CSV and Parquet alike)."""
    if label_column not in header:
        raise DatasetError(
            f"{name!r} has no column {label_column!r} (its columns: {', '.join(header)}); "
            "name the label column with #label=<column>"
        )
    at = header.index(label_column)
    features = header[:at] + header[at + 1 :]
    if not features:
        raise DatasetError(f"{name!r} has no feature columns besides {label_column!r}")
    return features


def _read_table(blob: bytes, name: str, label_column: str) -> Loaded:
    try:
        text = blob.decode("utf-8-sig")  # a BOM, as spreadsheet programs write, is not a column
    except UnicodeDecodeError:
        raise DatasetError(f"{name!r} is not UTF-8 text") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    labels: list[str] = []
    lines: list[int] = []
    try:
        header = [column.strip() for column in next(reader, [])]
        features = _feature_columns(header, label_column, name)
        at = header.index(label_column)
        for row in reader:
            _table_row(row, header, at, name, reader.line_num, label_column)
            if any(cell.strip() for cell in row):  # not a blank line
                labels.append(row[at].strip())
                rows.append(row[:at] + row[at + 1 :])
                lines.append(reader.line_num)
    except csv.Error as exc:  # a field past csv's size limit, an unclosed quote at the end
        raise DatasetError(f"{name!r} line {reader.line_num}: {exc}") from None
    if not rows:
        raise DatasetError(f"{name!r} has a header and no rows")
    x = _numbers(rows, lines, features, name)
    y, class_names = _labels(labels)
    return Loaded(x, y, class_names)


def _table_row(
    row: list[str], header: list[str], at: int, name: str, line: int, label_column: str
) -> None:
    """DatasetError for a CSV row of the wrong width or with an empty label (blank lines pass)."""
    if not any(cell.strip() for cell in row):
        return
    if len(row) != len(header):
        raise DatasetError(
            f"{name!r} line {line}: the header has {len(header)} columns, this row {len(row)}"
        )
    if not row[at].strip():
        raise DatasetError(f"{name!r} line {line} has an empty {label_column!r}")


def _read_parquet(blob: bytes, name: str, label_column: str) -> Loaded:
    """A Parquet table as the CSV one: numeric (or boolean) feature columns, a label column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(blob))
    except (pa.ArrowException, OSError) as err:
        raise DatasetError(f"{name!r} is not a Parquet table Arrow reads: {err}") from None
    features = _feature_columns(list(table.column_names), label_column, name)
    if table.num_rows == 0:
        raise DatasetError(f"{name!r} has columns and no rows")
    columns = []
    for column in features:
        data = table.column(column)
        kind = data.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind)):  # fmt: skip
            raise DatasetError(f"{name!r} column {column!r} holds {kind}, not numbers")
        values = data.to_numpy(zero_copy_only=False).astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise DatasetError(
                f"{name!r} row {int(bad[0]) + 1}, column {column!r}: "
                f"{data[int(bad[0])].as_py()!r} is not a number"
            )
        columns.append(values)
    labels = table.column(label_column).to_pylist()
    if any(value is None or str(value).strip() == "" for value in labels):
        row = next(i for i, v in enumerate(labels) if v is None or str(v).strip() == "")
        raise DatasetError(f"{name!r} row {row + 1} has an empty {label_column!r}")
    y, class_names = _labels([str(value).strip() for value in labels])
    return Loaded(np.stack(columns, axis=1).astype(np.float32), y, class_names)


def _numbers(rows: list[list[str]], lines: list[int], columns: list[str], name: str) -> np.ndarray:
    """The cells as float32, or DatasetError at the first cell that is not a finite number."""
    try:
        x = np.array(rows, dtype=np.float64)
    except ValueError:  # some cell does not parse: cell by cell, NaN where it does not
        x = np.array([[_number(cell) for cell in row] for row in rows])
    bad = np.argwhere(~np.isfinite(x))
    if len(bad):
        r, c = (int(i) for i in bad[0])
        raise DatasetError(
            f"{name!r} line {lines[r]}, column {columns[c]!r}: {rows[r][c]!r} is not a number"
        )
    return x.astype(np.float32)


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("nan")


def _labels(values: list[str]) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Integer labels as they are (no names known); otherwise sorted class names → indices."""
    if all(value.isascii() and value.isdigit() for value in values):
        return np.array([int(value) for value in values], np.int64), None
    names = sorted(set(values))
    index = {value: i for i, value in enumerate(names)}
    return np.array([index[value] for value in values], np.int64), tuple(names)
