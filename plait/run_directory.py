"""A run directory and its layout: the one place that knows what a run writes where.

``<output directory>/<experiment name>_run_<n>/`` holds:

* ``config.yaml`` (the resolved config) and ``description.json`` (the data, the seed and the
  command that started the run, for ``--resume``);
* ``model/`` (the saved model), ``checkpoints/`` (for ``--resume``), ``tensorboard/``, ``logs/``
  (one log per Ray Train worker) and ``ray/`` (Ray Train's own storage);
* ``training_statistics.json``, ``test_statistics.json`` and ``predictions.<format>``;
* ``tracking.json``: each experiment tracker's run id (``plait.tracking``), for ``--resume``;
* for a search (``plait hyperopt``): ``trials/`` (a run directory per trial), ``tune/`` (Ray
  Tune's state) and ``hyperopt_statistics.json``.

The output directory is a local path or any fsspec URL (``s3://bucket/results``): every part is
a :class:`~plait.utils.folder.Folder`, written the same way on both. On object storage a cluster
needs no shared filesystem: each process writes its own files straight to the bucket, and what
needs a local file while it grows (TensorBoard events, a worker's log) is written to a local
staging folder and uploaded at every checkpoint and at the end (:meth:`RunDirectory.staging`).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from plait.errors import ModelError, UsageError
from plait.utils.folder import Folder


def _check_experiment_name(name: str) -> None:
    """The name is one folder name: a separator (``../x``, ``/tmp/x``, ``a/../../x``) could put the
    run anywhere, outside ``--output-directory``, where it may overwrite what lies there."""
    separators = {"/", "\\", os.sep, *([os.altsep] if os.altsep else [])}
    if any(s in name for s in separators) or "\0" in name:
        raise UsageError(f"--experiment-name {name!r}: must be a plain folder name, without '/' or '\\' (runs go "
                         f"to <output-directory>/<name>_run_<n>); choose where runs go with --output-directory")


class RunDirectory:
    """One run's folder, on a local disk or on object storage."""

    def __init__(self, root: str | os.PathLike | Folder, credentials: dict | str | None = None):
        self.root = root if isinstance(root, Folder) else Folder(root, credentials, "backend.artifacts_credentials")
        self._staged: dict[str, tuple[Path, Folder, dict]] = {}

    def __getstate__(self) -> dict:  # staging folders belong to the process that made them
        return {**self.__dict__, "_staged": {}}

    @classmethod
    def create(cls, output_directory: str | os.PathLike, experiment_name: str,
               credentials: dict | str | None = None) -> "RunDirectory":
        """``<output_directory>/<experiment_name>_run_<n>`` with the first unused n."""
        _check_experiment_name(experiment_name)
        parent = Folder(output_directory, credentials, "backend.artifacts_credentials")
        taken = set(parent.names())
        n = 0
        while f"{experiment_name}_run_{n}" in taken:
            n += 1
        run = cls(parent / f"{experiment_name}_run_{n}")
        if run.root.is_local:
            os.makedirs(parent.url, exist_ok=True)
            os.mkdir(run.root.url)  # fails if another process took the same n meanwhile
        return run

    @classmethod
    def existing(cls, location: str | os.PathLike, credentials: dict | str | None = None) -> "RunDirectory":
        """A run directory written by an earlier run (to resume it); an error if it is not one."""
        run = cls(location, credentials)
        if not run.root.is_file(DESCRIPTION):
            raise ModelError(f"--resume {os.fspath(location)!r}: not a plait run directory (no {DESCRIPTION})")
        return run

    def __fspath__(self) -> str:
        return os.fspath(self.root)

    def __str__(self) -> str:
        return self.root.url

    def __repr__(self) -> str:
        return f"RunDirectory({self.root.url!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RunDirectory) and self.root == other.root

    @property
    def is_local(self) -> bool:
        return self.root.is_local

    def resolved(self) -> "RunDirectory":
        """The same run directory by its absolute path (Ray workers run in folders of their own)."""
        return RunDirectory(self.root.resolved())

    # ---- the layout ------------------------------------------------------------------------------

    @property
    def model_dir(self) -> Folder:
        return self.root / "model"

    @property
    def checkpoints(self) -> Folder:
        return self.root / "checkpoints"

    @property
    def tensorboard(self) -> Folder:
        return self.root / "tensorboard"

    @property
    def logs(self) -> Folder:
        return self.root / "logs"

    @property
    def ray_storage(self) -> Folder:
        """Where Ray Train keeps its own run state and reported checkpoints."""
        return self.root / "ray"

    @property
    def trials(self) -> Folder:
        """A search's trials: each a run directory of its own, named by its trial id."""
        return self.root / "trials"

    @property
    def tune_state(self) -> Folder:
        """A search's Ray Tune state (Tune names it after its run: the folder's name)."""
        return self.root / "tune"

    # ---- what the run writes and reads back ------------------------------------------------------

    def write_start(self, config_yaml: str, data: dict, seed: int, command: str) -> None:
        """The resolved config and what ``--resume`` needs to start the same run again. Data given
        as a DataFrame is described, not saved (``IN_MEMORY``): such a run resumes from Python,
        given the data again."""
        self.root.write_text(CONFIG, config_yaml)
        described = {key: _described(value) for key, value in data.items()}
        self.root.write_json(DESCRIPTION, {"data": described, "random_seed": seed, "command": command})

    def saved_data(self, location: str) -> dict:
        """The data arguments ``--resume`` starts the run again with; a UsageError when the run
        was given a DataFrame, which its folder does not keep."""
        data = dict(self.description()["data"])
        in_memory = [key for key, value in data.items() if isinstance(value, dict) and IN_MEMORY in value]
        if in_memory:
            raise UsageError(f"--resume {location!r}: the run was given {in_memory[0]} as "
                             f"{data[in_memory[0]][IN_MEMORY]}, which its folder does not keep; resume it from "
                             "Python with the same data, or train from a file")
        return data

    def is_started(self) -> bool:
        """Whether :meth:`write_start` wrote this run's config and description."""
        return self.root.is_file(DESCRIPTION)

    def has_config(self) -> bool:
        return self.root.is_file(CONFIG)

    def config_text(self) -> str:
        return self.root.read_text(CONFIG)

    def has_model(self) -> bool:
        return self.model_dir.exists()

    def description(self) -> dict:
        return json.loads(self.root.read_text(DESCRIPTION))

    def command(self) -> str:
        """The command that started this run (train or experiment)."""
        try:
            return self.description().get("command", "train")
        except (OSError, ValueError):
            return "train"

    def write_statistics(self, kind: str, statistics: Any) -> str:
        """``<kind>_statistics.json`` (training or test)."""
        self.root.write_json(_statistics_file(kind), statistics)
        return self.root.file(_statistics_file(kind))

    def has_statistics(self, kind: str) -> bool:
        """Whether the run finished writing its ``kind`` statistics (training or test)."""
        return self.root.is_file(_statistics_file(kind))

    def read_statistics(self, kind: str) -> Any:
        return json.loads(self.root.read_text(_statistics_file(kind)))

    def tracking_runs(self) -> dict:
        """Each experiment tracker's run of this run directory: ``{tool: {"run_id", "location",
        ...}}`` (``plait.tracking``: ``--resume`` continues the same tracked runs)."""
        return json.loads(self.root.read_text(TRACKING)) if self.root.is_file(TRACKING) else {}

    def write_tracking_run(self, tool: str, run: dict) -> None:
        """Record ``tool``'s run (whole or not at all; the coordinator is the only writer)."""
        self.root.write_json(TRACKING, {**self.tracking_runs(), tool: run})

    def remove_description(self) -> None:
        self.root.remove_file(DESCRIPTION)

    # ---- files that grow while the run goes on ---------------------------------------------------

    def staging(self, part: Folder) -> Path:
        """A local folder to write ``part`` of the run in (TensorBoard events, a worker's log):
        the part itself when the run is local, else a temporary folder of this process that
        :meth:`sync` uploads. It starts with what the part holds already, so that a restarted
        worker appends to its log as it would on a local disk."""
        if part.is_local:
            part.make()
            return part.local()
        if part.url not in self._staged:
            local = Path(tempfile.mkdtemp(prefix=f"plait-{_safe(part.name)}-"))
            part.download(local)
            self._staged[part.url] = (local, part, _signatures(local))
        return self._staged[part.url][0]

    def sync(self) -> None:
        """Upload the files this process staged that changed since the last sync (each file
        whole: it is put in one request)."""
        for url, (local, part, uploaded) in self._staged.items():
            now = _signatures(local)
            changed = sorted(name for name, signature in now.items() if uploaded.get(name) != signature)
            if changed:
                part.upload(local, changed)
            self._staged[url] = (local, part, now)


def _signatures(folder: Path) -> dict[str, tuple[int, int]]:
    """{file name relative to ``folder``: (size, modification time in ns)}."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


CONFIG = "config.yaml"
DESCRIPTION = "description.json"
TRACKING = "tracking.json"


def _statistics_file(kind: str) -> str:
    return f"{kind}_statistics.json"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]


IN_MEMORY = "in_memory"
"""description.json's mark of data that was a DataFrame (its shape), in place of a path."""


def _described(value):
    if type(value).__name__ == "DataFrame":
        rows, columns = value.shape
        return {IN_MEMORY: f"a pandas DataFrame of {rows:,} rows and {columns} columns"}
    return value
