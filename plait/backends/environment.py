"""The process environment plait reads: the one module that looks at launcher and Ray variables.

Launchers describe a process's place in its group through environment variables (torchrun and
the deepspeed launcher: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``; horovodrun:
``HOROVOD_RANK``, ``HOROVOD_SIZE``; Ray Train sets torchrun's for its workers), and a Ray
cluster is found through ``RAY_ADDRESS`` or the file ``ray start`` leaves. Everything else in
plait is handed what it needs from here (a strategy gets its device and the group's master
address as arguments), so that no other module depends on how a process was started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class Launch:
    """Who started this process, and its place in the group."""

    launcher: str
    rank: int
    world_size: int
    local_rank: int = 0
    master_addr: str | None = None


def detect_launch(environ: Mapping[str, str] = os.environ) -> Launch | None:
    """The launcher this process runs under, from the variables each one sets; None if none."""
    if "HOROVOD_RANK" in environ:
        return Launch("horovod", int(environ["HOROVOD_RANK"]), int(environ["HOROVOD_SIZE"]),
                      int(environ.get("HOROVOD_LOCAL_RANK", 0)))
    if "RANK" in environ and "WORLD_SIZE" in environ and "MASTER_ADDR" in environ:
        # torchrun and the deepspeed launcher set the same variables; --backend deepspeed tells them apart.
        return Launch("torchrun", int(environ["RANK"]), int(environ["WORLD_SIZE"]), int(environ.get("LOCAL_RANK", 0)),
                      environ["MASTER_ADDR"])
    return None


def strategy_options(strategy: str, device: str | None, environ: Mapping[str, str] = os.environ) -> dict:
    """What a strategy is handed about this process besides its config: its device and, for
    horovod (whose Gloo rendezvous server runs beside rank 0), the address rank 0's torch group
    listens on (set by torchrun, the deepspeed launcher and Ray Train), if any."""
    options: dict = {"device": device}
    if strategy == "horovod":
        options["master_addr"] = environ.get("MASTER_ADDR") or None
    return options


def launched_device(launch: Launch) -> str | None:
    """The device of a launched process: the GPU of its local rank, or None (the CPU)."""
    import torch

    return f"cuda:{launch.local_rank}" if torch.cuda.is_available() else None


# ---- Ray ----------------------------------------------------------------------------------------

def ray_cluster_file(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ``ray start --head`` records the running cluster's address (Ray's temp dir)."""
    return Path(environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"


def ray_address(environ: Mapping[str, str] = os.environ) -> str | None:
    """The address of a Ray cluster this process can join: ``RAY_ADDRESS``, else a cluster
    started with ``ray start`` on this machine; None if there is none. Does not import ray."""
    if environ.get("RAY_ADDRESS"):
        return environ["RAY_ADDRESS"]
    cluster_file = ray_cluster_file(environ)
    if cluster_file.is_file():
        return cluster_file.read_text().strip() or None
    return None


def ray_uses_tls(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether Ray's connections use TLS (``RAY_USE_TLS``, Ray's own switch)."""
    return environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def ray_grpc_uses_proxy(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether Ray's gRPC channels go through ``http_proxy`` (``RAY_grpc_enable_http_proxy``;
    off unless set, so a proxy meant for the web does not get the cluster's traffic)."""
    return environ.get("RAY_grpc_enable_http_proxy", "0").lower() in ("1", "true")


def quiet_local_ray_start() -> None:
    """Ray's settings for a local instance plait starts itself: no auth banner at start-up."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
