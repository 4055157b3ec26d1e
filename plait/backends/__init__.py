"""Backends by name, and the choice of one from the config, the command line and the
environment: an explicit type wins; ``auto`` joins a reachable Ray cluster, else runs locally."""

from __future__ import annotations

import logging

from plait.backends.base import Backend
from plait.errors import ConfigError

log = logging.getLogger("plait")


def resolve_type(config) -> str:
    kind = config.backend.type
    if kind != "auto":
        return kind
    from plait.backends.ray import running_cluster_address

    address = running_cluster_address()
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
    raise ConfigError(
        f"backend.type: the {kind} backend is not available in this version of plait yet; "
        f"use local or ray (or --backend local)"
    )


__all__ = ["Backend", "get_backend", "resolve_type"]
