"""Class folders of images (the ImageFolder layout), local and on S3, through the prepare step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from functions import datasets

MESSAGE_TAIL = "(.png, .jpg, .jpeg, .bmp, .gif)"


def _image(path: Path, mode: str = "L", size: tuple[int, int] = (4, 3), value: int = 0) -> None:
    """A flat image of `size` (width, height); `value` fills every channel."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fill: Any = value if mode in ("L", "P") else (value,) * len(mode)
    Image.new(mode, size, fill).save(path)


def _grey_folder(root: Path) -> Path:
    """cat: 3 black images, dog: 2 white ones (4×3, mode L), plus files a reader must skip."""
    for i in range(3):
        _image(root / "cat" / f"c{i}.png", value=0)
    _image(root / "dog" / "d0.bmp", value=255)
    _image(root / "dog" / "nested" / "d1.gif", value=255)  # any depth under the class folder
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / ".DS_Store").write_bytes(b"\0")
    (root / "README.md").write_text("top-level files are not classes")
    return root


def _check_labels_follow_pixels(x: np.ndarray, y: np.ndarray) -> None:
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert np.array_equal(x.reshape(len(x), -1).max(axis=1), y.astype(np.float32))


def test_a_local_image_folder_round_trips_through_the_shards(
    s3: Any, bucket: str, tmp_path: Path, shard_cache: Path
) -> None:
    folder = _grey_folder(tmp_path / "pets")
    manifest = datasets.write_shards(s3, str(folder), 2, bucket, "img", test_fraction=0.2)
    assert manifest["input_shape"] == [1, 3, 4] and manifest["classes"] == 2
    assert manifest["class_names"] == ["cat", "dog"]
    assert manifest["train_samples"] + manifest["test_samples"] == 5 - manifest["dropped_samples"]
    for rank in range(2):
        x, y = datasets.load_shard(s3, bucket, "img", rank, manifest)
        assert x.shape == (manifest["samples_per_shard"], 1, 3, 4)
        _check_labels_follow_pixels(x, y)


def test_an_s3_image_prefix_reads_as_the_local_folder_does(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    folder = _grey_folder(tmp_path / "pets")
    for path in folder.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"source/{path.relative_to(folder).as_posix()}")
    s3.put_object(Bucket=bucket, Key="source/dog/", Body=b"")  # a folder made in the console
    local = datasets.read_source(str(folder))
    remote = datasets.read_source(f"s3://{bucket}/source", s3=s3)
    assert remote.class_names == local.class_names == ("cat", "dog")
    assert np.array_equal(remote.x, local.x) and np.array_equal(remote.y, local.y)
    manifest = datasets.write_shards(s3, f"s3://{bucket}/source/", 1, bucket, "s", test_fraction=0)
    assert manifest["class_names"] == ["cat", "dog"] and manifest["train_samples"] == 5


def test_colour_palette_rgba_jpeg_and_rgb_images_all_read_as_three_channels(
    tmp_path: Path,
) -> None:
    _image(tmp_path / "a" / "photo.jpg", "RGB", value=0)
    _image(tmp_path / "a" / "rgba.png", "RGBA", value=0)  # alpha dropped, not composited
    _image(tmp_path / "b" / "rgb.png", "RGB", value=255)
    palette = Image.new("P", (4, 3), 1)
    palette.putpalette([0, 0, 0, 255, 0, 0])  # black and red: a colour palette; pixels red
    palette.save(tmp_path / "b" / "palette.gif")
    data = datasets.read_source(str(tmp_path))
    assert data.x.shape == (4, 3, 3, 4) and data.class_names == ("a", "b")
    assert data.x.min() >= 0.0 and data.x.max() <= 1.0
    _check_labels_follow_pixels(data.x, data.y)


def test_sixteen_bit_greyscale_is_one_channel_scaled_to_one(tmp_path: Path) -> None:
    for name, value in (("0-dark", 0), ("1-bright", 65535)):
        (tmp_path / name).mkdir()
        Image.fromarray(np.full((3, 4), value, np.uint16)).save(tmp_path / name / "v.png")
    data = datasets.read_source(str(tmp_path))
    assert data.x.shape == (2, 1, 3, 4)
    assert data.x[data.y == 1].min() == 1.0 and data.x[data.y == 0].max() == 0.0


def _error(source: Path | str) -> str:
    with pytest.raises(datasets.DatasetError) as info:
        datasets.read_source(str(source))
    return str(info.value)


def test_an_empty_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "data" / ".hidden").mkdir(parents=True)
    assert _error(tmp_path / "data") == (
        f"bad source '{tmp_path}/data': no .npz files, no class folders of images and no .csv "
        "or .parquet table"
    )


def test_a_class_folder_without_images_is_named(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.png")
    (tmp_path / "dog").mkdir()
    (tmp_path / "dog" / "a.txt").write_text("")
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': class folder 'dog' holds no images {MESSAGE_TAIL}"
    )


def test_an_image_of_another_size_is_named_with_the_expected_shape(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.png")
    _image(tmp_path / "dog" / "b.png", size=(5, 3))
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': image 'dog/b.png' is 1×3×5 (mode L), expected 1×3×4 like "
        "'cat/a.png' (mode L): give the images one size and colour mode"
    )


def test_an_image_of_another_mode_is_named_with_the_expected_shape(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.png")
    _image(tmp_path / "cat" / "b.png", "RGB")
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': image 'cat/b.png' is 3×3×4 (mode RGB), expected 1×3×4 like "
        "'cat/a.png' (mode L): give the images one size and colour mode"
    )


def test_an_unreadable_image_is_named(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.png")
    (tmp_path / "dog").mkdir()
    (tmp_path / "dog" / "b.jpg").write_bytes(b"not a jpeg")
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': cannot read image 'dog/b.jpg': not an image Pillow knows"
    )
    good = (tmp_path / "cat" / "a.png").read_bytes()
    (tmp_path / "dog" / "b.jpg").unlink()
    (tmp_path / "dog" / "c.png").write_bytes(good[: len(good) // 2])  # truncated
    assert _error(tmp_path).startswith(f"bad source '{tmp_path}': cannot read image 'dog/c.png': ")


def test_one_class_is_not_enough(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.png")
    assert _error(tmp_path) == (
        f"bad source '{tmp_path}': every sample has class 'cat'; a classifier needs 2 classes "
        "or more"
    )


def test_a_label_option_on_images_is_refused(tmp_path: Path) -> None:
    _grey_folder(tmp_path)
    assert _error(f"{tmp_path}#label=kind") == (
        f"bad source '{tmp_path}#label=kind': #label= names a column of a .csv or .parquet "
        "table, and this is not one"
    )
