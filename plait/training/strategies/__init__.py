"""Strategies by name. Each lives in its own module, imported only when asked for, so that
``plait --help`` and the local backend never import torch.distributed, DeepSpeed or Horovod.

The config describes a strategy as plain data (a ``backend.trainer.strategy`` section whose
``type`` names it); this registry turns that section into the strategy, and checks it on the
driver before any worker starts. A strategy class may define ``check(section, steps)`` for
settings it would refuse (``steps``: the run's ``StepPlan``)."""

from __future__ import annotations

import importlib

from plait.errors import ConfigError
from plait.training.strategies.base import StepPlan, Strategy
from plait.training.strategies.state import StateIO, unwrap

STRATEGIES = {
    "local": "plait.training.strategies.local:LocalStrategy",
    "ddp": "plait.training.strategies.ddp:DDPStrategy",
    "fsdp": "plait.training.strategies.fsdp:FSDPStrategy",
    "deepspeed": "plait.training.strategies.deepspeed:DeepSpeedStrategy",
    "horovod": "plait.training.strategies.horovod:HorovodStrategy",
}


def strategy_class(name: str) -> type[Strategy]:
    """The class of the strategy ``name``, its module imported now."""
    if name not in STRATEGIES:
        raise ConfigError(f"backend.trainer.strategy: unknown strategy {name!r}; available: {', '.join(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def get_strategy(name: str = "local", **options) -> Strategy:
    """The strategy ``name``, built with ``options`` (for distributed ones: ``config``, its
    section of ``backend.trainer.strategy``)."""
    return strategy_class(name)(**options)


def build_strategy(section, device: str | None = None, **place) -> Strategy:
    """The strategy a ``backend.trainer.strategy`` section names, on ``device`` (default: the
    CPU). Distributed ones join their process group. ``place``: what the backend read about this
    process that the strategy needs besides its config (``master_addr`` for horovod)."""
    return get_strategy(section.type, config=section, device=device, **place)


def check_strategy(section, steps: StepPlan | None = None) -> None:
    """Refuse settings the strategy would refuse on a worker, before any worker starts."""
    check = getattr(strategy_class(section.type), "check", None)
    if check is not None:
        check(section, steps)


__all__ = ["STRATEGIES", "StateIO", "StepPlan", "Strategy", "build_strategy", "check_strategy", "get_strategy", "strategy_class",
           "unwrap"]
