"""Files in requests: over HTTP a file-valued feature (an image, audio) takes the file's bytes, and
the server reads a path or fetches a URL for a client only where its operator allows it.

A client sends a file as a multipart file part, or in JSON as a data URL:
``"data:image/png;base64,iVBORw0..."`` (any media type, or none: ``"data:;base64,..."``; the
data always base64). Any other string names a file, which the server reads only

* under ``serve.allowed_file_root``: a relative path is read from that folder (it plays the
  dataset's folder), an absolute one must lie in it. The path is resolved (symlinks, ``..``)
  before it is checked, and only a regular file is read, opened without blocking: a FIFO would
  wait for a writer forever on the thread that opened it;
* from the hosts (or buckets) of ``serve.allowed_url_hosts``, by http, https, s3 or gs URLs,
  redirects not followed.

Anything else is refused with one answer whatever it names, so that no answer tells which of the
server's files exist. A file read or fetched is held to ``serve.max_request_bytes``, as a file
sent would be.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import dataclass
from urllib.parse import urlsplit

from plait.config.serve import ServeConfig
from plait.errors import UsageError
from plait.features.files import UnfetchedFile, fetched, is_url

URL_SCHEMES = ("http", "https", "s3", "gs")
"""The URLs a server may fetch for a client (of an allowed host): never file://, nor fsspec's
chained URLs (``simplecache::...``), which name this machine's files or caches."""

SENT_FILE = 'a file part (multipart/form-data), or in JSON a data URL ("data:image/png;base64,...")'
"""How a client sends a file, as error messages say it."""


class FileRefused(ValueError):
    """A request's file that cannot be had: the message says why, and never more than the
    request itself told."""


@dataclass(frozen=True)
class FileAccess:
    """What, besides a file's bytes, the requests to one server may give for a file."""

    root: str | None
    """The real path of ``serve.allowed_file_root``, or None: no path is read."""
    hosts: frozenset[str]
    """``serve.allowed_url_hosts``, lowercase: no URL is fetched when empty."""
    max_bytes: int
    """The largest file read or fetched (``serve.max_request_bytes``)."""

    @classmethod
    def of(cls, settings: ServeConfig) -> "FileAccess":
        """The access a server's settings allow; a root that is no folder here fails at once."""
        root = settings.allowed_file_root
        if root is not None:
            real = os.path.realpath(root)
            if not os.path.isdir(real):
                raise UsageError(f"serve.allowed_file_root (--allowed-file-root) is {root!r}, which is no folder on "
                                 f"this machine; give the folder the requests' files are in, or leave it unset")
            root = real
        return cls(root, frozenset(h.lower() for h in settings.allowed_url_hosts), settings.max_request_bytes)

    def content(self, value: str) -> bytes:
        """The bytes a request's string stands for: a data URL's, or those of the file it names
        where that is allowed (else FileRefused)."""
        if value[:5].lower() == "data:":
            return data_url_bytes(value)
        if is_url(value):
            return self._fetched(value)
        return self._read(value)

    def _read(self, path: str) -> bytes:
        if self.root is None:
            raise FileRefused(f"this server reads no paths (serve.allowed_file_root is unset); send {SENT_FILE}")
        refused = FileRefused(f"a path must name a regular file under the folder this server reads from "
                              f"(serve.allowed_file_root), and this one does not; or send {SENT_FILE}")
        try:
            real = os.path.realpath(os.path.join(self.root, path))
            if os.path.commonpath([self.root, real]) != self.root:
                raise refused
            # O_NONBLOCK: opening a FIFO returns at once (and fstat then refuses it); O_NOFOLLOW: a
            # symlink put in place since realpath looked is not followed out of the root.
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError):  # ValueError: a NUL byte
            raise refused from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise refused
        with os.fdopen(fd, "rb") as handle:
            content = handle.read(self.max_bytes + 1) if info.st_size <= self.max_bytes else b""
        if info.st_size > self.max_bytes or len(content) > self.max_bytes:
            raise FileRefused(f"the file has more bytes than this server reads (serve.max_request_bytes: "
                              f"{self.max_bytes})")
        return content

    def _fetched(self, url: str) -> bytes:
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            host, parts = "", None
        if parts is None or "::" in url or parts.scheme.lower() not in URL_SCHEMES or host not in self.hosts:
            allowed = ("fetches URLs only of the hosts in serve.allowed_url_hosts" if self.hosts else
                       "fetches no URLs (serve.allowed_url_hosts is empty)")
            raise FileRefused(f"this server {allowed}; send {SENT_FILE}")
        try:
            return fetched(url, self.max_bytes, follow_redirects=False)
        except UnfetchedFile as exc:
            raise FileRefused(str(exc)) from None


def data_url_bytes(value: str) -> bytes:
    """The bytes of a data URL whose data is base64."""
    head, comma, data = value.partition(",")
    if not comma or not head.lower().endswith(";base64"):
        raise FileRefused('a data URL must hold base64 data: "data:<media type>;base64,<data>"')
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise FileRefused("the data URL's data is not valid base64 (standard alphabet, no line breaks)") from None
