"""The preprocessed-data cache: one directory per (dataset, preprocessing config, seed) key.

An entry is ``<cache_dir>/<dataset name>-<key>/`` holding one Parquet file per split and
``metadata.json``. It is built under a temporary name and published whole
(``plait.utils.fs.publish_folder``, ``metadata.json`` its marker); a reader trusts it only if
``metadata.json`` is present and every file it lists has the recorded size, so a crash at any
point leaves nothing a later run would use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

from plait.data.io import is_dataframe
from plait.errors import CacheError
from plait.utils import fs as fsu

log = logging.getLogger("plait")

# 2: set outputs keep the items training never saw, as the id len(vocabulary).
# 3: text and sequence features are lists of each row's tokens, no longer padded to one length.
CACHE_FORMAT_VERSION = 3
METADATA_FILE = "metadata.json"


def dataset_identity(source: Any, options: dict) -> dict:
    """What identifies a dataset's content cheaply: path, size, mtime and a hash of a sample of
    each file (:func:`content_sample_digest`), or a content hash."""
    if is_dataframe(source):
        digest = hashlib.sha256(_row_hashes(source))
        digest.update(json.dumps([str(c) for c in source.columns]).encode())
        digest.update(json.dumps([str(t) for t in source.dtypes]).encode())
        return {"dataframe_sha256": digest.hexdigest(), "rows": len(source)}
    module = type(source).__module__.split(".")[0]
    if module == "dask":
        from dask.base import tokenize

        return {"dask_token": tokenize(source)}  # deterministic: hashes the graph and its data
    if not isinstance(source, (str, os.PathLike)):
        # A Ray Dataset (or other lazy input) has no cheap content identity: never reuse its cache.
        import uuid

        log.info("A %s input has no stable identity: its preprocessing is not cached.", type(source).__name__)
        return {"uncacheable": uuid.uuid4().hex}
    fs, path = fsu.resolve(os.fspath(source), options)
    from plait.data.io import is_glob

    if is_glob(path):
        files = sorted(fs.glob(path))
    elif not fs.exists(path):
        return {"path": os.fspath(source)}  # reading will report the missing file
    else:
        files = sorted(fs.find(path)) if fs.isdir(path) else [path]
    entries = []
    for file in files:
        info = fs.info(file)
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created")
        entries.append([file, info.get("size"), str(stamp), content_sample_digest(fs, file, info.get("size"))])
    name = os.path.abspath(path) if fs.protocol in ("file", ("file", "local")) else os.fspath(source)
    return {"path": name, "files": entries}


def _row_hashes(frame) -> bytes:
    """pandas' hash of each row; a frame pandas cannot hash (no columns, or lists and dicts in
    cells) by each cell's pickle instead."""
    import pickle

    import pandas as pd

    try:
        return pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
    except (TypeError, ValueError):
        cells = [hashlib.sha256(pickle.dumps(frame.iloc[:, i].tolist())).digest() for i in range(frame.shape[1])]
        return b"".join(cells) + str(frame.shape).encode()


SAMPLE_BYTES = 64 * 1024
MAX_PARQUET_FOOTER_BYTES = 16 * 1024 * 1024


def content_sample_digest(fs, file: str, size: int | None) -> str:
    """A hash of a file's first and last 64 KiB and, for Parquet, its whole footer (the schema
    and every row group's statistics): a file rewritten with the same size and modification
    time (a copy that keeps times, a tool that restores them) almost surely differs there, and
    reading it costs two or three small reads, however large the file."""
    digest = hashlib.sha256()
    with fs.open(file, "rb") as handle:
        digest.update(handle.read(SAMPLE_BYTES))
        if size and size > SAMPLE_BYTES:
            handle.seek(max(SAMPLE_BYTES, size - SAMPLE_BYTES))
            digest.update(handle.read(SAMPLE_BYTES))
        if size and size > 8 and file.lower().endswith((".parquet", ".pq")):
            digest.update(_parquet_footer(handle, size))
    return digest.hexdigest()[:32]


