"""Decoding a column of images into one uint8 array, on every CPU a task may use.

Pillow holds the GIL while it opens a file and parses its header, which is most of the work for
a small image: threads decode 64x64 images barely faster than one. Where it is safe, the rows are
therefore decoded by forked processes that write straight into an anonymous shared mapping, so no
pixel is pickled: each worker inherits its job through the fork, only row ranges go out, and for
a bad file its row and what failed come back.
Forking is not safe in a Ray process (its gRPC and core-worker threads do not survive a fork), so
there, and with one CPU, threads do the work. Both paths give the same bytes.
"""

from __future__ import annotations

import mmap
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from plait.errors import DataError
from plait.features import image_ops as ops

MIN_ROWS_PER_PROCESS = 64
"""Below this many rows a worker, forking costs more than the GIL does."""

_job: tuple | None = None
"""In a worker process: (target, sources, fill value, output array), set by ``_adopt`` from the
arguments the fork carried over (a forked process's arguments are not pickled)."""


class RowUnreadable(Exception):
    """The image of row ``row`` cannot be read; ``reason`` says why."""

    def __init__(self, row: int, reason: str):
        super().__init__(row, reason)
        self.row, self.reason = row, reason


def decode_rows(target: ops.Target, sources: list, fill_value: int, workers: int, processes: bool | None = None) -> np.ndarray:
    """[len(sources), target.bytes_per_image] uint8: each source's pixels, ``fill_value`` where it
    is None. ``processes`` None chooses: forked processes where that is safe and the rows are
    enough to share, threads otherwise. Raises RowUnreadable for the first bad row found."""
    if processes is None:
        processes = workers > 1 and len(sources) >= 2 * MIN_ROWS_PER_PROCESS and fork_is_safe()
    if processes:
        return _decode_in_processes(target, sources, fill_value, workers)
    stored = np.empty((len(sources), target.bytes_per_image), np.uint8)
    job = (target, sources, fill_value, stored)
    ranges = _ranges(len(sources), workers, minimum=16)
    for failure in ops.map_in_threads(lambda bounds: _decode_range(job, *bounds), ranges, workers):
        if failure is not None:
            raise RowUnreadable(*failure)
    return stored


def fork_is_safe() -> bool:
    """False in a process connected to Ray (a driver or a worker)."""
    ray = sys.modules.get("ray")
    return ray is None or not ray.is_initialized()


def _decode_in_processes(target: ops.Target, sources: list, fill_value: int, workers: int) -> np.ndarray:
    size = len(sources) * target.bytes_per_image
    shared = mmap.mmap(-1, max(size, 1))  # MAP_SHARED | MAP_ANONYMOUS: the forked workers write here
    stored = np.frombuffer(shared, np.uint8, count=size).reshape(len(sources), target.bytes_per_image)
    ranges = _ranges(len(sources), workers, minimum=MIN_ROWS_PER_PROCESS // 4)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_adopt,
                                 initargs=((target, sources, fill_value, stored),)) as pool:
            failures = list(pool.map(_decode_job_range, *zip(*ranges)))
    except BrokenProcessPool:
        raise DataError(
            "a process decoding images died without a word (it was killed, or Pillow crashed on a file); "
            "run again with OMP_NUM_THREADS=1 to decode in this process and find the file") from None
    failure = next((f for f in failures if f is not None), None)
    if failure is not None:
        raise RowUnreadable(*failure)
    return stored


def _ranges(rows: int, workers: int, minimum: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of rows: about eight a worker (so that a slow one is shared), none
    smaller than ``minimum`` rows."""
    count = max(1, min(8 * workers, rows // max(1, minimum)))
    bounds = np.linspace(0, rows, count + 1).astype(int).tolist()
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _adopt(job: tuple) -> None:
    global _job
    _job = job


def _decode_job_range(start: int, stop: int) -> tuple[int, str] | None:
    return _decode_range(_job, start, stop)


def _decode_range(job: tuple, start: int, stop: int) -> tuple[int, str] | None:
    """Rows [start, stop) of a job into its array; the first bad row and why, or None."""
    target, sources, fill_value, stored = job
    for row in range(start, stop):
        source: Any = sources[row]
        if source is None:
            stored[row] = fill_value
            continue
        try:
            stored[row] = target.decode(source).reshape(-1)
        except ops.UnreadableImage as exc:
            return row, str(exc)
    return None
