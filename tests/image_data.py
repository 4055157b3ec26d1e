"""Images drawn at test time: shapes to tell apart (a learnable task), written as PNG and JPEG
files, and squares with their masks (a tiny segmentation task)."""

from __future__ import annotations

import functools
import io
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle")


def shape_image(kind: str, size: int, rng: np.random.Generator) -> Image.Image:
    """One bright ``kind`` of random size and place on a dark background of random colour."""
    image = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(0, 80, 3)))
    draw = ImageDraw.Draw(image)
    radius = int(rng.integers(size // 5, size // 3))
    x, y = (int(v) for v in rng.integers(radius, size - radius, 2))
    colour = tuple(int(v) for v in rng.integers(150, 256, 3))
    box = [x - radius, y - radius, x + radius, y + radius]
    if kind == "circle":
        draw.ellipse(box, fill=colour)
    elif kind == "square":
        draw.rectangle(box, fill=colour)
    else:
        draw.polygon([(x, y - radius), (x - radius, y + radius), (x + radius, y + radius)], fill=colour)
    return image


def shapes(folder: Path, rows: int, size: int = 32, seed: int = 0) -> pd.DataFrame:
    """``rows`` shape images in ``folder`` (odd rows PNG, even rows JPEG), and a frame of their
    paths relative to the folder's parent (column ``image``) and their shape (``shape``)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(rows):
        kind = SHAPES[i % 3]
        name = f"{i}.{'png' if i % 2 else 'jpg'}"
        shape_image(kind, size, rng).save(folder / name)
        records.append((f"{folder.name}/{name}", kind))
    return pd.DataFrame(records, columns=["image", "shape"])


def png_bytes(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def squares_and_masks(rows: int, size: int = 16, seed: int = 0) -> pd.DataFrame:
    """Grey noise with one bright square per image (column ``image``, PNG bytes) and its mask
    (``mask``: 255 inside the square, 0 outside, PNG bytes)."""
    rng = np.random.default_rng(seed)
    images, masks = [], []
    for _ in range(rows):
        pixels = rng.integers(0, 90, (size, size), dtype=np.uint8)
        mask = np.zeros((size, size), np.uint8)
        side = int(rng.integers(size // 4, size // 2))
        top, left = (int(v) for v in rng.integers(0, size - side, 2))
        pixels[top:top + side, left:left + side] = rng.integers(170, 256, (side, side), dtype=np.uint8)
        mask[top:top + side, left:left + side] = 255
        images.append(png_bytes(pixels))
        masks.append(png_bytes(mask))
    return pd.DataFrame({"image": images, "mask": masks})


@functools.lru_cache(maxsize=1)
def bomb_png(side: int = 20_000) -> bytes:
    """A decompression bomb: a black 1-bit PNG of side x side pixels (400 million by default,
    over Pillow's limit of twice MAX_IMAGE_PIXELS) that compresses to about 50 KB."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(1)
    row = bytes(1 + (side + 7) // 8)  # filter byte 0, then the row's bits
    pixels = b"".join(packer.compress(row * 1000) for _ in range(side // 1000)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
