"""A corrupt or malformed dataset file is one DatasetError naming the file, whatever the decoder
(numpy's zip reader, csv, Pillow, Arrow) raised: one line for the user, never a traceback."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from functions import datasets, formats
from functions.formats import DatasetError


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


GOOD = _npz(x=np.zeros((6, 4), np.float32), y=np.arange(6) % 2)


def _crc_broken() -> bytes:
    """A whole zip whose member's bytes no longer match its CRC."""
    blob = bytearray(GOOD)
    at = blob.find(b"\x93NUMPY") + 80
    blob[at : at + 8] = b"\xff" * 8
    return bytes(blob)


def _refusal(folder: Path) -> str:
    with pytest.raises(DatasetError) as err:
        datasets.load_source(str(folder))
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (GOOD[: len(GOOD) // 2], "cannot read 'part.npz': BadZipFile: File is not a zip file"),
        (_crc_broken(), "cannot read 'part.npz': BadZipFile: Bad CRC-32"),
        (b"not a zip at all", "cannot read 'part.npz': ValueError: "),
        (_npz(x=np.array([[None, 1]], dtype=object), y=np.array([0])),
         "cannot read 'part.npz': ValueError: Object arrays cannot be loaded"),
        (_npz(x=np.array([["a", "b"]]), y=np.array([0])),
         "'part.npz': x is <U1 shaped (1, 2), expected numbers with samples first"),
        (_npz(x=np.zeros((2, 3)), y=np.zeros((2, 2), np.int64)),
         "'part.npz': y is int64 shaped (2, 2), expected one integer label per sample"),
        (_npz(x=np.zeros((3, 3)), y=np.arange(2)), "'part.npz': x has 3 samples but y has 2"),
        (_npz(a=np.zeros(3)), "'part.npz' holds arrays ['a'], expected 'x' and 'y'"),
    ],
    ids=["truncated", "crc", "not-zip", "pickled", "strings", "2d-labels", "lengths", "no-x"],
)  # fmt: skip
def test_a_corrupt_or_malformed_npz_is_named(tmp_path: Path, blob: bytes, says: str) -> None:
    (tmp_path / "part.npz").write_bytes(blob)
    message = _refusal(tmp_path)
    assert message.startswith(f"bad source {str(tmp_path)!r}: ")
    assert says in message


def test_npz_files_of_other_sample_shapes_name_the_odd_one(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(GOOD)
    (tmp_path / "b.npz").write_bytes(_npz(x=np.zeros((6, 5)), y=np.arange(6) % 2))
    assert _refusal(tmp_path).endswith("'b.npz': x samples are 5, expected 4 like 'a.npz'")


def test_a_file_that_cannot_be_read_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "part.npz").write_bytes(GOOD)

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert _refusal(tmp_path).endswith("cannot read 'part.npz': Permission denied")


def test_a_csv_field_past_the_csv_modules_limit_is_named_by_line(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text('a,label\n1,0\n"' + "9" * 200_000 + '",1\n')
    assert _refusal(tmp_path).endswith("'t.csv' line 3: field larger than field limit (131072)")


def test_a_csv_header_past_the_limit_is_named_too(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text('"' + "a" * 200_000 + '",label\n1,0\n')
    assert "'t.csv' line 1: field larger than field limit" in _refusal(tmp_path)


def test_any_error_of_the_image_decoder_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow raises more than its documented families on crafted files (struct.error,
    IndexError): each is the file's error, named."""
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("L", (4, 4)).save(tmp_path / label / "1.png")

    def crafted(image: Any) -> np.ndarray:
        raise IndexError("tile index out of range")

    monkeypatch.setattr(formats, "_pixels", crafted)
    message = _refusal(tmp_path)
    assert message.endswith("cannot read 'a/1.png': IndexError: tile index out of range")


def test_a_file_named_parquet_that_is_a_zip_is_named(tmp_path: Path) -> None:
    """A Parquet file that is something else (here a zip) is named as the table."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("x", "y")
    (tmp_path / "t.parquet").write_bytes(buf.getvalue())
    assert "'t.parquet' is not a Parquet table Arrow reads" in _refusal(tmp_path)
