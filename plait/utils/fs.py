"""Filesystem helpers: fsspec resolution, and the one way plait writes a file or a folder so
that no reader ever trusts a half-written one.

* A file (``atomic_open``; ``atomic_path`` for writers that take a file name; ``write_json``).
  On a local filesystem it is written under a temporary name in its own folder and renamed into
  place on success: a rename within a folder is atomic and replaces an older file in one step.
  On any failure the temporary file is removed and an older file stays as it was.
* A folder (``atomic_folder``, or ``publish_folder`` where several processes build it). It is
  built under a temporary name beside its final place and published whole: on a local
  filesystem by a rename, an older folder renamed aside first and removed after, so a complete
  folder exists at every moment. A folder is complete when its marker file is there (written
  last by the builder, or an empty ``_SUCCESS``): readers on object stores rely on it.
* Object stores (anything not local) have no rename. A file is written straight to its final
  key: an object appears only when its upload completes, so the upload is itself the atomic
  step, and a failed one is abandoned before it completes (a temporary key and a copy would
  move every byte twice for the same guarantee). A folder's files are copied into place, after
  the older folder's marker was removed, with the marker last.
"""

from __future__ import annotations

import errno
import io
import json
import os
import posixpath
import shutil
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterator

from plait.errors import CacheError, PlaitError


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
        return fsspec.core.url_to_fs(url, **bounded_options(url, options))
    except ImportError as exc:
        raise CacheError(f"{url!r} needs an fsspec filesystem package that is not installed: {exc}") from None


# botocore tries a request 5 times (legacy mode) with backoff: an endpoint that never answers
# holds a run for minutes before anything is said. Three attempts still ride out a throttled or
# briefly failing S3; s3fs bounds each connection attempt (5 s) itself. Settings the user gives in
# config_kwargs win.
S3_RETRIES = {"max_attempts": 3, "mode": "standard"}


def bounded_options(url: str, options: dict | None) -> dict:
    """``options`` for ``url``, with S3 retries bounded unless the options set them."""
    options = dict(options or {})
    if isinstance(url, str) and url.split("://", 1)[0].lower() in ("s3", "s3a") and "://" in url:
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", dict(S3_RETRIES))
        options["config_kwargs"] = config
    return options


@contextmanager
def endpoint_errors(options: dict, setting: str):
    """Turn "cannot connect to the storage endpoint" (from botocore or aiohttp, deep inside
    fsspec) into one CacheError naming the endpoint and where it was set; credentials are never
    part of it."""
    try:
        yield
    except PlaitError:  # plait's own message already says what failed (an image URL, say)
        raise
    except Exception as exc:
        failure = unreachable_endpoint(exc)
        if failure is not None:
            endpoint, reason = failure
            raise CacheError(f"cannot connect to the storage endpoint {endpoint} (set by "
                             f"{_endpoint_source(options, setting, endpoint)}): {reason}. Check that it is running "
                             "and that the URL is right") from None
        refusal = storage_refusal(exc)
        if refusal is None:
            raise
        code, bucket = refusal
        endpoint = _origin((options.get("client_kwargs") or {}).get("endpoint_url") or "") or "the default endpoint"
        if code == "NoSuchBucket":
            raise CacheError(f"the bucket {bucket!r} does not exist on the storage endpoint {endpoint}; create it, or "
                             "name one that exists in the URL") from None
        credentials = setting if options.get("key") or options.get("secret") else (
            "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or an AWS profile)")
        raise CacheError(f"the storage endpoint {endpoint} refused the credentials of {credentials} ({code}"
                         f"{f' for the bucket {bucket!r}' if bucket else ''}); check the key and the secret") from None


def _endpoint_source(options: dict, setting: str, endpoint: str) -> str:
    configured = (options.get("client_kwargs") or {}).get("endpoint_url")
    if configured and _origin(configured) == endpoint:
        return f"{setting}.endpoint_url"
    return "the default endpoint, or AWS_ENDPOINT_URL in the environment"


REFUSALS = frozenset({"NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken",
                      "ExpiredToken", "AllAccessDisabled", "InvalidClientTokenId"})
"""Object storage's answers that a user's settings, not plait, must fix."""


