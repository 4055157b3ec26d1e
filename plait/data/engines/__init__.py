"""Data engines by name. Adding one is a module and a line in ``ENGINES``; optional engines
are imported only when asked for."""

from __future__ import annotations

import importlib

from plait.data.engines.base import ROW_NUMBER, DataEngine, Source
from plait.errors import ConfigError

ENGINES = {
    "local": ("plait.data.engines.local", "LocalEngine", None),
    "dask": ("plait.data.engines.dask", "DaskEngine", "ray"),
    "modin": ("plait.data.engines.modin", "ModinEngine", "modin"),
}


def get_engine(name: str, **options) -> DataEngine:
    if name not in ENGINES:
        raise ConfigError(f"unknown data engine {name!r}; available: {', '.join(sorted(ENGINES))}")
    module, cls, extra = ENGINES[name]
    try:
        return getattr(importlib.import_module(module), cls)(**options)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"the {name} engine needs `pip install plait[{extra}]` ({exc.name} is missing)") from None


__all__ = ["DataEngine", "Source", "ROW_NUMBER", "ENGINES", "get_engine"]
