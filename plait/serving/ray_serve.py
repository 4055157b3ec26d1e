"""The server as a Ray Serve application: replicas that each hold the model, behind Serve's proxy.

Every replica runs the same app as the local server (``plait.serving.app``) with a
:class:`ReplicaRunner`: it micro-batches the single rows Serve routes to it, and cuts a large
batch into pieces that it sends back through a handle to its own deployment, so that all the
replicas predict one batch together. Replicas, autoscaling and resources come from the ``serve``
section. Each replica reads the model folder itself: on a cluster of several machines it must be
on storage they all see (an ``s3://`` URL, or a shared filesystem).

For a cluster managed with Serve's own tools (``serve run``, a KubeRay RayService), the
application is ``plait.serving.ray_serve:application`` with the argument ``model_path`` (and
optionally ``settings``, keys of the ``serve`` section). ``model_path`` may be an ONNX export of the
model, which the replicas serve with onnxruntime.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from typing import Any

from ray import serve

from plait.config.serve import ServeConfig
from plait.errors import BackendError
from plait.serving.app import build_app
from plait.serving.local import settle_garbage_collector
from plait.serving.metrics import ServerMetrics
from plait.serving.model import ServedModel
from plait.serving.runners import LocalRunner, joined

log = logging.getLogger("plait")

APP_NAME = "plait"
DEPLOYMENT_NAME = "PlaitModel"


class ReplicaRunner(LocalRunner):
    """A replica's runner: its own micro-batches, and large batches shared with its peers."""

    def __init__(self, model: ServedModel, metrics: ServerMetrics):
        super().__init__(model, metrics)
        self._peers = None

    async def predict_batch(self, columns: list[list], rows: int) -> dict[str, Any]:
        piece = self.model.settings.batch_piece_rows
        if rows <= piece:
            return await self.predict_here(columns)
        if self._peers is None:  # this replica's own deployment, whatever the application is named
            context = serve.get_replica_context()
            self._peers = serve.get_deployment_handle(context.deployment, app_name=context.app_name)
        pieces = [[values[start:start + piece] for values in columns] for start in range(0, rows, piece)]
        return joined(await asyncio.gather(*(self._peers.predict_piece.remote(p) for p in pieces)))


@serve.deployment(name=DEPLOYMENT_NAME)
@serve.ingress()
class PlaitModel:
    """One replica: the model, its runner and its app."""

    def __init__(self, model_path: str, settings: dict | None = None):
        import ray

        device = "cuda" if ray.get_gpu_ids() else "cpu"  # a replica given a GPU predicts on it
        self.model = ServedModel(model_path, device=device, settings=settings)
        self.metrics = ServerMetrics()
        self.runner = ReplicaRunner(self.model, self.metrics)
        settle_garbage_collector()

    def __serve_build_asgi_app__(self):
        return build_app(self.model, self.runner, self.metrics)

    async def predict_piece(self, columns: list[list]) -> dict[str, Any]:
        """A piece of a batch that a peer replica cut up."""
        return await self.runner.predict_here(columns)


def deployment_options(settings: ServeConfig) -> dict:
    options: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": settings.cpus_per_replica, "num_gpus": settings.gpus_per_replica},
        "max_ongoing_requests": settings.max_ongoing_requests,
    }
    if settings.autoscaling is not None:
        scaling = settings.autoscaling
        options["autoscaling_config"] = {"min_replicas": scaling.min_replicas, "max_replicas": scaling.max_replicas,
                                         "target_ongoing_requests": scaling.target_ongoing_requests}
    else:
        options["num_replicas"] = settings.num_replicas
    return options


def application(args: dict) -> serve.Application:
    """The application builder for ``serve run plait.serving.ray_serve:application model_path=...``."""
    return _application(args["model_path"], args.get("settings") or {})[0]


def _application(model_path: str, settings: dict, serve_config: ServeConfig | None = None
                 ) -> tuple[serve.Application, ServeConfig]:
    """The bound deployment and its settings; an incomplete model or a bad setting fails here.
    ``serve_config``: the settings, when the caller has read the model already."""
    from plait.serving.predictors import open_folder

    config = serve_config if serve_config is not None else open_folder(model_path, settings).settings
    return PlaitModel.options(**deployment_options(config)).bind(model_path, settings), config


def check_room(settings: ServeConfig) -> None:
    """Refuse replicas a fixed cluster cannot hold (they would wait forever); an autoscaling
    cluster may add the nodes they need. A replica runs on one node, as a training worker does."""
    from plait.backends.ray.cluster import describe_nodes, is_autoscaling, node_resources, room_for

    replicas = settings.autoscaling.min_replicas if settings.autoscaling else settings.num_replicas
    per_replica = {"CPU": settings.cpus_per_replica, "GPU": settings.gpus_per_replica}
    nodes = node_resources()
    room = room_for(per_replica, nodes)
    if room < replicas and not is_autoscaling():
        each = ", ".join(f"{amount:g} {name}" for name, amount in per_replica.items())
        raise BackendError(
            f"{replicas} replica(s) x ({each}) do not fit this Ray cluster, which has room for {room}: a replica "
            f"runs on one node, and the cluster has {describe_nodes(nodes, per_replica)}; lower serve.num_replicas "
            f"(--num-replicas), serve.cpus_per_replica or serve.gpus_per_replica (--cpus-per-replica, "
            f"--gpus-per-replica), or add nodes")


def serve_on_ray(model_path: str, serve_config: ServeConfig, host: str, port: int, settings: dict) -> None:
    """Deploy the model at ``model_path`` (whose settings are ``serve_config``) on the Ray cluster
    (joined, or started here), serve until SIGTERM or Ctrl-C, then remove the application (and
    stop what this call started)."""
    import ray

    from plait.backends.ray.cluster import connect
    from plait.serving.local import listening_socket

    if "://" not in model_path:
        model_path = os.path.abspath(model_path)  # replicas run elsewhere, in other folders
    app, config = _application(model_path, settings, serve_config)
    started_ray = connect()
    try:
        check_room(config)
        if port == 0:  # Serve's proxy needs a number: take one the system says is free
            with listening_socket(host, 0) as probe:
                port = probe.getsockname()[1]
        serve.start(http_options={"host": host, "port": port})
        serve.run(app, name=APP_NAME, route_prefix=config.route_prefix, blocking=False)
        log.info("Serving %s on http://%s:%d%s with Ray Serve (%s)", model_path, host, port,
                 config.route_prefix.rstrip("/"), _replicas_shown(config))
        _wait_for_stop()
        serve.delete(APP_NAME)
        log.info("Stopped: the Ray Serve application %r is removed", APP_NAME)
    finally:
        if started_ray:
            serve.shutdown()
            ray.shutdown()


def _replicas_shown(settings: ServeConfig) -> str:
    if settings.autoscaling:
        return f"{settings.autoscaling.min_replicas} to {settings.autoscaling.max_replicas} replicas, autoscaled"
    return f"{settings.num_replicas} replica(s)"


def _wait_for_stop() -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
