"""Serving a trained model over HTTP with Ludwig's endpoints: ``plait serve``.

One ASGI app (``app.py``) reads requests (``payloads.py``, ``values.py``), checks them against the
model (``model.py``) and hands them to a runner (``runners.py``) that micro-batches single rows
(``batcher.py``). It runs under uvicorn in this process (``local.py``) or as a Ray Serve
deployment whose replicas each hold the model (``ray_serve.py``).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("plait")


def serve(model_path: str | os.PathLike, host: str = "127.0.0.1", port: int = 8000, backend: str | None = None,
          settings: dict | None = None) -> None:
    """Serve the model at ``model_path`` (a plait model folder, or its ONNX export) until SIGTERM
    or Ctrl-C. ``backend``: ``local``, ``ray`` or None (a model's backend section decides, and a
    running Ray cluster is used when found; an export is served here). ``settings``: keys of the
    ``serve`` section that override the model's own."""
    from plait.serving.local import resolve_address
    from plait.serving.predictors import open_folder

    resolve_address(host, port)  # a bad --host or --port fails at once, on either backend
    model_path = os.fspath(model_path)
    folder = open_folder(model_path, settings)  # once, here: an incomplete folder fails before anything starts
    if folder.backend(backend) == "ray":
        from plait.serving.ray_serve import serve_on_ray

        serve_on_ray(model_path, folder.settings, host, port, settings or {})
        return
    from plait.serving.local import serve_here
    from plait.serving.model import ServedModel

    serve_here(ServedModel(model_path, settings=settings, folder=folder), host, port)


__all__ = ["serve"]
