"""Micro-batching: single-row requests that arrive together share one forward pass.

A forward pass of 64 rows costs about what one of a single row does, so under load the server
answers many requests for the price of one. The first row of a batch waits at most ``wait_s``
for company; rows that queued while the model was busy go at once (they have waited already).
The model runs on one worker thread, off the event loop, which keeps reading requests meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import Executor
from typing import Any, Callable


class MicroBatcher:
    def __init__(self, predict: Callable[[list], list], executor: Executor, max_size: int, wait_s: float,
                 on_batch: Callable[[int], None] = lambda rows: None):
        self.predict, self.executor = predict, executor
        self.max_size, self.wait_s, self.on_batch = max_size, wait_s, on_batch
        self._pending: deque[tuple[Any, asyncio.Future, float]] = deque()
        self._arrived = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def submit(self, row: Any) -> Any:
        """The model's answer for one row: a result, or the exception object the model returned
        for it (raised here)."""
        loop = asyncio.get_running_loop()
        if self._task is None:  # started on the loop that serves, whichever runs the app (uvicorn, Ray Serve)
            self._task = loop.create_task(self._run(), name="plait-micro-batcher")
        future = loop.create_future()
        self._pending.append((row, future, time.monotonic()))
        self._arrived.set()
        answer = await future
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._arrived.wait()
            waited = time.monotonic() - self._pending[0][2]
            if len(self._pending) < self.max_size and waited < self.wait_s:
                await asyncio.sleep(self.wait_s - waited)
            batch = [self._pending.popleft() for _ in range(min(self.max_size, len(self._pending)))]
            if not self._pending:
                self._arrived.clear()
            live = [(row, future) for row, future, _ in batch if not future.done()]  # timed-out requests drop out
            if not live:
                continue
            self.on_batch(len(live))
            try:
                answers = await loop.run_in_executor(self.executor, self.predict, [row for row, _ in live])
            except Exception as exc:  # the model failed for the whole batch: each request gets the error
                answers = [exc] * len(live)
            for (_, future), answer in zip(live, answers):
                if not future.done():
                    future.set_result(answer)
