"""``auto_train``: a config from the data (``auto_config``), then plait's search over its key
settings within a time budget, on Ray Tune (a local Ray, or the cluster plait finds), then, when
the budget left holds it, the finalists scored on more validation splits (``rescore``); the kept
model comes back loaded (``rescore.Finalist.model``).

Where trees take the table's types (number, binary, category and date columns), a GBM with
Ludwig's defaults (``model_type: gbm``) is trained first, through the same search machinery, and
is a finalist beside the networks: it replaces the networks' choice where it beats the best
network finalist on the same folds beyond their noise or, where they do not run, the networks'
choice on the search's validation split (``rescore.against_rival``). On
benchmarks/model_quality.py, networks stay below gradient boosting on some tables whatever their
settings (loanapp: 0.933 at best against boosting's 0.940 to 0.955).
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from plait.automl import rescore
from plait.automl.auto_config import EARLY_STOP, EPOCHS, AutoConfig, build, search_section, tree_rival
from plait.errors import TrainingError, UsageError

log = logging.getLogger("plait")

TREE_SHARE = 0.25
"""The most of the budget the GBM rival's one trial may take (it ends when the trial does: seconds
on the benchmark's tables), before the networks' search starts."""


@dataclass
class AutoTrainResult:
    model: Any
    """The kept model (a loaded :class:`plait.Model`), from ``model_path``."""
    best_config: dict
    """The config that trained it (the inferred features and the trial's values)."""
    config: dict
    """The search's config: the inferred features and the hyperopt section."""
    trials: int
    """How many trials ran (the time budget may have ended some)."""
    search: Any
    """The search's :class:`plait.search.HyperoptResult` (every trial's record, the folder)."""
    kept: dict
    """The search's record of the kept trial (its values, validation score, folder)."""
    model_path: str
    """Where the model is (``rescore.Finalist.model``)."""
    model_source: str
    """Which model it is: the kept trial's own (``trial``), the trial's values trained again to
    their end on the search's split (``rerun``), or its first fold's (``fold``)."""
    auto_config: AutoConfig
    finalists: list[dict]
    """The finalists' values, validation score, the metric of the folds, score on each fold and
    mean, best first, when they were scored on more validation splits (``plait.automl.rescore``);
    empty when the search's best was kept as it was."""


def auto_config(dataset: Any, target: str, *, time_limit_s: float | None = None, user_config: dict | None = None,
                backend: str | None = None) -> tuple[AutoConfig, dict]:
    """The inferred config and, with ``time_limit_s``, its search (Ludwig's ``create_auto_config``):
    ``user_config`` is merged over it, so its settings win."""
    from plait.data.io import read_table

    user = copy.deepcopy(user_config or {})
    auto = build(read_table(dataset), target, _label(dataset), ignore=_split_column(user))
    config = copy.deepcopy(auto.config)
    if time_limit_s is not None:
        kind = backend or (user.get("backend") or {}).get("type", "auto")
        config["hyperopt"] = search_section(time_limit_s, kind, {f["type"] for f in config["input_features"]})
        config["trainer"] = {"epochs": EPOCHS, "early_stop": EARLY_STOP}
    return auto, _merged(config, user)


def auto_train(dataset: Any, target: str, time_limit_s: float, *, output_directory: str = "results",
               experiment_name: str = "auto_train", random_seed: int = 42, user_config: dict | None = None,
               backend: str | None = None, tune_verbosity: int = 0) -> AutoTrainResult:
    """Infer a config for ``target`` from ``dataset``, search its key settings within
    ``time_limit_s`` seconds (the reading and profiling of the data come out of the budget; on a
    small table the search gets part of it, ``rescore.search_budget``) and return the kept model:
    the search's best trial, or the winner of its finalists on five validation splits
    (``plait.automl.rescore``) where the time left held their scoring.
    ``user_config``: settings merged over the inferred config (a split column it names is not an
    input)."""
    if not time_limit_s or time_limit_s <= 0:
        raise UsageError(f"time_limit_s: got {time_limit_s!r}; give the search's budget in seconds, such as 300")
    started = time.monotonic()
    auto, config = auto_config(dataset, target, time_limit_s=time_limit_s, user_config=user_config, backend=backend)
    from plait.search import hyperopt

    searches = dict(dataset=dataset, output_directory=output_directory, random_seed=random_seed, backend=backend,
                    tune_verbosity=tune_verbosity)
    tree = _tree_rival(config, time_limit_s - (time.monotonic() - started), experiment_name, searches)
    spent = time.monotonic() - started
    config["hyperopt"]["executor"]["time_budget_s"] = max(1.0, rescore.search_budget(time_limit_s - spent, auto.rows))
    log.info("auto_train: %d inputs for %r; searching %d settings for up to %.0f s.", len(config["input_features"]),
             target, len(config["hyperopt"]["parameters"]), config["hyperopt"]["executor"]["time_budget_s"])
    searching = time.monotonic()
    found = hyperopt(config, experiment_name=experiment_name, **searches)
    if found.best is None or found.best["model_path"] is None:
        raise TrainingError(f"auto_train: no trial finished an evaluation within {time_limit_s:g} s; give a larger "
                            f"time_limit_s (the search is in {found.run.root.url})")
    search_seconds = time.monotonic() - searching
    kept, (model_path, model_source), finalists = _kept_trial(
        found, config, dataset, tree, rows=auto.rows, search_seconds=search_seconds,
        seconds_left=time_limit_s - (time.monotonic() - started), random_seed=random_seed,
        output_directory=output_directory, experiment_name=experiment_name, backend=backend)
    return AutoTrainResult(model=_load(model_path, backend), best_config=_trial_config(kept), config=config,
                           trials=len(found.trials), search=found, kept=kept, model_path=model_path,
                           model_source=model_source, auto_config=auto,
                           finalists=finalists)


def _tree_rival(config: dict, seconds_left: float, experiment_name: str, searches: dict) -> tuple[dict, dict] | None:
    """The GBM rival's search config and the record of its one trial, run within ``TREE_SHARE``
    of ``seconds_left``; None when trees do not take the table's types or the trial made no model."""
    from plait.search import hyperopt

    rival = tree_rival(config)
    if rival is None:
        return None
    rival["hyperopt"]["executor"]["time_budget_s"] = max(1.0, TREE_SHARE * seconds_left)
    found = hyperopt(rival, experiment_name=f"{experiment_name}_gbm", **searches)
    if found.best is None or found.best["model_path"] is None:
        log.info("auto_train: the GBM rival made no model within %.0f s.", rival["hyperopt"]["executor"]["time_budget_s"])
        return None
    return rival, found.best


def _kept_trial(found, config: dict, dataset: Any, tree: tuple[dict, dict] | None, *, rows: int,
                search_seconds: float, seconds_left: float, random_seed: int, output_directory: str,
                experiment_name: str, backend: str | None) -> tuple[dict, tuple[str, str], list]:
    """The kept trial, its model (where, and which: ``rescore.Finalist.model``), and the
    finalists' scores, best mean first: the better on the validation split of the search's best
    and the GBM rival (``tree``: its search config and trial), or, when the finalists are scored
    on more validation splits (``rescore.worth_scoring``), the winner there: of the networks
    (``rescore.winner``), then against the rival (``rescore.against_rival``)."""
    from plait.data.io import read_table

    goal = config["hyperopt"]["goal"]
    rival = tree[1] if tree else None
    best = rescore.better_on_split(found.best, rival, goal)
    first = rescore.parameters_of_first_trial(config["hyperopt"])  # plait's defaults
    candidates = rescore.finalists(found.trials, first)
    groups = {f"{experiment_name}_gbm_finalists": (tree[0], [rival])} if tree else {}
    groups[f"{experiment_name}_finalists"] = (config, candidates)
    finalists = len(candidates) + (rival is not None)
    # the first two finalists' folds run first: the rest run if the budget holds them
    if finalists < 2 or not rescore.worth_scoring(rows, search_seconds, len(found.trials), seconds_left):
        log.info("auto_train: kept the best trial on the one validation split, %s.", best["trial_id"])
        return best, (best["model_path"], "trial"), []
    log.info("auto_train: scoring %d finalists on %d validation splits each, within %.0f s.", finalists,
             rescore.FOLDS, seconds_left)
    judge, scored = rescore.rescore(groups, read_table(dataset), seed=random_seed, seconds_left=seconds_left,
                                    output_directory=output_directory, backend=backend)
    tree_finalist = next((f for f in scored if f.record is rival), None)
    networks = [f for f in scored if f is not tree_finalist]
    defaults = next((f for f in networks if f.record["parameters"] == first), None)
    search_best = next((f for f in networks if f.record["trial_id"] == found.best["trial_id"]), None)
    kept = rescore.winner(networks, judge.goal, baseline=defaults,
                          search_best=search_best if rescore.split_measures_well(rows) else None)
    kept = rescore.against_rival(kept, tree_finalist, networks, judge.goal, goal)
    summaries = [f.summary(judge) for f in rescore.ranked(scored, judge.goal)]
    if kept is None:
        log.info("auto_train: the finalists did not finish their %d splits in time; kept the best trial on the one "
                 "validation split.", rescore.FOLDS)
        return best, (best["model_path"], "trial"), summaries
    if kept.mean_score is None:
        log.info("auto_train: kept the best trial on the one validation split, %s, whose %d validation splits did not "
                 "all finish in time; its model: %s.", kept.record["trial_id"], rescore.FOLDS, kept.model_path)
    else:
        log.info("auto_train: kept trial %s (mean %s %.6g over %d validation splits); its model: %s.",
                 kept.record["trial_id"], judge.metric, kept.mean_score, rescore.FOLDS, kept.model_path)
    return kept.record, kept.model, summaries


def _load(path: str, backend: str | None):
    from plait.api import Model

    return Model.load(path, backend=backend)


def _trial_config(record: dict) -> dict:
    import yaml

    from plait.run_directory import RunDirectory

    return yaml.safe_load(RunDirectory(record["run_directory"]).config_text())


def _split_column(user: dict) -> tuple[str, ...]:
    split = (user.get("preprocessing") or {}).get("split") or {}
    return (split.get("column", "split"),) if split.get("type") == "fixed" else ()


def _label(dataset: Any) -> str:
    return repr(os.fspath(dataset)) if isinstance(dataset, (str, os.PathLike)) else "the DataFrame"


def _merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


__all__ = ["AutoTrainResult", "auto_config", "auto_train"]
