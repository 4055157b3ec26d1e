"""Decoding a column of images in forked processes or in threads: the same bytes either way, and
a bad file named by its row."""

from __future__ import annotations

import numpy as np
import pytest
from image_data import png_bytes, shapes

from plait.features.image_decoding import RowUnreadable, decode_rows
from plait.features.image_ops import Target

TARGET = Target(height=24, width=20, channels=3, resize="interpolate")


@pytest.fixture
def sources(tmp_path) -> list:
    """300 rows: PNG and JPEG paths, a file's bytes, an array, and a missing value."""
    frame = shapes(tmp_path / "images", rows=297, size=32)
    paths = [str(tmp_path / p) for p in frame["image"]]
    grey = np.arange(30 * 40, dtype=np.uint8).reshape(30, 40) % 200
    return paths + [png_bytes(grey), grey.tolist(), None]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_forked_processes_write_the_bytes_that_threads_write(sources, workers):
    in_threads = decode_rows(TARGET, sources, fill_value=7, workers=workers, processes=False)
    in_processes = decode_rows(TARGET, sources, fill_value=7, workers=workers, processes=True)
    assert in_threads.shape == (300, 24 * 20 * 3)
    assert np.array_equal(in_threads, in_processes)
    assert (in_threads[-1] == 7).all(), "a missing image is the fill value"
    assert np.array_equal(in_threads[0].reshape(24, 20, 3), TARGET.decode(sources[0]))


@pytest.mark.parametrize("processes", [False, True])
def test_a_bad_file_is_named_by_its_row(sources, processes, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(png_bytes(np.zeros((8, 8), np.uint8))[:40])  # a truncated PNG
    sources[200] = str(broken)
    with pytest.raises(RowUnreadable) as caught:
        decode_rows(TARGET, sources, fill_value=0, workers=2, processes=processes)
    assert caught.value.row == 200 and caught.value.reason
