"""plait's own errors under Ray's wrappers: a worker's error reaches the driver wrapped by Ray
Train or Ray Data; these find the original, or at least its message."""

from __future__ import annotations

from plait.errors import PlaitError


def plait_error_of(exc: BaseException) -> PlaitError | None:
    """The plait error a worker raised, found under Ray's wrappers (a wrapper may subclass it:
    the original is further down the chain, or among a worker group's failures); None if the
    failure is not one of plait's own."""
    seen = 0
    pending = [exc]
    while pending and seen < 50:
        exc, seen = pending.pop(), seen + 1
        if isinstance(exc, PlaitError) and type(exc).__module__.startswith("plait"):
            return exc
        pending += [e for e in getattr(exc, "worker_failures", {}).values()]
        inner = getattr(exc, "cause", None) or exc.__cause__
        if isinstance(inner, BaseException):
            pending.append(inner)
    return None


def worker_message(exc: BaseException) -> str:
    """The innermost cause's last line: the worker's error, not Ray's wrapping."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
