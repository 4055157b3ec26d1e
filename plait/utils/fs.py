"""Filesystem helpers: fsspec resolution and atomic writes.

Every file plait writes goes to a temporary name first and is renamed into place only when
complete, so a crash never leaves a half-written file that a later run would trust.
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plait.errors import CacheError


def storage_options(credentials: dict | str | None) -> dict:
    """``backend.cache_credentials`` as fsspec storage options (a dict, or a JSON file's path)."""
    if credentials is None:
        return {}
    if isinstance(credentials, dict):
        return _fsspec_options(credentials)
    path = Path(credentials).expanduser()
    if not path.is_file():
        raise CacheError(f"cache_credentials file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CacheError(f"cache_credentials file {str(path)!r} is not valid JSON (line {getattr(exc, 'lineno', '?')})") from None
    if not isinstance(data, dict):
        raise CacheError(f"cache_credentials file {str(path)!r} must hold a JSON object of storage options")
    return _fsspec_options(data)


def _fsspec_options(options: dict) -> dict:
    """Accept the common spellings (endpoint_url at the top level) that s3fs expects nested."""
    options = dict(options)
    endpoint = options.pop("endpoint_url", None) or options.pop("endpoint", None)
    if endpoint:
        options.setdefault("client_kwargs", {})["endpoint_url"] = endpoint
    return options


def resolve(url: str, options: dict | None = None):
    """(filesystem, path) for a local path or an fsspec URL."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **(options or {}))
    except ImportError as exc:
        raise CacheError(f"{url!r} needs an fsspec filesystem package that is not installed: {exc}") from None


def is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def ensure_dir(fs, path: str) -> None:
    """Create a folder on a local filesystem. Object stores have no folders, and creating one
    there can create a bucket, which plait never does behind a user's back."""
    if is_local(fs):
        fs.makedirs(path, exist_ok=True)


def temporary_name(path: str) -> str:
    head, tail = os.path.split(path.rstrip("/"))
    return f"{head}/.{tail}.tmp-{uuid.uuid4().hex[:12]}" if head else f".{tail}.tmp-{uuid.uuid4().hex[:12]}"


@contextmanager
def atomic_open(fs, path: str, mode: str = "wb"):
    """Open ``path`` for writing through a temporary name, renamed into place on success."""
    tmp = temporary_name(path)
    try:
        with fs.open(tmp, mode) as handle:
            yield handle
        fs.mv(tmp, path)
    except BaseException:
        if fs.exists(tmp):
            fs.rm(tmp)
        raise


def write_json_atomic(fs, path: str, data: Any) -> None:
    with atomic_open(fs, path, "w") as handle:
        handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_json(path: str | os.PathLike, data: Any) -> None:
    from fsspec.implementations.local import LocalFileSystem

    write_json_atomic(LocalFileSystem(), str(path), data)


def publish_folder(fs, tmp: str, final: str) -> None:
    """Put a complete folder built at ``tmp`` in place of any older ``final``, then mark it
    complete with ``_SUCCESS``. Locally a rename (the old folder moved aside first, removed
    after); on an object store, which has no rename, a copy of each file, and the ``_SUCCESS``
    marker written last is what tells a complete folder."""
    fs.invalidate_cache()  # other processes may have written into tmp: list it afresh
    old = f"{tmp}.old"
    if fs.exists(final) and is_local(fs):
        fs.mv(final, old, recursive=True)
    elif fs.exists(final):
        fs.rm(final, recursive=True)
    if is_local(fs):
        fs.mv(tmp, final, recursive=True)
    else:
        files = fs.find(tmp)
        fs.copy(files, [posixpath.join(final, posixpath.relpath(f, tmp)) for f in files])
    fs.pipe_file(posixpath.join(final, "_SUCCESS"), b"")
    if fs.exists(old):
        fs.rm(old, recursive=True)
