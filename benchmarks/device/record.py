"""What a step of the device check hands back: a JSON file it rewrites after every part, so that
a step killed at its time limit still leaves what it measured before.

This module imports neither plait nor torch: the check's driver uses it too, and must report a
plait that fails to import rather than fail with it. For the same reason it writes its JSON
itself rather than through ``plait.utils.fs.write_json``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable


def write_json(path: Path, data: Any) -> None:
    """``data`` at ``path``, whole or not at all (a temporary name, then renamed)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def failure(error: BaseException) -> dict:
    return {"error": f"{type(error).__name__}: {error}"[:2000], "traceback": traceback.format_exc()[-6000:]}


@dataclass
class StepContext:
    """What a step is told: where it runs and how big its work is."""

    cpu: bool
    """True: the CPU dry-run (GPU-only parts are skipped with their reason)."""
    size: str
    """full (the device), small (the CPU dry-run) or tiny (the test of the kit)."""
    work: Path
    """A scratch folder of the step's own, removed afterwards."""
    deadline: float
    """``time.monotonic()`` at which the driver kills the step: parts that loop for a while
    stop early enough to report."""
    parts: frozenset[str] | None = None
    """The parts to run; None: all."""

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()

    def needing(self, first: str, dependents: set[str]) -> StepContext:
        """This context with the part ``first`` chosen too when any of ``dependents`` (parts
        that use what it makes: a trained model, a written folder) is."""
        if self.parts is None or first in self.parts or not self.parts & dependents:
            return self
        return replace(self, parts=self.parts | {first})


@dataclass
class Recorder:
    """The step's result: ``summary`` (one line for the table), ``parts`` (each part's status,
    seconds, figures, or error and traceback) and anything else the step sets."""

    path: Path
    context: StepContext
    data: dict = field(default_factory=lambda: {"parts": {}})

    def set(self, **values) -> None:
        self.data.update(values)
        write_json(self.path, self.data)

    def summary(self, text: str) -> None:
        self.set(summary=text)

    def skip(self, name: str, reason: str) -> None:
        if self.context.parts is not None and name not in self.context.parts:
            return
        self.data["parts"][name] = {"status": "skipped", "reason": reason}
        write_json(self.path, self.data)

    def part(self, name: str, function: Callable[..., dict | None], *args, **kwargs) -> dict | None:
        """Run ``function`` as the part ``name`` unless ``--steps`` left it out; its dict is the
        part's result. A failure is recorded with its traceback and the step goes on."""
        parts = self.context.parts
        if parts is not None and name not in parts:
            return None
        self.data["parts"][name] = {"status": "running"}
        write_json(self.path, self.data)
        started = time.perf_counter()
        try:
            result = function(*args, **kwargs) or {}
            entry = {"status": "ok", **result}
        except Exception as error:  # noqa: BLE001 (a failing part is a finding, not the end of the check)
            result, entry = None, {"status": "failed", **failure(error)}
        entry["seconds"] = round(time.perf_counter() - started, 2)
        self.data["parts"][name] = entry
        write_json(self.path, self.data)
        return result
