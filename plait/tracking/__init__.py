"""Experiment tracking: MLflow, Weights & Biases, Aim and Comet, as callbacks.

The config's ``tracking`` list (``plait.config.tracking``; the CLI's ``--mlflow``, ``--wandb``,
``--aim`` and ``--comet`` add items) names the tools; :func:`trackers` builds one
:class:`~plait.tracking.base.Tracker` per item through ``TRACKERS``, and ``Model`` adds them to its
callbacks, so they are called on the coordinator on every backend. What is logged, and under which
names, is written once in ``base``; each tool's module says only how it logs. A tool's package is
imported when its run starts, never before.
"""

from __future__ import annotations

from plait.tracking.aim import AimTracker
from plait.tracking.base import Tracker
from plait.tracking.comet import CometTracker
from plait.tracking.mlflow import MLflowTracker
from plait.tracking.wandb import WandbTracker

TRACKERS: dict[str, type[Tracker]] = {tracker.type: tracker for tracker in
                                      (MLflowTracker, WandbTracker, AimTracker, CometTracker)}
"""The tracker of each ``tracking[].type``."""


def build(settings) -> Tracker:
    """The tracker a config item describes."""
    return TRACKERS[settings.type](settings)


def trackers(config, given: list = ()) -> list[Tracker]:
    """A tracker for each item of the config's ``tracking`` list, except the tools ``given``
    already holds a tracker of (a search's trials get the search's, told its run)."""
    taken = {callback.type for callback in given if isinstance(callback, Tracker)}
    return [build(settings) for settings in getattr(config, "tracking", []) if settings.type not in taken]


__all__ = ["TRACKERS", "Tracker", "build", "trackers"]
