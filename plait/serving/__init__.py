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
    """Serve the model at ``model_path`` until SIGTERM or Ctrl-C. ``backend``: ``local``, ``ray``
    or None (the model's backend section decides, and a running Ray cluster is used when found).
    ``settings``: keys of the ``serve`` section that override the model's own."""
    from plait.models.saved import read_model
    from plait.serving.local import resolve_address

    resolve_address(host, port)  # a bad --host or --port fails at once, on either backend
    model_path = os.fspath(model_path)
    saved = read_model(model_path)  # once, here: an incomplete model folder fails before anything starts
    if serving_backend(saved[0], backend) == "ray":
        from plait.serving.ray_serve import serve_on_ray

        serve_on_ray(model_path, saved[0], host, port, settings or {})
        return
    from plait.serving.local import serve_here
    from plait.serving.model import ServedModel

    serve_here(ServedModel(model_path, settings=settings, saved=saved), host, port)


def serving_backend(config_dict: dict, backend: str | None) -> str:
    """``ray`` or ``local`` for a model's config: ``--backend`` first, else its backend type, where
    ``auto`` finds a running Ray cluster; a launcher's model (torchrun, ...) serves locally."""
    from plait.backends import resolve_type
    from plait.config import load_config, with_backend_type

    config = load_config(config_dict)
    if backend is not None:
        config = with_backend_type(config, backend)
    return "ray" if resolve_type(config) == "ray" else "local"


__all__ = ["serve", "serving_backend"]
