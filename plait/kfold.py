"""k-fold cross-validation (Ludwig's ``experiment --k_fold`` and ``kfold_cross_validate``).

Each row's fold comes from a seeded hash of its row number (``preprocessing.split: {type:
kfold}``), so every backend deals the same folds. Fold n's run trains on the other folds and is
evaluated on fold n; the runs go one after another, each on the config's backend (on Ray, with
Ray Train). Each finished fold's statistics are kept in ``<output_directory>/kfold/`` under a
fingerprint of the config, data and seed: the same command after a crash reuses them and runs
only the folds that had not finished. The results are written in Ludwig's layout:
``kfold_training_statistics.json`` (each fold's training statistics with its ``fold_eval_stats``,
and ``overall``: each metric's mean and standard deviation over the folds) and
``kfold_split_indices.json`` (each fold's training and test row indices).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
from typing import Any

import numpy as np

from plait.api import Model
from plait.config import PlaitConfig, load_config
from plait.config.render import resolved_dict
from plait.data import split as sp
from plait.data.cache import cache_key, dataset_identity
from plait.errors import UsageError
from plait.utils.fs import ensure_dir, resolve, write_json

log = logging.getLogger("plait")

STATISTICS = "kfold_training_statistics.json"
SPLIT_INDICES = "kfold_split_indices.json"


def kfold_cross_validate(num_folds: int, config: str | os.PathLike | dict | PlaitConfig, dataset: Any,
                         output_directory: str | os.PathLike = "results", random_seed: int = 42,
                         backend: str | None = None, skip_save_k_fold_split_indices: bool = False,
                         ) -> tuple[dict, dict]:
    """``(kfold statistics, split indices)``, as Ludwig's function of this name returns them, and
    written to ``output_directory`` (a path or fsspec URL)."""
    if isinstance(num_folds, bool) or not isinstance(num_folds, int) or num_folds < 2:
        raise UsageError(f"k_fold: got {num_folds!r}; give a whole number of folds, 2 or more")
    config = load_config(config)
    seed = sp.check_seed(random_seed)
    fs, folder = resolve(os.fspath(output_directory))
    ensure_dir(fs, posixpath.join(folder, "kfold"))
    fingerprint = cache_key(dataset_identity(dataset, {}), resolved_dict(config), seed, num_folds)
    statistics = {}
    for fold in range(num_folds):
        name = f"fold_{fold + 1}"
        kept = posixpath.join(folder, "kfold", f"{name}.json")
        statistics[name] = _kept_fold(fs, kept, fingerprint)
        if statistics[name] is None:
            statistics[name] = _run_fold(config, dataset, num_folds, fold, seed, backend)
            write_json(kept, {"fingerprint": fingerprint, "statistics": statistics[name]}, fs)
    statistics["overall"] = overall_statistics([statistics[f"fold_{n + 1}"] for n in range(num_folds)])
    write_json(posixpath.join(folder, STATISTICS), statistics, fs)
    indices = split_indices(_row_count(dataset), num_folds, seed)
    if not skip_save_k_fold_split_indices:
        write_json(posixpath.join(folder, SPLIT_INDICES), indices, fs)
    return statistics, indices


def _kept_fold(fs, path: str, fingerprint: str) -> dict | None:
    """A fold's statistics from an earlier run of the same config, data and seed, if it finished."""
    if not fs.exists(path):
        return None
    kept = json.loads(fs.cat_file(path))
    if kept.get("fingerprint") != fingerprint:
        return None
    log.info("Fold %s finished in an earlier run of this config, data and seed: its statistics are reused.",
             posixpath.basename(path).removesuffix(".json"))
    return kept["statistics"]


def _run_fold(config: PlaitConfig, dataset: Any, num_folds: int, fold: int, seed: int, backend: str | None) -> dict:
    """One fold's run: trained on the other folds, evaluated on this one."""
    log.info("k-fold: training fold %d of %d.", fold + 1, num_folds)
    settings = resolved_dict(config)
    settings["preprocessing"] = {**settings.get("preprocessing", {}),
                                 "split": {"type": "kfold", "folds": num_folds, "fold": fold}}
    model = Model(settings, backend=backend)
    try:
        result = model.train(dataset, random_seed=seed, progress_bar=False)
        evaluation = model.evaluate_preprocessed(result.preprocessed, "test")
    finally:
        model.close()
    return {**result.ludwig_statistics(), "fold_eval_stats": evaluation}


def overall_statistics(folds: list[dict]) -> dict:
    """Each output's scalar test metrics over the folds: ``<metric>_mean`` and ``<metric>_std``
    (the population standard deviation, as Ludwig computes it)."""
    values: dict[str, dict[str, list[float]]] = {}
    for fold in folds:
        for output, metrics in fold["fold_eval_stats"].items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.setdefault(output, {}).setdefault(metric, []).append(float(value))
    return {output: {key: float(f(v)) for metric, v in metrics.items()
                     for key, f in ((f"{metric}_mean", np.mean), (f"{metric}_std", np.std))}
            for output, metrics in values.items()}


def split_indices(rows: int, num_folds: int, seed: int) -> dict:
    """Each fold's training and test row indices (rows of the data as given: a row its run
    dropped, for a missing value, is still listed)."""
    folds = sp.fold_of(np.arange(rows), num_folds, seed)
    return {f"fold_{n + 1}": {"training_indices": np.flatnonzero(folds != n).tolist(),
                              "test_indices": np.flatnonzero(folds == n).tolist()} for n in range(num_folds)}


def _row_count(dataset: Any) -> int:
    from plait.inference.reader import iter_chunks

    return sum(chunk.num_rows for chunk in iter_chunks(dataset))
