"""Class balancing of the training split (Ludwig's oversample_minority and undersample_majority).

Ludwig draws rows with pandas' ``sample``, whose choice depends on how the rows are partitioned.
Here the counts are a reduce over partitions, and which rows repeat or stay follows from the
seeded hash of each row's global number, so every engine and partitioning keeps the same rows.
A repeated row is repeated in place, so the split keeps its input order (the layout's canonical
order) and every engine writes the same bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.data import split as sp
from plait.data.engines import ROW_NUMBER, DataEngine
from plait.data.layout import SPLIT_COLUMN
from plait.errors import DataError
from plait.features.base import FeatureProcessor

log = logging.getLogger("plait")

BALANCE_STREAM = 4
"""The row-hash stream of balancing (1: sampling, 2: random split, 3: stratified split)."""


@dataclass(frozen=True)
class Resampling:
    """What balancing does to one class of the training split: each of its rows appears
    ``times`` times, and the ``extra`` rows with the smallest hashes once more."""

    label: bool
    times: int
    extra: int


def resampling(counts: np.ndarray, setting: dict[str, float]) -> Resampling | None:
    """The resampling that brings the training split's classes (``counts``: rows labelled false,
    true) to the ratio set; None when the split already has it (Ludwig's oversampling would draw
    fewer rare rows than there are, and its undersampling would fail)."""
    (key, ratio), = setting.items()
    minority = int(counts[1] < counts[0])  # 1: true; on a tie either is, and nothing is resampled
    rare, common = int(counts[minority]), int(counts[1 - minority])
    if rare == 0:
        present = "false" if minority else "true"
        raise DataError(f"preprocessing.{key}: the training split has only {present} "
                        f"labels ({common} rows), so there is no other class to balance against; set {key} to "
                        f"null, or check the output column and the split")
    if key == "oversample_minority":
        wanted = round(common * ratio)  # as pandas' sample(frac=...) rounds
        return Resampling(bool(minority), wanted // rare, wanted % rare) if wanted > rare else None
    wanted = int(rare / ratio)  # as Ludwig truncates
    return Resampling(not minority, 0, wanted) if wanted < common else None


class Balancer:
    """The per-partition steps of class balancing for one binary output (picklable)."""

    def __init__(self, output: FeatureProcessor, metadata: dict, setting: dict[str, float], seed: int):
        self.output = output
        self.metadata = metadata  # the output's fitted metadata: which labels are true
        self.setting = setting
        self.seed = seed

    def class_counts(self, part: pa.Table) -> np.ndarray:
        """Training rows labelled false and true in one partition."""
        labels = self._training_labels(part)[1]
        return np.bincount(labels.astype(np.int64), minlength=2)

    def class_hashes(self, part: pa.Table, label: bool) -> np.ndarray:
        """The balancing hashes of one partition's training rows of class ``label``."""
        rows, labels = self._training_labels(part)
        return sp.row_uniforms(rows[labels == label], self.seed, BALANCE_STREAM)

    def resample(self, part: pa.Table, plan: Resampling, threshold: float) -> pa.Table:
        """The partition with each training row of the class repeated or dropped per ``plan``
        (rows with a hash below ``threshold`` get the extra copy), in place."""
        training = pc.equal(part[SPLIT_COLUMN], sp.TRAINING).to_numpy(zero_copy_only=False)
        rows, labels = self._training_labels(part)
        chosen = labels == plan.label
        copies = plan.times + (sp.row_uniforms(rows[chosen], self.seed, BALANCE_STREAM) < threshold)
        repeats = np.ones(part.num_rows, dtype=np.int64)
        repeats[np.flatnonzero(training)[chosen]] = copies
        return part.take(pa.array(np.repeat(np.arange(part.num_rows), repeats)))

    def _training_labels(self, part: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        training = part.filter(pc.equal(part[SPLIT_COLUMN], sp.TRAINING))
        labels = self.output.transform(training[self.output.name], self.metadata)
        labels = labels.to_numpy(zero_copy_only=False).astype(bool)
        return training[ROW_NUMBER].to_numpy(), labels


def balance(engine: DataEngine, data, balancer: Balancer):
    """The data with its training split resampled to the ratio set (other splits untouched)."""
    counts = engine.reduce(data, balancer.class_counts, np.add)
    plan = resampling(counts, balancer.setting)
    if plan is None:
        log.info("The training split already has the class ratio %s asks for (%d false, %d true rows); "
                 "it is not resampled.", next(iter(balancer.setting)), *counts)
        return data
    total = int(counts[int(plan.label)])
    threshold = _threshold(engine, data, lambda part: balancer.class_hashes(part, plan.label), plan.extra, total)
    after = counts.copy()
    after[int(plan.label)] = plan.times * total + plan.extra
    log.info("Balanced the training split: %d false and %d true rows became %d and %d.", *counts, *after)
    return engine.map(data, lambda part: balancer.resample(part, plan, threshold))


def _threshold(engine: DataEngine, data, hashes, keep: int, total: int) -> float:
    """The hash below which exactly ``keep`` of the ``total`` hashes fall: a reduce of the
    smallest ``keep`` of each partition, or of the largest ``total - keep`` when fewer."""
    if keep <= 0:
        return 0.0
    if keep >= total:
        return 2.0
    if keep <= total - keep:
        smallest = engine.reduce(data, lambda part: sp.smallest(hashes(part), keep), sp.merge_smallest(keep))
        return float(np.nextafter(smallest[keep - 1], 2.0))
    dropped = total - keep
    negated = engine.reduce(data, lambda part: sp.smallest(-hashes(part), dropped), sp.merge_smallest(dropped))
    return float(-negated[dropped - 1])  # the smallest of the dropped hashes: the kept ones lie below it
