"""Image features: a file per row (its path, or its bytes in a binary column) or an array,
decoded with Pillow, converted to one number of channels, brought to one size, and stored as a
fixed-size uint8 tensor (height x width x channels bytes) per row.

The size and channels come from the config, or from the first ``infer_image_sample_size``
training images in row order (so every partitioning finds the same ones). A path is read as every
file-valued feature's is (``plait.features.files``): a relative one from the dataset's folder. An
image output is a segmentation mask: each distinct pixel value of the training masks is a class,
and a mask is stored as one class id per pixel.

The cache key holds the paths, not the files: a file changed in place is not noticed until the
cache is cleared.
"""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import image_ops as ops
from plait.features.files import FileFeature
from plait.features.image_decoding import RowUnreadable, decode_rows

log = logging.getLogger("plait")


class ImageProcessor(FileFeature):
    type = "image"
    reads_nested = True  # an array per row is one of the forms an image takes
    stats_read_row_numbers = True  # the inferred size comes from the first training images in row order

    def prepare(self, column: pa.Array) -> pa.Array:
        if pa.types.is_null(column.type):
            column = column.cast(pa.string())
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return self.file_paths(column)
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            return self.file_contents(column)
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            return column
        raise DataError(f"image feature {self.name!r}: column {self.column!r} has type {column.type}; give the "
                        f"paths of image files (strings), the files' bytes (a binary column), or arrays")

    # Statistics: the first training images' sizes and channels; an output's mask values ----------

    def partial_stats(self, column: pa.Array, rows: np.ndarray | None = None) -> dict:
        rows = np.arange(len(column)) if rows is None else rows
        valid = np.flatnonzero(pc.is_valid(column).to_numpy(zero_copy_only=False))
        first = valid[np.argsort(rows[valid], kind="stable")[: self.preprocessing.infer_image_sample_size]]
        sample = [[int(rows[i]), *self._header(column[int(i)].as_py())] for i in first]
        stats = {"sample": sample}
        if self.is_output and self.preprocessing.num_classes is None:
            stats["values"] = self._mask_values(column.filter(pc.is_valid(column)))
        return stats

    def merge_stats(self, a: dict, b: dict) -> dict:
        merged = {"sample": sorted(a["sample"] + b["sample"])[: self.preprocessing.infer_image_sample_size]}
        if "values" in a:
            merged["values"] = sorted(set(map(tuple, a["values"])) | set(map(tuple, b["values"])))
        return merged

    def finalize(self, stats: dict) -> dict:
        sample = stats["sample"]
        height, width, resize = self._size(sample)
        channels = self._channels(sample)
        metadata = {"height": height, "width": width, "num_channels": channels, "resize_method": resize,
                    "fill_value": int(round(self.preprocessing.fill_value or 0)),
                    "standardize_image": self.preprocessing.standardize_image}
        if self.preprocessing.standardize_image == "imagenet1k" and channels != 3:
            raise DataError(f"image feature {self.name!r}: standardize_image imagenet1k applies to RGB images, but the "
                            f"images have {channels} channel(s); set preprocessing.num_channels: 3 or leave "
                            f"standardize_image unset")
        if self.is_output:
            metadata.update(self._classes(stats.get("values")))
            metadata["num_channels"] = self._mask_channels(metadata)
        return metadata

    def _mask_channels(self, metadata: dict) -> int:
        """Masks are read as grey unless a class is a colour (or num_channels says otherwise);
        with colours, grey values become their RGB triples."""
        values = metadata["class_values"]
        if self.preprocessing.num_channels is not None or values is None:
            return self.preprocessing.num_channels or 1
        channels = max(len(v) for v in values)
        metadata["class_values"] = [list(v) for v in sorted({tuple(v) * (channels // len(v)) for v in values})]
        return channels

    def _size(self, sample: list) -> tuple[int, int, str | None]:
        pre = self.preprocessing
        if (pre.height is None) != (pre.width is None):
            raise DataError(f"image feature {self.name!r}: preprocessing sets only one of height ({pre.height}) and "
                            f"width ({pre.width}); set both, or neither to infer them")
        if pre.height is not None:
            height, width, resize = pre.height, pre.width, pre.resize_method
        elif not sample:
            raise DataError(f"image feature {self.name!r}: no training image to take the size from; set "
                            f"preprocessing.height, width and num_channels")
        elif pre.infer_image_dimensions:
            height = min(int(round(np.mean([s[1] for s in sample]))), pre.infer_image_max_height)
            width = min(int(round(np.mean([s[2] for s in sample]))), pre.infer_image_max_width)
            resize = pre.resize_method
        else:  # as Ludwig: the first image's size, and every image must have it
            height, width, resize = sample[0][1], sample[0][2], None
        if pre.requires_equal_dimensions and height != width:
            height = width = min(height, width)
            resize = resize or pre.resize_method
            log.info("image feature %r: square images of %d x %d (requires_equal_dimensions).", self.name, height, width)
        return height, width, resize

    def _channels(self, sample: list) -> int:
        pre = self.preprocessing
        if pre.num_channels is not None:
            return pre.num_channels
        if not sample:
            return 3
        if not pre.infer_image_num_channels:
            return sample[0][3]
        counts = Counter(s[3] for s in sample)
        top = max(counts.values())
        tied = [c for c, n in counts.items() if n == top]
        return 3 if 3 in tied else min(tied)  # mostly RGB data, as Ludwig assumes on a tie

    def _classes(self, values: list | None) -> dict:
        """An output's classes: its distinct mask values (pixel tuples), in sorted order."""
        pre = self.preprocessing
        if values is None:  # num_classes given: the mask pixels are the class ids
            return {"num_classes": pre.num_classes, "class_values": None}
        if len(values) < 2:
            raise DataError(f"image output {self.name!r}: the training masks have {len(values)} distinct pixel "
                            f"value(s); a segmentation needs at least two classes")
        if len(values) > 255:
            raise DataError(f"image output {self.name!r}: the training masks have {len(values)} distinct pixel values; "
                            f"plait stores a mask as one byte per pixel, so at most 255 classes. Are these photos "
                            f"rather than masks? Masks hold one value per class")
        return {"num_classes": len(values), "class_values": [list(v) for v in values]}

    def _header(self, source) -> tuple[int, int, int]:
        try:
            if isinstance(source, list):
                image = ops.array_image(source)
                return image.height, image.width, ops.channels_of_mode(image.mode)
            return ops.header(source)
        except ops.UnreadableImage as exc:
            raise self._unreadable(source, exc) from None

    def _mask_values(self, column: pa.Array) -> list:
        """Distinct pixel values of masks at their own size: grey values as 1-tuples, colours as
        RGB triples (``num_channels`` where set)."""
        seen: set = set()
        for source in column.to_pylist():
            try:
                image = ops.array_image(source) if isinstance(source, list) else ops.open_image(source)
                with image:
                    channels = self.preprocessing.num_channels or (1 if ops.channels_of_mode(image.mode) <= 2 else 3)
                    pixels = np.asarray(ops.converted(image, channels), dtype=np.uint8).reshape(-1, channels)
            except (ops.UnreadableImage, OSError, ValueError) as exc:
                raise self._unreadable(source, exc) from None
            seen.update(map(tuple, np.unique(pixels, axis=0).tolist()))
        return sorted(seen)

    # Transform -------------------------------------------------------------------------------

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        """Each image's pixels, height x width x channels bytes (an output's: a class id per pixel)."""
        target = ops.Target(metadata["height"], metadata["width"], metadata["num_channels"],
                            metadata["resize_method"], nearest=self.is_output)
        sources = column.to_pylist()
        try:
            stored = decode_rows(target, sources, metadata["fill_value"], ops.decode_threads(self.preprocessing.num_processes))
        except RowUnreadable as exc:
            raise self._unreadable(sources[exc.row], exc.reason) from None
        if self.is_output:
            stored = self._masks(stored, sources, target, metadata)
        return pa.Array.from_buffers(pa.binary(stored.shape[1]), len(sources), [None, pa.py_buffer(stored)])

    def _masks(self, pixels: np.ndarray, sources: list, target: ops.Target, metadata: dict) -> np.ndarray:
        """A class id per pixel of each mask (``fill_value`` for a missing one)."""
        ids = np.full((len(sources), target.height * target.width), metadata["fill_value"], np.uint8)
        shape = (target.height, target.width, target.channels)
        for row, source in enumerate(sources):
            if source is not None:
                ids[row] = self._class_ids(pixels[row].reshape(shape), metadata, source).reshape(-1)
        return ids

    def _class_ids(self, pixels: np.ndarray, metadata: dict, source) -> np.ndarray:
        values = metadata["class_values"]
        if values is None:  # the mask's values are the class ids
            ids = pixels[:, :, 0]
            unknown = ids >= metadata["num_classes"]
        else:
            table = {tuple(v): i for i, v in enumerate(values)}
            flat = pixels.reshape(-1, pixels.shape[2])
            distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
            lookup = np.array([table.get(tuple(v), 255) for v in distinct.tolist()], np.uint8)
            ids = lookup[inverse.reshape(-1)].reshape(pixels.shape[:2])
            unknown = ids == 255
        if unknown.any():
            value = pixels[unknown][0].tolist()
            raise DataError(f"image output {self.name!r}: {_described(source)} has the pixel value {value}, which is "
                            f"no class of the training masks ({metadata['num_classes']} classes); masks hold one "
                            f"value per class")
        return ids.astype(np.uint8)

    def _unreadable(self, source, exc: Exception | str) -> DataError:
        return DataError(f"image feature {self.name!r}: cannot read {_described(source)}: {exc}. Give PNG, JPEG or "
                         f"another format Pillow reads, as paths, the files' bytes or arrays; or leave the row out")


def _described(source) -> str:
    if isinstance(source, bytes):
        return f"a file of {len(source)} bytes"
    if isinstance(source, list):
        return "an array"
    return repr(source)
