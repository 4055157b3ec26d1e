"""Which Ray cluster: a running one (``RAY_ADDRESS``, or one started with ``ray start`` on
this machine) or a local one started for the run, sized from the memory this process may use.

Ray's environment (``RAY_ADDRESS``) is read in ``plait.backends.environment``.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from plait.backends.environment import quiet_local_ray_start, ray_address
from plait.errors import BackendError

log = logging.getLogger("plait")

def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast on an address nothing listens on (ray.init would retry for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or address.startswith(("http://", "https://")) or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise BackendError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}). Start it with "
            f"`ray start --head`, fix RAY_ADDRESS, or run with --backend local."
        ) from None


def available_memory() -> int:
    """Physical memory, or the memory limit of this process's cgroup when that is lower (a
    container, a Kubernetes pod, a benchmark's imposed limit)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return min([total, *_cgroup_limits()])


def _cgroup_limits() -> list[int]:
    limits = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return limits
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            candidates = [Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"]
        elif "memory" in controllers.split(","):  # cgroup v1
            candidates = [Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"]
        else:
            continue
        for candidate in candidates:
            try:
                value = candidate.read_text().strip()
            except OSError:
                continue
            if value.isdigit() and int(value) < 1 << 60:  # "max" or a huge number: no limit
                limits.append(int(value))
    return limits


def _object_store_bytes() -> int:
    """A quarter of the memory available, between 256 MiB and 4 GiB: room for the tasks beside it.
    Ray spills to disk beyond it, so a small store slows big jobs down but does not fail them."""
    return int(min(4 << 30, max(256 << 20, available_memory() // 4)))


def connect() -> bool:
    """Join a running cluster or start a local Ray; True when this call started Ray."""
    try:
        import ray
    except ModuleNotFoundError:
        raise BackendError("the ray backend needs `pip install plait[ray]` (ray is not installed)") from None
    if ray.is_initialized():
        return False
    address = ray_address()
    if address:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
        log.info("Joined the Ray cluster at %s.", address)
        return False
    quiet_local_ray_start()
    ray.init(num_cpus=os.cpu_count(), object_store_memory=_object_store_bytes(), include_dashboard=False,
             log_to_driver=False)
    log.info("Started a local Ray instance (%d CPUs).", os.cpu_count())
    return True
