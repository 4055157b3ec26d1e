"""Features whose values are files (images, audio, and any type added later): where a path in the
data is read from, and which rows name no file, written once for all of them.

The rule is Ludwig's: a relative path is read from the dataset's folder (``data_directory``, set by
whoever reads the dataset; it travels with the processors to Ray's workers, whose working
directories differ), or from the working directory for data in memory. An absolute path, a path
from ``~`` and an fsspec URL (``s3://...``) are read as given. A model server never hands a
processor a path: it reads a request's files itself, within what its operator allows
(``plait.serving.files``), and passes their bytes.
"""

from __future__ import annotations

import logging
import os
import stat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features.base import FeatureProcessor

log = logging.getLogger("plait")

EXAMPLES = 3
"""How many bad files an error names."""


def is_url(path: str) -> bool:
    """An fsspec URL (``s3://...``, ``http://...``, ``simplecache::s3://...``), not a local path."""
    return "://" in path or "::" in path


def resolved(path: str, directory: str | None) -> str:
    """Where ``path`` is read from: relative to ``directory`` (None: the working directory)."""
    if is_url(path):
        return path
    path = os.path.expanduser(path)
    if os.path.isabs(path) or not directory:
        return path
    return f"{directory.rstrip('/')}/{path}" if is_url(directory) else os.path.join(directory, path)


class UnfetchedFile(Exception):
    """A URL whose file could not be fetched; the message says why, in one line."""


def fetched(url: str, max_bytes: int | None = None, follow_redirects: bool = True) -> bytes:
    """A file's bytes from an fsspec URL (at most ``max_bytes``: more is an UnfetchedFile); any
    failure to fetch it (no such file, an endpoint that does not answer, refused credentials) is
    an UnfetchedFile saying it in one line."""
    import fsspec

    from plait.utils.fs import unreachable_endpoint

    options = {} if follow_redirects or not url.lower().startswith(("http://", "https://")) else {"allow_redirects": False}
    try:
        with fsspec.open(url, "rb", **options) as remote:
            content = remote.read() if max_bytes is None else remote.read(max_bytes + 1)
    except Exception as exc:  # each filesystem and client library raises its own kinds
        unreachable = unreachable_endpoint(exc)
        if unreachable is not None:  # fsspec's http says "not found" for a refused connection
            raise UnfetchedFile(f"cannot connect to {unreachable[0]} ({unreachable[1]})") from None
        if isinstance(exc, FileNotFoundError):
            raise UnfetchedFile("no such file") from None
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnfetchedFile(f"cannot fetch it ({type(exc).__name__}: {reason})") from None
    if max_bytes is not None and len(content) > max_bytes:
        raise UnfetchedFile(f"the file has more than {max_bytes} bytes")
    return content


def is_file_with_content(path: str) -> bool:
    """A regular file of at least one byte (a folder, a FIFO or a device is none: opening a FIFO
    would wait for a writer forever)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size > 0


class FileFeature(FeatureProcessor):
    """A feature whose cells name files (paths, strings) or hold them (their bytes, a binary
    column). Its ``prepare`` calls :meth:`file_paths` or :meth:`file_contents`, so a row without
    a file is found before anything is decoded, the same way for every type."""

    decodes_files = True

    def file_paths(self, column: pa.Array) -> pa.Array:
        """Paths with blank cells as missing values, each resolved by the one rule (see the
        module); a local file that is missing, empty or not a regular file is an error, or with
        drop_row a missing value. (A URL is checked when it is read.)"""
        paths = pc.utf8_trim_whitespace(column.cast(pa.string()))
        values = [None if p is None or p == "" else resolved(p, self.data_directory) for p in paths.to_pylist()]
        bad = np.array([p is not None and not is_url(p) and not is_file_with_content(p) for p in values], dtype=bool)
        return self._without_missing_files(pa.array(values, pa.string()), bad, lambda i: repr(values[i]))

    def file_contents(self, column: pa.Array) -> pa.Array:
        """The files' bytes; an empty value is a missing file."""
        column = column.cast(pa.binary())
        empty = pc.fill_null(pc.equal(pc.binary_length(column), 0), False)
        return self._without_missing_files(column, empty.to_numpy(zero_copy_only=False), lambda i: "an empty file")

    def where_relative_paths_are_read(self) -> str:
        if self.data_directory:
            return f"the dataset's folder, {self.data_directory}"
        return f"the working directory, {os.getcwd()} (the data is not a file)"

    def _without_missing_files(self, column: pa.Array, bad: np.ndarray, describe) -> pa.Array:
        if not bad.any():
            return column
        where = np.flatnonzero(bad)
        examples = ", ".join(describe(i) for i in where[:EXAMPLES])
        what = (f"{self.type} feature {self.name!r}: {len(where)} of {len(column)} rows of column {self.column!r} name "
                f"a file that is missing, empty or not a regular file ({examples})")
        if not self.drops_missing_rows:
            base = (f"; relative paths are read from {self.where_relative_paths_are_read()}"
                    if pa.types.is_string(column.type) else "")
            raise DataError(f"{what}{base}. Fix the paths or the files, or set preprocessing.missing_value_strategy: "
                            f"drop_row to leave those rows out")
        log.warning("%s; those rows are left out (missing_value_strategy: drop_row).", what)
        return pc.if_else(pa.array(bad), pa.scalar(None, column.type), column)
