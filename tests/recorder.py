"""A callback that records every hook plait calls (tests of callbacks on each backend)."""

from __future__ import annotations

import os

from plait.callbacks import HOOKS, Callback


class Recorder(Callback):
    """Every hook call, in order, with its arguments (and the process that made it)."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self.processes: set[int] = set()

    def hooks(self) -> list[str]:
        return [name for name, _ in self.calls]


def _recording(hook: str):
    def record(self, **arguments):
        self.calls.append((hook, arguments))
        self.processes.add(os.getpid())
    return record


for _hook in HOOKS:
    setattr(Recorder, _hook, _recording(_hook))
