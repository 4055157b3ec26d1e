"""Finding the Ray worker processes of this test session, to kill one as a crash would."""

from __future__ import annotations

import os
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
