"""Images read with Pillow: a file's header (size and channels) without decoding it, and a file
decoded, converted to a number of channels and brought to one size.

Pillow is imported when an image is read, not with plait's preprocessing modules; it releases the
GIL while it decodes and resizes, so a thread pool decodes on every core.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from plait.features.files import UnfetchedFile, fetched, is_url

MODE_OF_CHANNELS = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
"""Pillow's mode for each number of channels plait stores."""


class UnreadableImage(Exception):
    """An image that cannot be opened or decoded; the message says why."""


def channels_of_mode(mode: str, has_transparency: bool = False) -> int:
    """Channels an image of a Pillow mode has once converted to one plait stores: palettes and
    other colour modes are RGB (RGBA with transparency), 16- and 32-bit greys are grey."""
    if mode in ("1", "L", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        return 1
    if mode in ("LA", "La"):
        return 2
    if mode in ("RGBA", "RGBa") or (mode == "P" and has_transparency):
        return 4
    return 3


def open_image(source: str | bytes):
    """A lazily decoded Pillow image of a path (local or fsspec URL) or of a file's bytes. An
    image of more pixels than Pillow decodes safely (its decompression-bomb limit, twice
    ``PIL.Image.MAX_IMAGE_PIXELS``) is refused here, from its header, before any is decoded."""
    from PIL import Image, UnidentifiedImageError

    try:
        if isinstance(source, bytes):
            handle = io.BytesIO(source)
        elif is_url(source):
            handle = io.BytesIO(_fetched(source))
        else:
            handle = source
        return Image.open(handle)
    except FileNotFoundError:
        raise UnreadableImage("no such file") from None
    except UnidentifiedImageError:
        raise UnreadableImage("not an image Pillow can read (PNG, JPEG, BMP, GIF, TIFF, WebP, ...)") from None
    except Image.DecompressionBombError as exc:
        raise UnreadableImage(_bomb(exc)) from None
    except (OSError, ValueError) as exc:
        raise UnreadableImage(str(exc) or type(exc).__name__) from None


def _bomb(exc: Exception) -> str:
    """What to say of Pillow's DecompressionBombError ("Image size (N pixels) exceeds limit of M
    pixels, could be decompression bomb DOS attack.")."""
    detail = str(exc).split(", could be", 1)[0]
    return (f"a possible decompression bomb ({detail[:1].lower()}{detail[1:]}); if it is a real image, shrink it "
            f"first (such as: convert big.png -resize 4096x4096 smaller.png)")


def _fetched(url: str) -> bytes:
    try:
        return fetched(url)
    except UnfetchedFile as exc:
        raise UnreadableImage(str(exc)) from None


def header(source: str | bytes) -> tuple[int, int, int]:
    """(height, width, channels) of an image from its header alone."""
    with open_image(source) as image:
        return image.height, image.width, channels_of_mode(image.mode, "transparency" in image.info)


def array_image(values: Any):
    """A Pillow image of an array given as nested lists: [height][width] or [height][width][channels],
    values 0-255 (floats are rounded and clipped)."""
    from PIL import Image

    try:
        array = np.asarray(values, dtype=np.float64)
    except ValueError:
        raise UnreadableImage("an array whose rows have different lengths") from None
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (2, 3, 4)) or 0 in array.shape:
        raise UnreadableImage(f"an array of shape {list(array.shape)}; give [height][width] or "
                              f"[height][width][channels] with 1 to 4 channels")
    pixels = np.clip(np.rint(array), 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, mode=MODE_OF_CHANNELS[1 if pixels.ndim == 2 else pixels.shape[2]])


