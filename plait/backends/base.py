"""The backend interface: where a run's work executes.

A backend hands out the data engine preprocessing runs on, runs training (in this process by
default; on a worker group for Ray) and releases what it started.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from plait.data.engines import DataEngine


class Backend(ABC):
    name: str

    @abstractmethod
    def data_engine(self) -> DataEngine:
        """The engine that preprocesses data on this backend."""

    def fit(self, job: "FitJob") -> "FitOutput":  # noqa: F821
        """Train: here, in this process, with the local strategy."""
        from plait.training.run import fit
        from plait.training.strategies import get_strategy

        return fit(job, get_strategy("local"))

    def shutdown(self) -> None:
        """Release what this backend started (a Ray instance it launched, say)."""
