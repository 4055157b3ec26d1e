"""The backend interface: where a run's work executes.

A backend hands out the data engine preprocessing runs on and releases what it started. The
training and prediction hooks come with the distributed trainers; until then every backend
trains in the driver process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from plait.data.engines import DataEngine


class Backend(ABC):
    name: str

    @abstractmethod
    def data_engine(self) -> DataEngine:
        """The engine that preprocesses data on this backend."""

    def shutdown(self) -> None:
        """Release what this backend started (a Ray instance it launched, say)."""