@dataclass(frozen=True)
class Target:
    """The stored form of every image of a feature: its size, channels, and how an image of
    another size gets there (interpolate, crop_or_pad, or None: it must already have this size)."""

    height: int
    width: int
    channels: int
    resize: str | None
    nearest: bool = False
    """Segmentation masks are resized to the nearest pixel: a blend of two classes is no class."""

    @property
    def bytes_per_image(self) -> int:
        return self.height * self.width * self.channels

    def pixels(self, image) -> np.ndarray:
        """[height, width, channels] uint8 of a Pillow image."""
        from PIL import Image

        if image.size != (self.width, self.height) and self.resize == "interpolate" and not self.nearest:
            image.draft(MODE_OF_CHANNELS.get(self.channels) if self.channels in (1, 3) else None,
                        (self.width, self.height))  # a JPEG decodes at a smaller scale (a no-op otherwise)
        image = converted(image, self.channels)
        if image.size != (self.width, self.height):
            if self.resize is None:
                raise UnreadableImage(f"it is {image.height}x{image.width} (height x width), not "
                                      f"{self.height}x{self.width} like the first training image")
            if self.resize == "interpolate":
                method = Image.Resampling.NEAREST if self.nearest else Image.Resampling.BILINEAR
                image = image.resize((self.width, self.height), method)
        array = np.asarray(image, dtype=np.uint8)
        array = array.reshape(array.shape[0], array.shape[1], self.channels)
        if array.shape[:2] != (self.height, self.width):
            array = crop_or_pad(array, self.height, self.width)
        return array

    def decode(self, source: Any) -> np.ndarray:
        """The stored pixels of a path, a file's bytes, or an array (nested lists)."""
        from PIL import Image

        image = array_image(source) if isinstance(source, list) else open_image(source)
        try:
            return self.pixels(image)
        except UnreadableImage:
            raise
        except (OSError, ValueError, SyntaxError) as exc:  # Pillow's words for a truncated or corrupt file
            raise UnreadableImage(str(exc) or type(exc).__name__) from None
        except Image.DecompressionBombError as exc:  # a frame larger than the header said (GIF, say)
            raise UnreadableImage(_bomb(exc)) from None
        finally:
            image.close()


SIXTEEN_BIT_GREYS = ("I;16", "I;16B", "I;16L", "I;16N", "I")
"""Pillow's modes of a 16-bit grey image (a 16-bit PNG or TIFF opens as I;16, or as I in older
Pillows)."""


def converted(image, channels: int):
    """A Pillow image in the mode of ``channels`` channels."""
    mode = MODE_OF_CHANNELS[channels]
    if image.mode in SIXTEEN_BIT_GREYS:
        image = eight_bit_grey(image)
    if image.mode == mode:
        return image
    if image.mode == "P" and channels in (1, 3):  # a palette with transparency goes through RGBA
        image = image.convert("RGBA")
    if image.mode == "F" and channels != 1:
        image = image.convert("L")
    return image.convert(mode)


def eight_bit_grey(image):
    """A 16-bit grey image as 8 bits, each value's top byte (65535 -> 255, 32768 -> 128). Pillow's
    own conversion to L clips every value above 255 instead, which turns most 16-bit images white."""
    from PIL import Image

    values = np.asarray(image)
    return Image.fromarray((np.clip(values, 0, 65535).astype(np.uint32) >> 8).astype(np.uint8))


def crop_or_pad(array: np.ndarray, height: int, width: int) -> np.ndarray:
    """The centre ``height`` x ``width`` of an image, its edge pixels repeated where it is smaller."""
    rows, cols = array.shape[:2]
    top, left = max(0, (rows - height) // 2), max(0, (cols - width) // 2)
    array = array[top:top + height, left:left + width]
    pad_rows, pad_cols = height - array.shape[0], width - array.shape[1]
    if pad_rows or pad_cols:
        array = np.pad(array, ((pad_rows // 2, pad_rows - pad_rows // 2), (pad_cols // 2, pad_cols - pad_cols // 2),
                               (0, 0)), mode="edge")
    return array


def decode_threads(minimum: int = 1) -> int:
    """Threads that decode images in one preprocessing task: the CPUs it may use (Ray sets
    OMP_NUM_THREADS to a task's share), at least ``minimum``."""
    allowed = os.environ.get("OMP_NUM_THREADS")
    cores = int(allowed) if allowed and allowed.isdigit() else len(os.sched_getaffinity(0))
    return max(minimum, cores, 1)


def map_in_threads(fn: Callable, items: list, threads: int) -> Iterable:
    """``fn`` of every item, in order; several threads when there are enough items to share."""
    if threads <= 1 or len(items) < 2 * threads:
        return map(fn, items)
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
