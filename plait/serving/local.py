"""The server in this process: the app on uvicorn (uvloop when installed), its connections read
by httptools within bounds (``connection.py``).

SIGTERM or Ctrl-C stops it gracefully: uvicorn stops accepting connections, closes idle ones
and waits for the requests in flight; the model answers each of them before the process exits.
"""

from __future__ import annotations

import errno
import functools
import gc
import logging
import signal
import socket

from plait.serving.app import ENDPOINTS, build_app
from plait.serving.metrics import ServerMetrics
from plait.serving.model import ServedModel
from plait.serving.runners import LocalRunner

log = logging.getLogger("plait")


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound now: a port in use fails here with a clear error, and port 0
    gets a free port whose number is then known."""
    from plait.errors import UsageError

    family, address = resolve_address(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UsageError(_not_an_address(host, exc.strerror)) from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port (0: any free one)") from None
    sock.listen(2048)
    return sock


def resolve_address(host: str, port: int) -> tuple[socket.AddressFamily, tuple]:
    """The socket family and address to listen on at ``host`` (a name, or an address; IPv6 with
    or without brackets) and ``port``; a UsageError naming the flag when either is not one."""
    from plait.errors import UsageError

    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: a port is a number from 0 to 65535 (0: any free one)")
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        family, _, _, _, address = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise UsageError(_not_an_address(host, exc.strerror)) from None
    except UnicodeError:  # a name the IDNA codec refuses: an empty or over-long label
        raise UsageError(_not_an_address(host, "not a host name")) from None
    return family, address


def _not_an_address(host: str, reason: str) -> str:
    return (f"--host {host!r}: {reason}; give an address of this machine: 127.0.0.1 (itself only, the default), "
            f"0.0.0.0 (every interface) or one of its own")


def uvicorn_server(model: ServedModel, metrics: ServerMetrics | None = None, log_level: str = "warning"):
    """A uvicorn server of the app over ``model`` (not started)."""
    import uvicorn

    from plait.serving.connection import BoundedHeadProtocol

    settings = model.settings
    metrics = metrics or ServerMetrics()
    app = build_app(model, LocalRunner(model, metrics), metrics)
    http = functools.partial(BoundedHeadProtocol, max_head_bytes=settings.max_header_bytes,
                             head_timeout_s=settings.body_timeout_s)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                            loop="auto", http=http, timeout_keep_alive=30,
                            # A drain waits for the slowest request the server lets run, no longer.
                            timeout_graceful_shutdown=settings.request_timeout_s + settings.body_timeout_s)
    return uvicorn.Server(config)


def settle_garbage_collector() -> None:
    """Move everything loaded so far (torch, the model, its metadata) out of the collector's
    view. Otherwise each full collection walks all of it: pauses of 110-140 ms every few seconds
    under load, measured with benchmarks/serve.py, which set every request's worst latency."""
    gc.collect()
    gc.freeze()


def serve_here(model: ServedModel, host: str, port: int) -> None:
    """Serve until SIGTERM or Ctrl-C, then drain: every request read in full is answered."""
    sock = listening_socket(host, port)
    host = sock.getsockname()[0]
    metrics = ServerMetrics()
    server = uvicorn_server(model, metrics)
    settle_garbage_collector()
    shown_host = f"[{host}]" if ":" in host else host
    log.info("Serving %s on http://%s:%d (%s)", model.model_dir, shown_host, sock.getsockname()[1], ENDPOINTS)
    # uvicorn drains on SIGTERM or Ctrl-C, restores the handlers it found and raises the signal
    # again: these handlers take it, so the drain is logged and the exit status is 0.
    found = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in found.items():
            signal.signal(sig, handler)
    log.info("Stopped: %d prediction requests accepted, %d answered", metrics.accepted, metrics.answered)
