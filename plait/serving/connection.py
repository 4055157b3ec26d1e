"""The local server's HTTP/1.1 connections: uvicorn's httptools protocol, with bounds on a head.

httptools reads a request line and headers of any size, for as long as the client takes to send
them: 200 MB of headers were read whole, and a client sending its headers a byte at a time held
its connection open forever. Here a head over ``serve.max_header_bytes`` is answered 431 and one
that takes longer than ``serve.body_timeout_s`` 408, and the connection is closed; the other
clients never notice. What uvicorn answers to a request that is not HTTP (a 400 in plain text) is
plait's ``{"error": ...}`` here, as every other error is. (On Ray Serve, Serve's proxy reads the
requests.)
"""

from __future__ import annotations

import asyncio

import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol


class BoundedHeadProtocol(HttpToolsProtocol):
    def __init__(self, *args, max_head_bytes: int, head_timeout_s: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_head_bytes, self.head_timeout_s = max_head_bytes, head_timeout_s
        self._head_bytes = 0
        self._in_head = self._head_began = False
        self._head_timer: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        self._head_began = False
        super().data_received(data)
        # A read that ends inside a head was all head, unless the head began in it (after the
        # end of the request before): that one read, 256 KiB at most, is not counted.
        if self._in_head and not self._head_began:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self._refuse(431, f"the request's headers have more than {self.max_head_bytes} bytes; this server "
                                  f"takes at most that many (serve.max_header_bytes)")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_began, self._head_bytes = True, True, 0
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def on_headers_complete(self) -> None:
        self._end_head()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, f"the request is not valid HTTP/1.1 ({msg.rstrip('.')})")

    def _head_too_slow(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # The answer to the request before is still being written; the 408 must not cut into it.
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)
            return
        self._refuse(408, f"the request's headers did not arrive within {self.head_timeout_s:g} s "
                          f"(serve.body_timeout_s); send them at once")

    def _end_head(self) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with plait's error and close the connection."""
        self._end_head()
        body = orjson.dumps({"error": message})
        head = [STATUS_LINE[status], *(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers),
                b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n"]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