def storage_refusal(exc: BaseException) -> tuple[str, str | None] | None:
    """(the storage's error code, the bucket) where ``exc`` (or what caused it) is object storage
    refusing the request for a reason in ``REFUSALS``; None otherwise. Its message is not used:
    only the code and the bucket, never a credential."""
    seen = 0
    while exc is not None and seen < 8:
        error = (getattr(exc, "response", None) or {}).get("Error") if isinstance(getattr(exc, "response", None), dict) else None
        if error and error.get("Code") in REFUSALS:
            return error["Code"], error.get("BucketName")
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def unreachable_endpoint(exc: BaseException) -> tuple[str, str] | None:
    """(endpoint as scheme://host:port, what happened) of a connection failure, or None if
    ``exc`` (or what caused it) is not one. The exception's own text is not used: it holds the
    whole request URL, which may carry a user:password part."""
    seen = 0
    while exc is not None and seen < 8:  # a chain of causes, bounded against cycles
        kind = type(exc)
        names = {c.__name__ for c in kind.__mro__}
        if "EndpointConnectionError" in names or "ConnectTimeoutError" in names:
            reason = "timed out" if "ConnectTimeoutError" in names else "could not connect"
            return _origin(str(getattr(exc, "kwargs", {}).get("endpoint_url", ""))), reason
        if "ClientConnectorError" in names:  # aiohttp, under aiobotocore
            key = getattr(exc, "_conn_key", None) or getattr(exc, "conn_key", None)
            if key is not None:
                return f"{'https' if getattr(key, 'is_ssl', False) else 'http'}://{key.host}:{key.port}", "could not connect"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _origin(url: str) -> str:
    """scheme://host:port of a URL, without a path or any user:password part."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}" if parts.scheme else url


def is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def ensure_dir(fs, path: str) -> None:
    """Create a folder on a local filesystem. Object stores have no folders, and creating one
    there can create a bucket, which plait never does behind a user's back."""
    if is_local(fs):
        fs.makedirs(path, exist_ok=True)


def local_fs():
    """The local filesystem, for code that writes local paths through the helpers below."""
    from fsspec.implementations.local import LocalFileSystem

    return LocalFileSystem()


# ---- writing a file --------------------------------------------------------------------------------

SUCCESS = "_SUCCESS"
"""A complete folder's marker when the builder writes none of its own (Hadoop's and Spark's name)."""


