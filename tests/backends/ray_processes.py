"""Finding the Ray worker processes of this test session, to kill one as a crash would."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def session_processes(marker: bytes) -> list[int]:
    """Live processes whose command line holds ``marker`` (Ray names its workers after what they
    run, e.g. ``ray::RayTrainWorker`` or ``MapBatches(BatchActor)``) and that descend from this
    process, which started the session's raylet: never another session's."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                if os.getpid() in ancestors(int(entry.name)):
                    pids.append(int(entry.name))
        except OSError:
            pass
    return sorted(pids)


def ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        chain.append(pid)
    return chain


@contextmanager
def killing_one_when(ready: Callable[[], bool], marker: bytes, pick: int = -1,
                     unless: Callable[[], bool] = lambda: False) -> Iterator[list[int]]:
    """Within the block, SIGKILL one of the session's ``marker`` processes (the ``pick``-th by pid)
    as soon as ``ready()`` holds, unless ``unless()`` holds by then; yields the killed pids.

    The watch lasts exactly as long as the block: a slow machine only delays the kill (never
    kills early, as a deadline would), and no watcher outlives its test to kill another's worker."""
    killed: list[int] = []
    block_ended = threading.Event()

    def watch():
        while not ready():
            if block_ended.wait(0.01):
                return
        found = session_processes(marker)
        if found and not unless():
            os.kill(found[pick], signal.SIGKILL)
            killed.append(found[pick])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield killed
    finally:
        block_ended.set()
        watcher.join()
