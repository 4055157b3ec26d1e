"""auto_train's winner trained once more, on every row the search trained and validated on.

Each model a finalist has was trained on part of those rows: its search trial's on the search's
training split (its validation split held out for early stopping), each fold's on four fifths of
them. On a small table that tenth or fifth is missed (loanapp, 1,989 rows: plait's defaults
scored 0.940 on the test rows trained on the training split, 0.922 as the first fold's model).
The folds that chose the winner also measured how long it should train: the epoch whose
weights each fold kept. So the winner trains once more on all the rows, nothing held out, for
the median of those epochs (``epochs``), in the time the folds leave it (``REFIT_SHARE``). A
refit the budget ends before its last epoch is not kept.

Like the folds, the refit is a search of one trial on plait's search machinery (so on Ray, on
the cluster), scored on its own training rows, which it needs to report to the search.
"""

from __future__ import annotations

import copy
import statistics

from plait.automl.rescore import Finalist, fixed_split_of, unused_name

REFIT_SHARE = 0.25
"""The share of the time left after the search that the finalists' folds leave for the refit.
Where the folds finish sooner (most small tables: 20 folds in under a minute) it has the rest."""
MIN_SECONDS = 10.0
"""Below this many seconds left a refit is not started: starting a search (Ray's workers, the
preprocessing) takes a few of them."""


def epochs(finalist: Finalist) -> int:
    """How long the refit trains: the median of the epochs whose weights the finalist's folds kept
    (each fold trained on four fifths of the rows, so each of the refit's epochs is a quarter more steps)."""
    return max(1, round(statistics.median(finalist.fold_epochs)))


def refit(config: dict, rows, finalist: Finalist, *, seed: int, seconds_left: float, output_directory: str,
          experiment_name: str, backend: str | None) -> str | None:
    """Where the refit's model is: ``finalist``'s values trained on all of ``rows`` (a DataFrame of
    the searched rows) for ``epochs(finalist)``, within ``seconds_left``; None when it did not
    start (too little time) or did not finish its last epoch."""
    from plait.search import hyperopt

    if seconds_left < MIN_SECONDS or not finalist.fold_epochs:
        return None
    column = unused_name(rows.columns, "auto_train_refit")
    found = hyperopt(_refit_search(config, finalist, column, epochs(finalist), seconds_left),
                     rows.assign(**{column: 0}), output_directory=output_directory, experiment_name=experiment_name,
                     random_seed=seed, backend=backend, tune_verbosity=0)
    record = found.trials[0] if found.trials else None
    if record is None or record["status"] != "completed" or record["model_path"] is None:
        return None
    return record["model_path"]


def _refit_search(config: dict, finalist: Finalist, column: str, epochs: int, budget_s: float) -> dict:
    """The search config of one trial: ``finalist``'s values, every row a training row (the fixed
    split ``column`` is 0 throughout), ``epochs`` epochs, scored on its training rows."""
    section = config["hyperopt"]
    return {**copy.deepcopy(config), "preprocessing": fixed_split_of(config, column),
            "trainer": {**config.get("trainer", {}), "epochs": epochs, "early_stop": -1},
            "hyperopt": {**section, "split": "training", "output_feature": "combined", "metric": "loss",
                         "goal": "minimize",
                         "search_alg": {"type": "variant_generator",
                                        "points_to_evaluate": [finalist.record["parameters"]]},
                         "executor": {**section["executor"], "num_samples": 1, "time_budget_s": budget_s,
                                      "scheduler": {"type": "fifo"}}}}
