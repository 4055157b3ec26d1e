"""Collected tensors written one file per tensor, as Ludwig writes them (``<name>.npy``), or as
safetensors files; each file appears whole or not at all."""

from __future__ import annotations

import io
import os
import posixpath
import re

import numpy as np

from plait.errors import UsageError
from plait.utils.fs import atomic_open, ensure_dir, resolve

FORMATS = ("npy", "safetensors")


def safe_filename(name: str) -> str:
    """A tensor or layer name as a file name: every character but letters, digits, dots, dashes
    and underscores becomes an underscore."""
    return re.sub(r"[^\w.\-]", "_", name)


def save_tensors(collected: list[tuple[str, np.ndarray]], output_directory: str | os.PathLike,
                 output_format: str = "npy") -> list[str]:
    """Write each ``(name, array)`` to ``<output_directory>/<safe name>.<format>`` (a local path
    or an fsspec URL); the files' paths, in order. A safetensors file holds its one tensor under
    its own name."""
    if output_format not in FORMATS:
        raise UsageError(f"output_format {output_format!r}: give one of {', '.join(FORMATS)}")
    fs, folder = resolve(os.fspath(output_directory))
    ensure_dir(fs, folder)
    written = []
    for name, array in collected:
        path = posixpath.join(folder, f"{safe_filename(name)}.{output_format}")
        with atomic_open(fs, path) as out:
            out.write(_encoded(name, np.ascontiguousarray(array), output_format))
        written.append(path)
    return written


def _encoded(name: str, array: np.ndarray, output_format: str) -> bytes:
    if output_format == "safetensors":
        from safetensors.numpy import save

        return save({name: array})
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
