"""What a person watching training sees, from the coordinator only: a log line per evaluation,
TensorBoard scalars and a progress bar per epoch; and the epoch's speed those report."""

from __future__ import annotations

import logging
import time
from typing import Iterable, Iterator

import torch

log = logging.getLogger("plait")

SHOWN_METRICS = ("loss", "accuracy", "roc_auc", "r2", "jaccard")
"""The metrics of each output the log line shows (TensorBoard gets all of them)."""


class EpochMeter:
    """Rows trained and time spent waiting for the next batch, over one epoch on one worker."""

    def __init__(self):
        self.started = time.perf_counter()
        self.rows = 0
        self.waiting = 0.0

    def timed(self, batches: Iterable) -> Iterator:
        iterator = iter(batches)
        while True:
            asked = time.perf_counter()
            batch = next(iterator, None)
            self.waiting += time.perf_counter() - asked
            if batch is None:
                return
            yield batch

    def elapsed(self) -> float:
        return max(time.perf_counter() - self.started, 1e-9)

    def summary(self, strategy) -> dict:
        """Rows trained by all workers, rows per second and the mean fraction of the epoch each
        worker waited on data (evaluation excluded); with several workers, each one's too. One
        all-reduce, once per epoch: each worker fills its own slots of a zero vector."""
        elapsed, n, rank = self.elapsed(), strategy.world_size, strategy.rank
        mine = torch.zeros(3 * n, dtype=torch.float64, device=strategy.device)
        mine[rank], mine[n + rank], mine[2 * n + rank] = float(self.rows), self.waiting / elapsed, elapsed
        rows, waiting, seconds = strategy.all_reduce_sum(mine).cpu().view(3, n)
        summary = {"rows": int(rows.sum()), "rows_per_s": float(rows.sum()) / elapsed,
                   "data_wait_fraction": float(waiting.mean())}
        if n > 1:
            summary["rows_per_s_per_worker"] = (rows / seconds.clamp(min=1e-9)).tolist()
            summary["data_wait_fraction_per_worker"] = waiting.tolist()
        return summary


class EpochBar:
    """One epoch's progress bar (batches, loss, rows per second over all workers); does nothing
    where no bar is shown."""

    def __init__(self, bar, meter: EpochMeter, world_size: int):
        self.bar, self.meter, self.world_size = bar, meter, world_size

    def show(self, index: int, last: bool, loss: float) -> None:
        if self.bar is None or not (index % 10 == 0 or last):  # every 10 batches: tqdm is not free
            return
        self.bar.update(index + 1 - self.bar.n)
        self.bar.set_postfix(loss=f"{loss:.4f}", rows_per_s=f"{self.meter.rows * self.world_size / self.meter.elapsed():,.0f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Reporter:
    """The log line and TensorBoard scalars of each evaluation, and the progress bars."""

    def __init__(self, strategy, run_dir, progress_bar: bool):
        self.strategy, self.run_dir = strategy, run_dir
        self.progress_bar = progress_bar and strategy.is_coordinator
        self.writer = None

    def open(self) -> None:
        """Start the TensorBoard log in the run directory (coordinator only)."""
        if self.strategy.is_coordinator and self.run_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is a dependency; a trimmed install still trains
                log.warning("tensorboard is not installed; no TensorBoard logs will be written")
                return
            self.writer = SummaryWriter(log_dir=str(self.run_dir.staging(self.run_dir.tensorboard)))

    def flush(self) -> None:
        """Everything logged so far written to the event file (before the run directory syncs)."""
        if self.writer:
            self.writer.flush()

    def close(self) -> None:
        if self.writer:
            self.writer.close()

    def epoch_bar(self, batches: int, epoch: int, meter: EpochMeter) -> EpochBar:
        """The bar of epoch ``epoch`` (counted from 0), ``batches`` long."""
        if not self.progress_bar:
            return EpochBar(None, meter, self.strategy.world_size)
        from tqdm.auto import tqdm

        bar = tqdm(total=batches, desc=f"epoch {epoch + 1}", unit="batch", leave=False, dynamic_ncols=True, disable=None)
        return EpochBar(bar, meter, self.strategy.world_size)

    def evaluation(self, record: dict) -> None:
        """One history record: a log line, and its scalars in TensorBoard."""
        if not self.strategy.is_coordinator:
            return
        if self.writer:
            self._write_scalars(record)
        log.info(log_line(record))

    def _write_scalars(self, record: dict) -> None:
        for name, metrics in record.get("validation", {}).items():
            for metric, value in metrics.items():
                self.writer.add_scalar(f"validation/{name}/{metric}", value, record["step"])
        self.writer.add_scalar("training/loss", record["training"]["combined"]["loss"], record["step"])


def log_line(record: dict) -> str:
    """``epoch 2 | step 18 | train loss 0.3120 | 5,120 rows/s, 1.2% waiting on data | y: loss ...``"""
    parts = [f"epoch {record['epoch']}", f"step {record['step']}", f"train loss {record['training']['combined']['loss']:.4f}"]
    if "rows_per_s" in record:
        parts.append(f"{record['rows_per_s']:,.0f} rows/s, {100 * record['data_wait_fraction']:.1f}% waiting on data")
    for name, metrics in record.get("validation", {}).items():
        if name != "combined":
            shown = {k: v for k, v in metrics.items() if k in SHOWN_METRICS}
            parts.append(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in shown.items()))
    return " | ".join(parts)
