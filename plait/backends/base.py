"""The backend interface: where a run's work executes.

A backend hands out the data engine preprocessing runs on, runs training (in this process by
default; on a worker group for Ray; in every process of a launcher such as torchrun) and
releases what it started. Under a launcher several processes run the same command: only the
coordinator writes outputs, and ``broadcast_object`` gives every process the coordinator's value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from plait.data.engines import DataEngine


class Backend(ABC):
    name: str
    is_coordinator: bool = True
    """Whether this process writes the run's outputs (false on the other ranks of a launcher)."""

    @abstractmethod
    def data_engine(self) -> DataEngine:
        """The engine that preprocesses data on this backend."""

    def preprocess(self, run: Callable[[], "PreprocessedData"]) -> "PreprocessedData":  # noqa: F821
        """Run preprocessing (``run`` reads or builds the cache entry)."""
        return run()

    def broadcast_object(self, value):
        """``value`` as the coordinator has it (one process: itself)."""
        return value

    def fit(self, job: "FitJob") -> "FitOutput":  # noqa: F821
        """Train: here, in this process, with the local strategy."""
        from plait.training.run import fit
        from plait.training.strategies import get_strategy

        return fit(job, get_strategy("local"))

    def shutdown(self) -> None:
        """Release what this backend started (a Ray instance it launched, say)."""