def _parquet_footer(handle, size: int) -> bytes:
    handle.seek(size - 8)
    tail = handle.read(8)
    if tail[4:] != b"PAR1":
        return b""  # not Parquet after all: reading it will say so
    length = min(int.from_bytes(tail[:4], "little"), size - 8, MAX_PARQUET_FOOTER_BYTES)
    handle.seek(size - 8 - length)
    return handle.read(length)


def cache_key(*parts: Any) -> str:
    payload = json.dumps([CACHE_FORMAT_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def default_cache_dir(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)) and "://" not in os.fspath(source):
        return str(Path(source).expanduser().resolve().parent / ".plait-cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return os.path.join(base, "plait")


def entry_name(source: Any, key: str) -> str:
    if isinstance(source, (str, os.PathLike)):
        stem = os.path.basename(os.fspath(source).rstrip("/")).split(".")[0] or "dataset"
    else:
        stem = "dataframe"
    return f"{stem}-{key}"


class Cache:
    """A cache directory on any fsspec filesystem."""

    def __init__(self, cache_dir: str, options: dict):
        self.url = cache_dir
        self.fs, self.root = fsu.resolve(cache_dir, options)

    def path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def lookup(self, name: str, key: str) -> dict | None:
        """The entry's metadata if the entry is complete, else None."""
        entry = self.path(name)
        try:
            with self.fs.open(f"{entry}/{METADATA_FILE}", "r") as handle:
                metadata = json.load(handle)
            if metadata.get("cache_key") != key:
                return None
            for split in metadata["splits"].values():
                for file in split["files"]:
                    if self.fs.info(f"{entry}/{file['file']}")["size"] != file["bytes"]:
                        return None
        except (FileNotFoundError, KeyError, json.JSONDecodeError):
            return None
        except PermissionError as exc:
            raise CacheError(
                f"cannot read the cache at {self.url!r}: access denied ({_reason(exc)}). Check "
                f"backend.cache_credentials, or set backend.cache_dir to a place you can read."
            ) from None
        return metadata

    def build(self, name: str, write: Callable[[Any, str], dict]) -> dict:
        """Build an entry: ``write(fs, tmp_dir)`` writes the files and returns the metadata.
        Another process may build the same entry at the same time (two runs of the same
        config): the first to publish wins, and the other uses the winner's entry."""
        final, tmp = self.path(name), fsu.temporary_name(self.path(name))
        try:
            fsu.ensure_dir(self.fs, tmp)
            metadata = write(self.fs, tmp)
            fsu.write_json(f"{tmp}/{METADATA_FILE}", metadata, self.fs)  # last: it marks the entry complete
            key = metadata["cache_key"]
            if not fsu.publish_folder(self.fs, tmp, final, METADATA_FILE, keep=lambda _: self.lookup(name, key) is not None):
                metadata = self._published_by_another(name, key)
        except PermissionError as exc:
            raise CacheError(
                f"cannot write the cache at {self.url!r}: access denied ({_reason(exc)}). Check "
                f"backend.cache_credentials, or set backend.cache_dir to a writable place."
            ) from None
        except FileNotFoundError as exc:
            raise CacheError(
                f"cannot write the cache at {self.url!r}: {_reason(exc)}. Create the bucket or folder, "
                f"or set backend.cache_dir elsewhere."
            ) from None
        finally:
            fsu.remove_folder(self.fs, tmp)
        return metadata

    def _published_by_another(self, name: str, key: str) -> dict:
        """The complete entry another process published while this one built the same."""
        log.info("Another process published the same preprocessed data at %s first: using it.", self.path(name))
        metadata = self.lookup(name, key)
        if metadata is None:  # a third process replaced it in the meantime: rare enough to ask for a rerun
            raise CacheError(f"the cache entry {self.path(name)!r} kept changing while it was written by several "
                             f"processes at once; run the command again")
        return metadata


def _reason(exc: BaseException) -> str:
    """The storage's own words, without the path (the caller names it) or anything else."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return text.strip().splitlines()[0].rstrip(".")
