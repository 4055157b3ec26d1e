"""Training statistics in Ludwig's layout, from plait's history of evaluations.

The trainer keeps a history: one record per evaluation (``{"epoch", "step", "training":
{...}, "validation": {...}, "rows_per_s", ...}``), which checkpoints carry so a resumed run goes
on with it. ``training_statistics.json`` is written in Ludwig 0.17's layout instead
(``ludwig/api_types.py`` ``TrainingStats``, flattened by ``reduce_trainer_metrics_dict``)::

    {"training":   {"<output>": {"<metric>": [one value per evaluation]}, "combined": {"loss": [...]}},
     "validation": {...}, "test": {...},
     "evaluation_frequency": {"frequency": 1.0, "period": "epoch"},
     "plait": {"epoch": [...], "step": [...], "rows_per_s": [...], ...}}

so Ludwig's tools and scripts read it. What plait adds (each evaluation's epoch and step, the
training speed and the time spent waiting on data, per worker too, and the worker group's
restarts) sits under ``"plait"``, a key Ludwig does not use; its lists line up with the metrics'
lists. A value an evaluation did not compute is ``null``, so every list keeps that alignment.

:func:`read_training_statistics` takes either layout: runs written before this one keep the list
of records, and every reader goes through it.
"""

from __future__ import annotations

from typing import Any

SPLITS = ("training", "validation", "test")
PLAIT = "plait"

PLAIT_FIELDS = ("epoch", "step", "rows", "rows_per_s", "data_wait_fraction", "rows_per_s_per_worker",
                "data_wait_fraction_per_worker")
"""What plait records at each evaluation besides the metrics (speed only where an epoch ended)."""


EVERY_EPOCH = {"frequency": 1.0, "period": "epoch"}
"""Ludwig's evaluation frequency when nothing else is set: once per epoch."""


def evaluation_frequency(trainer) -> dict:
    """How often training evaluated, as Ludwig writes it: every N steps, or every fraction of an
    epoch."""
    if getattr(trainer, "steps_per_checkpoint", 0):
        return {"frequency": float(trainer.steps_per_checkpoint), "period": "step"}
    if getattr(trainer, "checkpoints_per_epoch", 0):
        return {"frequency": 1.0 / trainer.checkpoints_per_epoch, "period": "epoch"}
    return dict(EVERY_EPOCH)


def training_statistics(history: list[dict], frequency: dict | None = None, restarts: list | None = None) -> dict:
    """The Ludwig-layout statistics of a history of evaluation records."""
    stats: dict[str, Any] = {split: _metric_lists(history, split) for split in SPLITS}
    stats["evaluation_frequency"] = frequency or dict(EVERY_EPOCH)
    plait = {name: [record.get(name) for record in history] for name in PLAIT_FIELDS}
    stats[PLAIT] = {name: values for name, values in plait.items() if any(v is not None for v in values)}
    stats[PLAIT]["restarts"] = list(restarts or [])
    return stats


def _metric_lists(history: list[dict], split: str) -> dict:
    """``{output: {metric: [value or None per evaluation]}}`` for one split."""
    names: dict[str, dict[str, None]] = {}
    for record in history:  # first-seen order, so the file reads like the log
        for output, metrics in record.get(split, {}).items():
            names.setdefault(output, {}).update(dict.fromkeys(metrics))
    return {output: {metric: [record.get(split, {}).get(output, {}).get(metric) for record in history]
                     for metric in metrics}
            for output, metrics in names.items()}


def read_training_statistics(data: Any) -> dict:
    """Statistics in Ludwig's layout, from the contents of a ``training_statistics.json`` in
    either layout (plait's list of records before the Ludwig layout, or the layout itself)."""
    if isinstance(data, list):
        return training_statistics(data)
    if isinstance(data, dict) and any(split in data for split in SPLITS):
        return {split: data.get(split, {}) for split in SPLITS} | {k: v for k, v in data.items() if k not in SPLITS}
    raise ValueError("not training statistics: expected Ludwig's layout ({training, validation, test: {output: "
                     "{metric: [values]}}}) or plait's list of evaluation records")


def history_of(stats: dict) -> list[dict]:
    """The records of statistics in Ludwig's layout, one per evaluation (the inverse of
    :func:`training_statistics` for what it keeps; ``null`` values left out)."""
    stats = read_training_statistics(stats)
    plait = stats.get(PLAIT, {})
    lengths = [len(values) for split in SPLITS for metrics in stats[split].values() for values in metrics.values()]
    count = len(plait["step"]) if "step" in plait else max(lengths, default=0)
    records = [{} for _ in range(count)]
    for name in PLAIT_FIELDS:
        for record, value in zip(records, plait.get(name, [])):
            if value is not None:
                record[name] = value
    for split in SPLITS:
        for output, metrics in stats[split].items():
            for metric, values in metrics.items():
                for record, value in zip(records, values):
                    if value is not None:
                        record.setdefault(split, {}).setdefault(output, {})[metric] = value
    return records



def scalar_metrics(statistics: dict) -> dict:
    """Each output's numbers alone, without the confusion matrices and curves (what a summary
    prints and a tracker logs as metrics)."""
    return {output: {name: value for name, value in metrics.items() if isinstance(value, (int, float))}
            for output, metrics in statistics.items()}
