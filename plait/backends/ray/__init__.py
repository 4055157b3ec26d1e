"""The Ray backend: joins a running Ray cluster or starts a local one (``cluster``),
preprocesses on it with Dask-on-Ray (default) or Modin, trains on a Ray Train worker group fed by
the Ray Data loader (``train``, ``loader``; a GBM's trees grow in the training process), and maps functions over batches of data as Ray Data
jobs (``batches``): prediction and evaluation at scale.
"""

from __future__ import annotations

from plait.backends.base import Backend
from plait.backends.ray.cluster import connect
from plait.data.engines import get_engine


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
        """Train on a Ray Train worker group (see plait.backends.ray.train). A GBM boosts in this
        process, on LightGBM's threads (a search's trials are spread over the cluster by Tune)."""
        from plait.backends.ray.train import fit_on_ray

        if job.config.model_type == "gbm":
            return super().fit(job)
        self.ensure_connected()
        return fit_on_ray(job, self.config.backend.trainer)

    def map_batches(self, source, make_function, *, ordered: bool = True, what: str = "prediction"):
        """A Ray Data job: read tasks, an autoscaling pool of actors applying the function."""
        from plait.backends.ray.batches import mapped_batches

        self.ensure_connected()
        return mapped_batches(source, make_function, self.config.backend.trainer, ordered, what)

    def write_batches(self, source, make_function, sink):
        """A Ray Data job whose write tasks each write a part file (see plait.inference.sink)."""
        from plait.backends.ray.batches import write_mapped_batches

        self.ensure_connected()
        return write_mapped_batches(source, make_function, self.config.backend.trainer, sink)

    def shutdown(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