def temporary_name(path: str) -> str:
    """A fresh name beside ``path``: in the same folder (renaming it into place is atomic),
    hidden (listings of the folder pass it over), unique (concurrent writers never share one)."""
    head, tail = posixpath.split(os.fspath(path).rstrip("/"))
    return posixpath.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """A temporary local path to write ``path`` at, for writers that take a file name
    (safetensors, torch.save): renamed to ``path`` on success, removed on any failure."""
    path = os.fspath(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.remove(tmp)
        raise


@contextmanager
def atomic_open(fs, path: str, mode: str = "wb"):
    """``path`` on ``fs`` opened for writing, in bytes (``"wb"``) or UTF-8 text (``"w"``): the
    file appears whole when the block ends, or not at all (see the module's doc)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes a whole file: mode 'wb' or 'w', not {mode!r}")
    opened = _renamed_file(fs, path) if is_local(fs) else _uploaded_object(fs, path)
    with opened as raw:
        if mode == "wb":
            yield raw
            return
        text = io.TextIOWrapper(raw, encoding="utf-8")
        try:
            yield text
        finally:
            text.detach()  # flushes into ``raw`` and leaves closing it (or abandoning it) to ``opened``


@contextmanager
def _renamed_file(fs, path: str):
    with atomic_path(path) as tmp, fs.open(tmp, "wb") as raw:
        yield raw


@contextmanager
def _uploaded_object(fs, path: str):
    raw = fs.open(path, "wb")
    try:
        yield raw
    except BaseException:
        _abandon_upload(fs, path, raw)
        raise
    raw.close()  # completes the upload: the object appears, whole


def _abandon_upload(fs, path: str, raw) -> None:
    """Drop an unfinished upload, so that no object appears and an older one stays."""
    from fsspec.spec import AbstractBufferedFile

    if isinstance(raw, AbstractBufferedFile):  # s3fs, gcsfs, adlfs: an upload buffer
        raw.discard()  # aborts a multipart upload already begun
        raw.closed = True  # so that neither close() nor the finalizer completes the object
        return
    # A file that exists while it is written (another kind of filesystem): no half file stays.
    raw.close()
    with suppress(FileNotFoundError):
        fs.rm(path)


def write_json(path: str | os.PathLike, data: Any, fs=None) -> None:
    """``data`` as indented JSON with sorted keys at ``path`` (on ``fs``, else a local path),
    all or nothing."""
    with atomic_open(fs or local_fs(), os.fspath(path), "w") as handle:
        handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ---- writing a folder ------------------------------------------------------------------------------

_PUBLISH_ATTEMPTS = 5
"""Times a local publish retries when other processes keep publishing the same folder."""


@contextmanager
def atomic_folder(fs, final: str, marker: str = SUCCESS) -> Iterator[str]:
    """A temporary folder beside ``final`` to build a folder in (the block writes there),
    published at ``final`` by ``publish_folder`` when the block ends without an error, and
    removed on any error."""
    tmp = temporary_name(final)
    ensure_dir(fs, tmp)
    try:
        yield tmp
        publish_folder(fs, tmp, final, marker)
    finally:
        remove_folder(fs, tmp)  # after an error; on an object store, the copies' source


def publish_folder(fs, tmp: str, final: str, marker: str = SUCCESS,
                   keep: Callable[[str], bool] | None = None) -> bool:
    """Put the folder built at ``tmp`` (by this process or others) at ``final``, replacing an
    older folder there. ``marker``: the file that marks the folder complete, written last by
    the builder; an empty one is written where the builder wrote none. ``keep(final)`` is
    asked when a folder is already at ``final`` (another process may have built the same one
    meanwhile): True keeps that folder, and ``tmp`` is left for the caller to remove. Returns
    whether ``tmp``'s folder was published."""
    fs.invalidate_cache()  # other processes (Ray workers) may have written into tmp: list it afresh
    if not fs.exists(posixpath.join(tmp, marker)):
        fs.pipe_file(posixpath.join(tmp, marker), b"")
    if is_local(fs):
        return _rename_folder(tmp, final, keep)
    return _copy_folder(fs, tmp, final, marker, keep)


def _rename_folder(tmp: str, final: str, keep: Callable[[str], bool] | None) -> bool:
    """A rename; an older folder is renamed aside first and removed once the new one is in place.
    Another process may publish at ``final`` between two steps: then ask ``keep`` again, and retry."""
    for _ in range(_PUBLISH_ATTEMPTS):
        if keep is not None and os.path.lexists(final) and keep(final):
            return False
        aside = _move_aside(final)
        try:
            os.rename(tmp, final)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):  # not another publisher: put the old one back
                if aside is not None:
                    os.rename(aside, final)
                    aside = None
                raise
        finally:
            if aside is not None:
                _remove_local(aside)
    raise OSError(errno.EBUSY, f"other processes kept publishing at {final!r} while this one tried", final)


def _move_aside(final: str) -> str | None:
    """Rename the folder at ``final`` to a temporary name; that name, or None if there was none."""
    aside = f"{temporary_name(final)}.old"
    try:
        os.rename(final, aside)
    except FileNotFoundError:
        return None
    return aside


def _remove_local(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(FileNotFoundError):
            os.remove(path)


def _copy_folder(fs, tmp: str, final: str, marker: str, keep: Callable[[str], bool] | None) -> bool:
    """An object store has no rename: the files are copied into place, the marker last, after the
    older folder's marker and files were removed (its marker first), so that a reader never
    trusts a folder that is half one and half the other."""
    if fs.exists(final):
        if keep is not None and keep(final):
            return False
        remove_folder(fs, final, marker)
    files = fs.find(tmp)
    last = [f for f in files if f == posixpath.join(tmp, marker)]
    for group in ([f for f in files if f not in last], last):
        if group:
            fs.copy(group, [final + f[len(tmp):] for f in group])
    return True


def remove_folder(fs, path: str, marker: str | None = None) -> None:
    """Remove a folder and what it holds, if it is there; its ``marker`` first, so that a reader
    never trusts a half-removed folder. Another process removing it at the same time is fine."""
    fs.invalidate_cache()  # other processes may have written there
    with suppress(FileNotFoundError):
        if marker is not None and fs.exists(posixpath.join(path, marker)):
            fs.rm_file(posixpath.join(path, marker))
        if fs.exists(path):
            fs.rm(path, recursive=True)
