"""The backend interface: where a run's work executes, and nothing else.

A backend hands out the data engine preprocessing runs on, runs training (``fit``: in this
process by default; on a worker group for Ray; in every process of a launcher such as
torchrun), maps a function over the batches of a data source (here, chunk by chunk, by
default; as a Ray Data job for Ray), and releases what it started. What the work is (preprocess,
train, predict, evaluate) is decided above it; local, Ray and the launchers differ only here.
Under a launcher several processes run the same command: only the coordinator writes outputs,
and ``broadcast_object`` gives every process the coordinator's value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from plait.data.engines import DataEngine

BatchFunction = Callable[[pa.Table], pa.Table]
MakeBatchFunction = Callable[[str], BatchFunction]
"""A picklable factory ``make(device) -> function``: each process that maps batches builds the
function once (loading a model, say) on the device it was given (``cpu`` or ``cuda``)."""


class Backend(ABC):
    name: str
    is_coordinator: bool = True
    """Whether this process writes the run's outputs (false on the other ranks of a launcher)."""

    @abstractmethod
    def data_engine(self) -> DataEngine:
        """The engine that preprocesses data on this backend."""

    def preprocess(self, run: Callable[[], Any]) -> Any:
        """Run preprocessing (``run`` reads or builds the cache entry)."""
        return run()

    def fit(self, job):
        """Train: here, in this process, with the local strategy."""
        from plait.training.run import fit
        from plait.training.strategies import get_strategy

        return fit(job, get_strategy("local"))

    def map_batches(self, source: Any, make_function: MakeBatchFunction, *, ordered: bool = True,
                    what: str = "prediction") -> Iterator[pa.Table]:
        """``function(batch)`` for each batch of ``source`` (raw data or a cached split), here,
        chunk by chunk, in order. ``what`` names the job in messages."""
        from plait.data.reader import iter_chunks

        function = make_function("cpu")
        for chunk in iter_chunks(source):
            yield function(chunk)

    def write_batches(self, source: Any, make_function: MakeBatchFunction, sink) -> Any:
        """``function(batch)`` for each batch of ``source``, written in order to ``sink`` (a
        :class:`~plait.inference.sink.PredictionsSink`): here, as one file."""
        return sink.write_file(self.map_batches(source, make_function))

    def broadcast_object(self, value):
        """``value`` as the coordinator has it (one process: itself)."""
        return value

    def shutdown(self) -> None:
        """Release what this backend started (a Ray instance it launched, say)."""
