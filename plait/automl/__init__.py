"""Ludwig's AutoML: a config written from the data, and a search that trains the best model.

``columns`` profiles each column and infers its feature type by Ludwig's rules (with the reason);
``auto_config`` turns that into a config (``plait init_config`` writes it as commented YAML) and
the search auto_train runs; ``train`` runs it with plait's search (``plait.search``).
"""

from __future__ import annotations

from typing import Any


def create_auto_config(dataset: Any, target: str, time_limit_s: float | None = None, *,
                       user_config: dict | None = None, backend: str | None = None) -> dict:
    """The config ``auto_train`` would search (Ludwig's ``create_auto_config``): the inferred
    features and, with ``time_limit_s``, the hyperopt section."""
    from plait.automl.train import auto_config

    return auto_config(dataset, target, time_limit_s=time_limit_s, user_config=user_config, backend=backend)[1]


def __getattr__(name: str):
    if name in ("auto_train", "AutoTrainResult"):
        from plait.automl import train

        return getattr(train, name)
    raise AttributeError(f"module 'plait.automl' has no attribute {name!r}")


__all__ = ["create_auto_config", "auto_train", "AutoTrainResult"]
