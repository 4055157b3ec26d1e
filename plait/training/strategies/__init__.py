"""Strategies by name. Each lives in its own module, imported only when asked for, so that
``plait --help`` and the local backend never import torch.distributed, DeepSpeed or Horovod."""

from __future__ import annotations

import importlib

from plait.errors import ConfigError
from plait.training.strategies.base import Strategy

STRATEGIES = {
    "local": "plait.training.strategies.local:LocalStrategy",
    "ddp": "plait.training.strategies.ddp:DDPStrategy",
    "fsdp": "plait.training.strategies.fsdp:FSDPStrategy",
    "deepspeed": "plait.training.strategies.deepspeed:DeepSpeedStrategy",
    "horovod": "plait.training.strategies.horovod:HorovodStrategy",
}


def get_strategy(name: str = "local", **options) -> Strategy:
    """The strategy ``name``, built with ``options`` (for distributed ones: ``config``, its
    section of ``backend.trainer.strategy``, and ``trainer``, the trainer section)."""
    if name not in STRATEGIES:
        raise ConfigError(f"backend.trainer.strategy: unknown strategy {name!r}; available: {', '.join(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)(**options)


__all__ = ["STRATEGIES", "Strategy", "get_strategy"]
