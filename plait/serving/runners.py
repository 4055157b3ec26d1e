"""Where the server's predictions are computed: the seam between the HTTP app and the model.

:class:`LocalRunner` predicts in this process, single rows micro-batched and batches whole, on
one worker thread. A Ray Serve replica uses it too, and in addition cuts a large batch into pieces
that all the replicas predict at once (``plait.serving.ray_serve``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from plait.serving.batcher import MicroBatcher
from plait.serving.metrics import ServerMetrics
from plait.serving.model import ServedModel

if TYPE_CHECKING:
    import pyarrow as pa

    from plait.inference.generate import Generated


class Runner(Protocol):
    async def predict_row(self, row: tuple) -> dict:
        """The predictions for one checked row (``ServedModel.check_row``), as one flat dict."""

    async def predict_batch(self, columns: list[list], rows: int) -> dict[str, Any]:
        """The predictions for a batch's checked columns (``ServedModel.check_batch``), by
        prediction column."""

    async def explain(self, columns: list[list], options) -> "pa.Table":
        """Integrated gradients for a request's checked columns (``ExplainOptions``: what to
        explain), a row per (row, explained class)."""

    async def generate(self, item) -> "Generated":
        """An LLM's text for one :class:`~plait.serving.openai_api.GenerationItem`, generated
        in a batch with the other requests' that arrive together."""

    async def stop(self) -> None:
        """Finish: called once the server has answered its last request."""


class LocalRunner:
    def __init__(self, model: ServedModel, metrics: ServerMetrics):
        settings = model.settings
        self.model = model
        # One thread: torch parallelizes each forward pass itself, and batches must not contend.
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="plait-predict")
        self.batcher = MicroBatcher(model.predict_rows, self.executor, settings.max_batch_size,
                                    settings.batch_wait_ms / 1000, on_batch=metrics.micro_batch.observe)
        # An LLM's generation batches the same way: texts asked for together share each step.
        self.generation = MicroBatcher(model.generate_rows, self.executor, settings.max_batch_size,
                                       settings.batch_wait_ms / 1000, on_batch=metrics.micro_batch.observe)

    async def predict_row(self, row: tuple) -> dict:
        return await self.batcher.submit(row)

    async def predict_batch(self, columns: list[list], rows: int) -> dict[str, Any]:
        return await self.predict_here(columns)

    async def generate(self, item) -> "Generated":
        return await self.generation.submit(item)

    async def predict_here(self, columns: list[list]) -> dict[str, Any]:
        """A batch's predictions on this process's model thread, in pieces of
        ``serve.batch_piece_rows`` rows (at most one forward pass of the predictor: an LLM
        generates for few rows at a time). The thread is never held for long: single rows that
        arrive meanwhile run between the pieces, and a request abandoned at its time limit (a
        504) stops after its current piece, instead of keeping the model busy and making the
        requests after it time out too."""
        loop = asyncio.get_running_loop()
        step = min(self.model.settings.batch_piece_rows, self.model.predictor.batch_size)
        rows = len(columns[0])
        parts = []
        for start in range(0, rows, step):
            piece = columns if rows <= step else [values[start:start + step] for values in columns]
            parts.append(await loop.run_in_executor(self.executor, self.model.predict_batch, piece))
        return joined(parts)

    async def explain(self, columns: list[list], options) -> "pa.Table":
        """Explanations on the model thread, as a batch's predictions run (:meth:`predict_here`),
        in pieces of at most one pass of integrated gradients (``ROWS_PER_PASS`` interpolated
        rows): single rows run between the pieces, and a request past its time limit stops after
        its current one. Not micro-batched: an explanation costs ``steps`` forward and backward
        passes, and sharing them saves little."""
        from plait.explain.integrated_gradients import ROWS_PER_PASS
        from plait.serving.explanations import numbered

        loop = asyncio.get_running_loop()
        step = max(1, min(self.model.settings.batch_piece_rows, ROWS_PER_PASS // options.steps))
        rows = len(columns[0])
        parts, starts = [], list(range(0, rows, step))
        for start in starts:
            piece = columns if rows <= step else [values[start:start + step] for values in columns]
            parts.append(await loop.run_in_executor(self.executor, self.model.explain_batch, piece, options.output,
                                                    options.steps, options.every_class))
        return numbered(parts, starts)

    async def stop(self) -> None:
        await self.batcher.stop()
        await self.generation.stop()
        self.executor.shutdown(wait=True)


def joined(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The predictions of consecutive pieces of a batch as those of the whole."""
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) if isinstance(parts[0][name], np.ndarray)
            else [v for p in parts for v in p[name]] for name in parts[0]}
