"""Write a tiny image dataset in the ImageFolder layout: data/<class>/<n>.png, 16×16 RGB.

Three classes (circle, square, cross) drawn at a random place, size and colour on a noisy
background; deterministic for a seed. `python examples/own-model/make_data.py --out DIR`
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 16
CLASSES = ("circle", "cross", "square")


def draw(kind: str, rng: np.random.Generator) -> Image.Image:
    background = rng.integers(0, 60, (SIZE, SIZE, 3), dtype=np.uint8)
    image = Image.fromarray(background, "RGB")
    pen = ImageDraw.Draw(image)
    colour = tuple(int(c) for c in rng.integers(120, 256, 3))
    r = int(rng.integers(3, 6))
    cx, cy = (int(v) for v in rng.integers(r, SIZE - r, 2))
    box = (cx - r, cy - r, cx + r, cy + r)
    if kind == "circle":
        pen.ellipse(box, fill=colour)
    elif kind == "square":
        pen.rectangle(box, fill=colour)
    else:
        pen.line((cx - r, cy, cx + r, cy), fill=colour, width=2)
        pen.line((cx, cy - r, cx, cy + r), fill=colour, width=2)
    return image


def write(out: Path, per_class: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    for kind in CLASSES:
        folder = out / kind
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(per_class):
            draw(kind, rng).save(folder / f"{k:04d}.png")
    return per_class * len(CLASSES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--per-class", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    count = write(args.out, args.per_class, args.seed)
    print(f"wrote {count} images in {len(CLASSES)} classes under {args.out}")


if __name__ == "__main__":
    main()
