"""A run directory and its layout: the one place that knows what a run writes where.

``<output directory>/<experiment name>_run_<n>/`` holds:

* ``config.yaml`` (the resolved config) and ``description.json`` (the data, the seed and the
  command that started the run, for ``--resume``);
* ``model/`` (the saved model), ``checkpoints/`` (for ``--resume``), ``tensorboard/``, ``logs/``
  (one log per Ray Train worker) and ``ray/`` (Ray Train's own storage);
* ``training_statistics.json``, ``test_statistics.json`` and ``predictions.<format>``.

Every other module asks this object for a path instead of spelling one, so that the run's
storage can change (object storage, in a later step) in one place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from plait.errors import ModelError, UsageError
from plait.utils.fs import write_json


def _check_experiment_name(name: str) -> None:
    """The name is one folder name: a separator (``../x``, ``/tmp/x``, ``a/../../x``) could put the
    run anywhere, outside ``--output-directory``, where it may overwrite what lies there."""
    separators = {"/", "\\", os.sep, *([os.altsep] if os.altsep else [])}
    if any(s in name for s in separators) or "\0" in name:
        raise UsageError(f"--experiment-name {name!r}: must be a plain folder name, without '/' or '\\' (runs go "
                         f"to <output-directory>/<name>_run_<n>); choose where runs go with --output-directory")


class RunDirectory:
    """One run's folder (a local or mounted path that every worker can write)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @classmethod
    def create(cls, output_directory: str | os.PathLike, experiment_name: str) -> "RunDirectory":
        """``<output_directory>/<experiment_name>_run_<n>`` with the first unused n."""
        output_directory = os.fspath(output_directory).removeprefix("file://")
        if "://" in output_directory:
            raise UsageError(f"--output-directory {output_directory!r}: a run directory (checkpoints, "
                             "TensorBoard logs, the model) must be a local or mounted path that every worker can "
                             "write; copy it to object storage when the run is done. (predict and evaluate "
                             "write to URLs.)")
        _check_experiment_name(experiment_name)
        root = Path(output_directory)
        root.mkdir(parents=True, exist_ok=True)
        n = 0
        while (root / f"{experiment_name}_run_{n}").exists():
            n += 1
        path = root / f"{experiment_name}_run_{n}"
        path.mkdir()
        return cls(path)

    @classmethod
    def existing(cls, path: str | os.PathLike) -> "RunDirectory":
        """A run directory written by an earlier run (to resume it); an error if it is not one."""
        run = cls(path)
        if not run.description_file.is_file():
            raise ModelError(f"--resume {os.fspath(path)!r}: not a plait run directory (no description.json)")
        return run

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RunDirectory) and self.path == other.path

    def resolved(self) -> "RunDirectory":
        """The same folder by its absolute path (Ray workers run in folders of their own)."""
        return RunDirectory(self.path.resolve())

    # ---- the layout ------------------------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def description_file(self) -> Path:
        return self.path / "description.json"

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def ray_storage(self) -> Path:
        """Where Ray Train keeps its own run state and reported checkpoints."""
        return self.path / "ray"

    # ---- what the run writes and reads back ------------------------------------------------------

    def write_start(self, config_yaml: str, data: dict, seed: int, command: str) -> None:
        """The resolved config and what ``--resume`` needs to start the same run again."""
        self.config_file.write_text(config_yaml)
        write_json(self.description_file, {"data": data, "random_seed": seed, "command": command})

    def description(self) -> dict:
        return json.loads(self.description_file.read_text())

    def command(self) -> str:
        """The command that started this run (train or experiment)."""
        try:
            return self.description().get("command", "train")
        except (OSError, ValueError):
            return "train"

    def write_statistics(self, kind: str, statistics: Any) -> Path:
        """``<kind>_statistics.json`` (training or test)."""
        path = self.path / f"{kind}_statistics.json"
        write_json(path, statistics)
        return path
