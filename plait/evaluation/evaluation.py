"""One evaluation pipeline: metric statistics that add up exactly, wherever they are computed.

An :class:`Evaluation` holds a model's metric statistics (counts and float64 sums). Training's
validation adds batches of tensors to it and sums it over workers; ``evaluate`` on raw data or a
cached split adds chunks through a predictor (``plait.inference``); a Ray Data job adds one batch
per call on its actors and ships the statistics back as one flat vector, which the driver adds
up. Every path ends in the same :meth:`Evaluation.metrics_or_error`, so the numbers agree.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import torch

from plait.errors import DataError
from plait.evaluation.metrics import MetricSet
from plait.models.labels import WRITTEN

log = logging.getLogger("plait")


class Evaluation:
    """Metric statistics of one model, and the rows they cover."""

    def __init__(self, module, device="cpu"):
        self.metrics = MetricSet(module)
        self.stats = self.metrics.zeros(device)
        self.rows = 0

    def add(self, logits: dict, targets: dict) -> None:
        """A batch of model outputs and their targets."""
        self.metrics.update(self.stats, logits, targets)
        self.rows += len(next(iter(targets.values())))

    def add_chunk(self, predictor, chunk: pa.Table) -> None:
        """A chunk of raw data (or cached rows, for a cached predictor) holding the targets; rows
        missing a target are skipped."""
        import pyarrow.compute as pc

        predictor.check_columns(chunk.column_names, with_outputs=True)
        for p in predictor.outputs:
            chunk = chunk.filter(pc.is_valid(chunk[predictor.column(p)]))
        if chunk.num_rows:
            tensors = predictor.tensors(chunk, predictor.processors)
            module = predictor.module
            # A model that reads its targets in the forward (an LLM scoring them) gets them here too.
            # (Not a preference trainer's rejected completions: the predictor never reads them.)
            logits = predictor.logits({n: tensors[n] for n in module.input_names + module.target_readers if n in tensors})
            self.add(logits, {n: tensors[n] for n in module.output_names})

    def all_reduce(self, all_reduce_sum) -> None:
        """Sum the statistics over workers (one collective)."""
        self.stats = self.metrics.reduce(self.stats, all_reduce_sum)

    def as_row(self) -> pa.Table:
        """The statistics as one row (rows covered, flat vector), to ship from a worker."""
        flat = torch.cat(list(self.stats.values())).cpu().numpy()
        return pa.table({"rows": [self.rows], "stats": pa.array([flat], pa.list_(pa.float64()))})

    def add_rows(self, table: pa.Table) -> None:
        """Statistics shipped by :meth:`as_row` (one or more rows), added to these."""
        shipped = table["stats"].combine_chunks().flatten().to_numpy().reshape(table.num_rows, -1).sum(axis=0)
        self.stats = self.metrics.reduce(self.stats, lambda flat: flat + torch.from_numpy(np.ascontiguousarray(shipped)))
        self.rows += sum(table["rows"].to_pylist())

    def metrics_or_error(self) -> dict:
        """The metrics, with Ludwig's dataset-level entries (``evaluation/overall.py``); an error
        when no row had every target."""
        if self.rows == 0:
            raise DataError("no rows to evaluate (the data has no rows, or every row lacks a target value)")
        metrics = self.metrics.compute(self.stats, overall=True)
        types = {name: m.type for name, m in self.metrics.outputs.items()}
        types.update({extra.output: "generated labels" for extra in self.metrics.extras if extra.key == WRITTEN})
        _warn_unseen_labels(metrics, self.rows, types)
        return metrics


def _warn_unseen_labels(metrics: dict, rows: int, types: dict[str, str]) -> None:
    """Labels the model never saw in training are scored as wrong; say so, with the count."""
    for name, values in metrics.items():
        unseen = int(values.get("unseen_labels", 0))
        if unseen and types.get(name) == "set":
            log.warning("%s: %d of %d evaluated rows have set items never seen in training; each counts as missed "
                        "(a false negative) in recall, f1 and jaccard, and the loss covers the seen items only",
                        name, unseen, rows)
        elif unseen and types.get(name) == "generated labels":  # an LLM's category output
            log.warning("%s: %d of %d evaluated rows have a label that is not in preprocessing.vocab; they count as "
                        "wrong in accuracy, and precision/recall/f1 and the confusion matrix cover the other rows only",
                        name, unseen, rows)
        elif unseen:
            log.warning("%s: %d of %d evaluated rows have a label never seen in training; they count as wrong in "
                        "accuracy and hits_at_k, and the loss and f1/precision/recall cover the other rows only",
                        name, unseen, rows)
