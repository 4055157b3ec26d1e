"""Backends by name, and the choice of one from the config, the command line and the
environment: an explicit type wins; ``auto`` joins the process group of a launcher that started
this process (torchrun), else a reachable Ray cluster, else runs locally."""

from __future__ import annotations

import logging

from plait.backends.base import Backend
from plait.errors import BackendError

log = logging.getLogger("plait")


LAUNCHED = ("torchrun", "horovod", "deepspeed")


def resolve_type(config) -> str:
    from plait.backends.environment import detect_launch

    kind, launch = config.backend.type, detect_launch()
    if launch is not None and launch.world_size > 1 and kind in ("local", "ray"):
        raise BackendError(f"{launch.launcher} started {launch.world_size} processes but backend.type is {kind}: "
                           f"each process would run the whole job alone. Remove backend.type (auto) or pass "
                           f"--backend {launch.launcher}")
    if kind != "auto":
        return kind
    if launch is not None:
        return launch.launcher
    from plait.backends.environment import ray_address

    address = ray_address()
    if address is None and not _ray_initialized():
        return "local"
    log.info("Found a Ray cluster (%s): using the ray backend. Pass --backend local to run in this process.",
             address or "this process")
    return "ray"


def _ray_initialized() -> bool:
    import sys

    ray = sys.modules.get("ray")  # only if already imported: detection must not import ray
    return bool(ray is not None and ray.is_initialized())


def get_backend(config) -> Backend:
    kind = resolve_type(config)
    if kind == "local":
        from plait.backends.local import LocalBackend

        return LocalBackend(config)
    if kind == "ray":
        from plait.backends.ray import RayBackend

        return RayBackend(config)
    from plait.backends.launched import LaunchedBackend

    return LaunchedBackend(config, kind)


__all__ = ["Backend", "get_backend", "resolve_type"]
