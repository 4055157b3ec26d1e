"""A folder on the local disk or on object storage, named by a path or any fsspec URL.

Run directories and checkpoints are written through this one object, so that the same code
writes ``results/`` on a laptop and ``s3://bucket/results`` on a cluster without a shared
filesystem. Writes keep the guarantees of ``plait.utils.fs``: a file appears whole or not at
all, and a folder is complete once its marker file is there.

Code that needs a real local path (a writer that takes a file name, a reader that memory-maps)
works on a local copy: :meth:`Folder.fetched` downloads an object-storage folder into a
temporary one (a local folder is used in place), and :func:`built_locally` publishes a folder
built locally.

The storage options (credentials) travel with the object, to Ray workers too, but never appear
in its ``repr`` or in a message.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from plait.utils.fs import (atomic_folder, atomic_open, endpoint_errors, local_fs, remove_folder, resolve, storage_options,
                            write_json)


def is_url(location: str | os.PathLike) -> bool:
    """Whether ``location`` names object storage (or any non-local fsspec filesystem)."""
    text = os.fspath(location)
    return "://" in text and not text.startswith("file://")


class Folder:
    """A folder: a local path, or an fsspec URL with its storage options."""

    def __init__(self, location: str | os.PathLike, options: dict | str | None = None, setting: str = "storage"):
        text = os.fspath(location).removeprefix("file://")
        self.url = text.rstrip("/") if is_url(text) else text
        self._options = options
        self.setting = setting
        """The config setting the credentials came from, named in connection errors."""
        self._resolved = None

    def __getstate__(self) -> dict:  # the filesystem object is rebuilt where the folder is used
        return {**self.__dict__, "_resolved": None}

    def __repr__(self) -> str:
        return f"Folder({self.url!r})"

    def __str__(self) -> str:
        return self.url

    def __fspath__(self) -> str:
        if not self.is_local:
            raise TypeError(f"{self.url} is on object storage, not a local path")
        return self.url

    def __eq__(self, other) -> bool:
        return isinstance(other, Folder) and self.url == other.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __truediv__(self, name: str) -> "Folder":
        child = Folder.__new__(Folder)
        child.__dict__.update(self.__dict__)
        child.url = posixpath.join(self.url, name) if not self.is_local else os.path.join(self.url, name)
        child._resolved = None
        return child

    def resolved(self) -> "Folder":
        """The same folder by its absolute path (Ray workers run in folders of their own)."""
        if not self.is_local:
            return self
        folder = self / ""
        folder.url = os.path.abspath(self.url)
        return folder

    # ---- where it is -------------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return not is_url(self.url)

    @property
    def name(self) -> str:
        return posixpath.basename(self.url)

    @property
    def options(self) -> dict:
        return storage_options(self._options) if not self.is_local else {}

    def _resolve(self):
        if self._resolved is None:
            self._resolved = resolve(self.url, self.options)
        return self._resolved

    @property
    def fs(self):
        return self._resolve()[0]

    @property
    def path(self) -> str:
        """The folder's path on its filesystem (a bucket key prefix on object storage)."""
        return self.url if self.is_local else self._resolve()[1]

    def local(self) -> Path:
        """The folder as a local path (only for a local folder)."""
        return Path(os.fspath(self))

    def file(self, name: str) -> str:
        """The path of file ``name`` inside, on this folder's filesystem."""
        return posixpath.join(self.path, name)

    @contextmanager
    def errors(self):
        """Connection failures named by endpoint and setting, never with credentials."""
        with endpoint_errors(self.options, self.setting):
            yield

    # ---- reading --------------------------------------------------------------------------------------

    def exists(self, name: str = "") -> bool:
        with self.errors():
            return self.fs.exists(self.file(name) if name else self.path)

    def is_file(self, name: str) -> bool:
        with self.errors():
            return self.fs.isfile(self.file(name))

    def read_text(self, name: str) -> str:
        with self.errors(), self.fs.open(self.file(name), "rb") as handle:
            return handle.read().decode("utf-8")

    def names(self) -> list[str]:
        """The names of the files and folders directly inside (none if the folder is not there)."""
        with self.errors():
            self.fs.invalidate_cache(self.path)  # other processes write here
            try:
                entries = self.fs.ls(self.path, detail=False)
            except FileNotFoundError:
                return []
        return sorted(posixpath.basename(entry.rstrip("/")) for entry in entries)

    @contextmanager
    def fetched(self) -> Iterator[Path]:
        """The folder as a local path while the block runs: itself when local, else a temporary
        download of it (removed afterwards)."""
        if self.is_local:
            yield self.local()
            return
        with tempfile.TemporaryDirectory(prefix="plait-fetched-") as tmp:
            self.download(Path(tmp))
            yield Path(tmp)

    def download(self, destination: Path) -> None:
        """Every file inside, copied into the local folder ``destination``."""
        with self.errors():
            self.fs.invalidate_cache(self.path)
            for remote in self.fs.find(self.path):
                target = destination / posixpath.relpath(remote, self.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                self.fs.get_file(remote, str(target))

    # ---- writing ---------------------------------------------------------------------------------------

    def make(self) -> None:
        """Create the folder on a local disk (object storage has no folders to create)."""
        if self.is_local:
            os.makedirs(self.url, exist_ok=True)

    def write_text(self, name: str, text: str) -> None:
        """File ``name`` inside, whole or not at all."""
        self.make()
        with self.errors(), atomic_open(self.fs, self.file(name), "w") as handle:
            handle.write(text)

    def write_json(self, name: str, data: Any) -> None:
        self.make()
        with self.errors():
            write_json(self.file(name), data, self.fs)

    def upload(self, source: Path, names: list[str] | None = None, last: str | None = None) -> None:
        """Files of the local folder ``source`` (all of them, or ``names``) put in this folder on
        object storage, each whole, replacing what is there; ``last`` (a marker file) after all
        the others. (A local folder is written in place, never uploaded to.)"""
        files = names if names is not None else sorted(p.relative_to(source).as_posix()
                                                       for p in source.rglob("*") if p.is_file())
        with self.errors():
            for name in [f for f in files if f != last] + ([last] if last in files else []):
                self.fs.put_file(str(source / name), self.file(name))

    def remove(self, name: str = "", marker: str | None = None) -> None:
        """Remove the folder (or its entry ``name``) and what it holds; ``marker`` first."""
        with self.errors():
            remove_folder(self.fs, self.file(name) if name else self.path, marker)

    def remove_file(self, name: str) -> None:
        with self.errors():
            if self.fs.exists(self.file(name)):
                self.fs.rm_file(self.file(name))


@contextmanager
def built_locally(final: Folder, marker: str) -> Iterator[Path]:
    """A local folder to build ``final`` in, published whole when the block ends (and never on
    an error), replacing an older folder there. On a local disk it is built beside ``final``
    and renamed into place (``plait.utils.fs.atomic_folder``). On object storage it is built in
    a temporary folder; then the older folder's marker goes first, the files follow, ``marker``
    last, so a reader never trusts a folder that is half one and half the other."""
    if final.is_local:
        with atomic_folder(local_fs(), final.url, marker) as tmp:
            yield Path(tmp)
        return
    with tempfile.TemporaryDirectory(prefix="plait-build-") as tmp:
        yield Path(tmp)
        final.remove(marker=marker)
        if not (Path(tmp) / marker).is_file():
            (Path(tmp) / marker).write_bytes(b"")
        final.upload(Path(tmp), last=marker)
