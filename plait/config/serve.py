"""The ``serve`` section: how ``plait serve`` answers requests, here and on Ray Serve.

plait's own section (Ludwig's server has no settings). It travels with the model: a config that
trains with a ``serve`` section saves it, and ``plait serve`` reads it back; flags override it.
Plain data: the server itself is ``plait.serving``.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Literal

from pydantic import Field, field_validator, model_validator

from plait.config.base import StrictModel


class AutoscalingConfig(StrictModel):
    """Ray Serve scales the replicas between the bounds to keep each one's queue near the target."""

    min_replicas: int = Field(1, ge=0)
    """The fewest replicas (0 lets an idle deployment scale to none)."""
    max_replicas: int = Field(4, ge=1)
    """The most replicas."""
    target_ongoing_requests: float = Field(16, gt=0)
    """Requests in flight per replica that autoscaling aims for. Single-row requests are batched
    on the replica, so a replica keeps up with many at once."""

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must not exceed max_replicas ({self.max_replicas})")
        return self


class ServeConfig(StrictModel):
    """The model server's limits, its micro-batching and, on Ray Serve, its replicas."""

    max_batch_size: int = Field(64, ge=1)
    """Single-row ``/predict`` requests that arrive together run as one forward pass of at most
    this many rows."""
    batch_wait_ms: float = Field(1.0, ge=0)
    """How long the first request of a micro-batch waits for others (milliseconds). The model
    never waits while idle beyond this; under load, batches fill while the previous one runs."""
    max_batch_rows: int = Field(100_000, ge=1)
    """The most rows one ``/batch_predict`` request may hold (more is a 413)."""
    max_request_bytes: int = Field(64 << 20, ge=1024)
    """The largest request body accepted, in bytes (more is a 413)."""
    max_header_bytes: int = Field(64 << 10, ge=1024)
    """The largest request line and headers accepted, in bytes: more is a 431 and the
    connection is closed. (The local server; on Ray Serve, Serve's proxy reads the headers.)"""
    request_timeout_s: float = Field(30.0, gt=0)
    """A prediction not answered within this many seconds is a 504."""
    body_timeout_s: float = Field(10.0, gt=0)
    """A client that takes longer than this to send its body, or its headers, gets a 408 (the
    local server times the headers; on Ray Serve, Serve's proxy reads them)."""
    num_replicas: int = Field(1, ge=1)
    """Ray Serve: how many replicas hold the model (ignored when ``autoscaling`` is set)."""
    autoscaling: AutoscalingConfig | None = None
    """Ray Serve: scale the replicas with the load instead of a fixed ``num_replicas``."""
    cpus_per_replica: float = Field(1.0, ge=0)
    """Ray Serve: CPUs each replica reserves."""
    gpus_per_replica: float = Field(0.0, ge=0)
    """Ray Serve: GPUs each replica reserves (a fraction shares one); a replica with a GPU
    predicts on it."""
    max_ongoing_requests: int = Field(256, ge=1)
    """Ray Serve: requests one replica takes at once before Serve queues them elsewhere. Keep it
    well above ``max_batch_size``, or micro-batches cannot fill."""
    max_tokens: int = Field(512, ge=1)
    """An LLM: the most tokens one request of the OpenAI endpoints may have generated (its
    ``max_tokens``; more is a 400). A request that does not say gets the model's
    ``generation.max_new_tokens`` within this bound."""
    batch_piece_rows: int = Field(2048, ge=1)
    """A ``/batch_predict`` request with more rows is predicted in pieces of this many: single
    rows that arrive meanwhile run between the pieces, and a request past
    ``request_timeout_s`` stops after its current piece. On Ray Serve, all the replicas predict
    the pieces at once. A batch of one piece answers exactly as ``plait predict``; a larger one
    to float32 rounding."""
    route_prefix: str = "/"
    """Ray Serve: the path the endpoints are under (``/`` gives ``/predict``)."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Origins a browser may call the server from (CORS): ``["https://app.example.com"]``, or
    ``["*"]`` for any. Empty: no CORS headers."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the local server predicts: ``auto`` uses a GPU when one is visible."""
    allowed_file_root: str | None = None
    """An absolute folder of the server whose files requests may name by path instead of sending
    them (image and audio values): a relative path is read from it, an absolute one must lie in
    it. Paths that lead out of it (``..``, symlinks) or name no regular file are refused alike.
    Unset: requests send files' bytes (a file part, or a ``data:...;base64,...`` URL in JSON), and
    every path is refused with the same answer, whatever it names. On Ray Serve every replica's
    node must have the folder."""
    allowed_url_hosts: list[str] = Field(default_factory=list)
    """Hosts (or buckets) whose http, https, s3 and gs URLs requests may name instead of sending a
    file: the server fetches them (redirects not followed). Empty: the server fetches no URL for a
    client."""

    @model_validator(mode="after")
    def _prefix(self):
        if not self.route_prefix.startswith("/"):
            raise ValueError(f"route_prefix must start with '/', got {self.route_prefix!r}")
        return self

    @field_validator("allowed_file_root")
    @classmethod
    def _absolute_root(cls, root: str | None) -> str | None:
        if root is not None and ("://" in root or not os.path.isabs(root)):
            raise ValueError(f"give a folder of the server as an absolute path, such as /srv/images; got {root!r}")
        return root

    @field_validator("allowed_url_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            try:
                ipaddress.ip_address(host)
                continue
            except ValueError:
                pass
            if not host or any(c in host for c in "/:?#@[] \t") or host != host.strip("."):
                raise ValueError(f"{host!r} is not a host name; give each host alone, such as images.example.com "
                                 f"(no scheme, port or path)")
        return hosts
