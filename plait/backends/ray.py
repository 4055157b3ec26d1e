"""The Ray backend: joins a running Ray cluster or starts a local one, preprocesses on it with
Dask-on-Ray (default) or Modin, trains on a Ray Train worker group, and predicts and evaluates
as Ray Data jobs.

This module is the one place that reads Ray's environment (``RAY_ADDRESS``).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from plait.backends.base import Backend
from plait.data.engines import get_engine
from plait.errors import BackendError

log = logging.getLogger("plait")

# Where `ray start --head` records the running cluster's address (Ray's default temp dir).
CLUSTER_FILE = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"


def running_cluster_address() -> str | None:
    """The address of a Ray cluster this process can join, without importing ray."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    if CLUSTER_FILE.is_file():
        return CLUSTER_FILE.read_text().strip() or None
    return None


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
    address = running_cluster_address()
    if address:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
        log.info("Joined the Ray cluster at %s.", address)
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # quiets a start-up banner
    ray.init(num_cpus=os.cpu_count(), object_store_memory=_object_store_bytes(), include_dashboard=False,
             log_to_driver=False)
    log.info("Started a local Ray instance (%d CPUs).", os.cpu_count())
    return True


class RayBackend(Backend):
    name = "ray"

    def __init__(self, config):
        self.config = config
        self.started = False
        self.connected = False

    def ensure_connected(self) -> None:
        """Join or start Ray on first use, so that a run served from the cache never starts it."""
        if not self.connected:
            self.started = connect()
            self.connected = True

    def data_engine(self):
        self.ensure_connected()
        processor = self.config.backend.processor
        return get_engine(processor.type, parallelism=processor.parallelism, persist=processor.persist)

    def fit(self, job):
        """Train on a Ray Train worker group (see plait.backends.ray_train)."""
        from plait.backends.ray_train import fit_on_ray

        self.ensure_connected()
        return fit_on_ray(job, self.config.backend.trainer)

    def predict(self, model, dataset, output_directory=None, output_format: str = "parquet"):
        """Batch prediction as a Ray Data job (see plait.backends.ray_predict): a DataFrame, or,
        with ``output_directory``, the folder ``predictions.<output_format>`` of part files."""
        from plait.backends import ray_predict

        model.require_trained()
        self.ensure_connected()
        settings = self.config.backend.trainer
        if output_directory is None:
            return ray_predict.predictions_frame(model, dataset, settings)
        return ray_predict.write_predictions(model, dataset, settings, output_directory, output_format)

    def evaluate(self, model, dataset) -> dict:
        """Metrics merged from per-batch statistics computed by a Ray Data job."""
        from plait.backends.ray_predict import evaluate

        model.require_trained()
        self.ensure_connected()
        return evaluate(model, dataset, self.config.backend.trainer)

    def shutdown(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
