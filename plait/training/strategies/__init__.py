"""Strategies by name; distributed ones are imported only when asked for."""

from __future__ import annotations

from plait.errors import ConfigError
from plait.training.strategies.base import Strategy


def get_strategy(name: str = "local", **options) -> Strategy:
    if name == "local":
        from plait.training.strategies.local import LocalStrategy

        return LocalStrategy(**options)
    if name == "ddp":
        from plait.training.strategies.ddp import DDPStrategy

        return DDPStrategy(**options)
    raise ConfigError(f"strategy {name!r} is not available in this version of plait; available: local, ddp")


__all__ = ["Strategy", "get_strategy"]
