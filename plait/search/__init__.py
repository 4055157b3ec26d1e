"""Hyperparameter search on Ray Tune: the config's ``hyperopt`` section, Ludwig's schema.

``run`` checks and runs a search, ``trial`` is one trial (a plait training run that reports to
Tune), ``plan`` sizes trials to the cluster, ``space`` turns parameters into Tune domains and
trial values into configs, ``tune_parts`` builds the searcher and scheduler, ``preprocessing``
builds each distinct preprocessing once, and ``results`` writes what the search found.
"""

from __future__ import annotations

import os
from typing import Any

from plait.search.run import HyperoptResult


def hyperopt(config: str | os.PathLike | dict, dataset: Any = None, *, training_set=None, validation_set=None,
             test_set=None, output_directory: str = "results", experiment_name: str = "hyperopt",
             random_seed: int = 42, backend: str | None = None, resume: str | None = None,
             tune_verbosity: int = 1) -> HyperoptResult:
    """Run the search the config's ``hyperopt`` section describes (``resume``: continue the
    search in that folder). Returns every trial's record and the best one. ``tune_verbosity``:
    Ray Tune's console output, 0 (none) to 3 (every result); plait's summary table follows it."""
    from plait.config import with_command_line
    from plait.search.run import load_source, search

    data = {"dataset": dataset, "training_set": training_set, "validation_set": validation_set, "test_set": test_set}
    return search(with_command_line(load_source(config), backend), data, seed=random_seed,
                  output_directory=output_directory, experiment_name=experiment_name, resume=resume,
                  tune_verbosity=tune_verbosity)


__all__ = ["HyperoptResult", "hyperopt"]
