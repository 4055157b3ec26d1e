"""Choosing auto_train's model by more than one validation split.

A search that keeps the trial with the best loss on one validation split keeps, on a small table,
the trial that split's noise favoured most: of 24 trials scored on 40 rows, the luckiest rather
than the best (on benchmarks/model_quality.py's smallest tables the search's pick scored below
plait's defaults on the test rows: diabetes 0.303 against 0.412). So the finalists (the first
trial, plait's defaults, and the search's best few others) train again on ``FOLDS`` other
validation splits of the same rows, as one more search on the same machinery (so on Ray, on the
cluster). plait's defaults stay unless a finalist beats them fold by fold by more than the
folds' noise (a one-sided paired t-test at 5%); of those that do, the best mean is kept. Without
the test, the best mean won by a hair on star98 (303 rows: mean squared error 0.0069 against
0.0070) with a deep PLE model that scored 0.586 on the test rows, where plait's defaults scored
0.740.

A fold's score is its output's own validation metric, as Ludwig's auto_train judges trials
(``JUDGED_BY``), at the evaluation whose weights the fold kept (its lowest validation loss: the
folds train as ``plait train`` does). Not the loss itself: on the small classification tables a
deep, fast-learning PLE model reached a lower validation loss on the folds than plait's defaults
and a lower accuracy on the test rows (wine: 0.933 against 0.978 over five seeds). Equal means
keep the earlier finalist.

On a table of up to ``SMALL_TABLE_ROWS`` rows the search gets ``SEARCH_SHARE`` of the budget
and the folds always run in the rest (``search_budget``); a finalist whose folds did not all
finish in it is not kept. Judging ahead from the search's pace whether they would fit left
loanapp (1,989 rows) with none: its mean trial took 14 s, where a fold takes about 5, and the
search's one-split pick scored 0.917 on the test rows against plait's defaults' 0.940. On a large
table the search takes the whole budget, one split's many validation rows already measure well,
and the folds run only when the search's pace says they fit (``fits``); there, when the search's
best trial did not finish its folds, the folds did not judge it and it is kept (``winner``). Keeping
plait's defaults instead, the only finalist whose folds had all finished, lost seattle_temps' seed 3
(R² 0.9988 against the bar's 0.9995; the search's best had a seventh of the defaults' validation
loss, and a half on the one fold it finished).

The winner's model is its search trial's, unless the search's scheduler or budget stopped that
trial before its end: then the same values trained again on the search's own split to their end,
run after its folds (a finalist whose trial was stopped gets that run), or, when the budget ended
that run too, its first fold's model (``Finalist.model``). On loanapp the scheduler stops
plait's defaults' trial at 5 epochs and the defaults win the folds; the first fold's model (64% of
the rows) scored 0.922 on the test rows of seed 1, plain training on the search's split 0.940.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from plait.data import split as sp

log = logging.getLogger("plait")

FOLDS = 5
"""The validation splits each finalist is scored on."""
RIVALS = 3
"""The finalists besides the first trial: the search's best others (distinct values)."""
SPLIT_PATH = "preprocessing.split.column"
"""The searched path that picks a fold's split column."""
JUDGED_BY = {"binary": ("roc_auc", "maximize"), "category": ("accuracy", "maximize"),
             "number": ("mean_squared_error", "minimize")}
"""Per output type, the metric a fold is scored by, and its goal: Ludwig's
``default_validation_metric`` (another output type: the search's own metric)."""
T_CRITICAL = 2.132
"""The one-sided 5% point of Student's t with ``FOLDS - 1`` degrees of freedom: a finalist
replaces plait's defaults when its mean gain over them, fold by fold, is this many standard
errors above zero."""
T_CRITICAL_RIVAL = 1.533
"""The one-sided 10% point of Student's t with ``FOLDS - 1`` degrees of freedom: the GBM rival
replaces the networks' choice when its gain over the best network finalist, fold by fold, is this
many standard errors above zero (``against_rival``)."""
FULL_TRIAL_COST = 1.0
"""What a finalist's fold is reckoned to cost, in the search's mean time per trial: a fold trains
until early stopping ends it where the search's scheduler stopped many trials after a few epochs,
but the search's time also holds starting Ray and preprocessing (diabetes, 442 rows: 24 trials in
130 s, then 20 folds in 75 s)."""

SMALL_TABLE_ROWS = 5000
"""Up to this many rows the default validation split (a tenth of them) is too few to tell the
search's trials apart, and the folds decide: the search leaves them part of the budget."""
SEARCH_SHARE = 0.6
"""The budget's share the search gets on a small table. With all of it, trials of up to 300
epochs (``auto_config.EPOCHS``) took the whole budget on star98 (303 rows), nothing was left for
the folds, and the search's pick on one split kept scored 0.570 on the test rows against plait's
defaults' 0.773."""


def search_budget(seconds_left: float, rows: int) -> float:
    """The search's time budget: ``SEARCH_SHARE`` of the seconds left on a small table (so the
    finalists' folds fit after it), all of them on a large one."""
    return seconds_left if split_measures_well(rows) else seconds_left * SEARCH_SHARE


@dataclass(frozen=True)
class Judge:
    """What the folds are scored by: an output's metric at the evaluation the fold kept, or
    (``output`` None) the search's own score of each trial."""

    metric: str
    goal: str
    output: str | None = None

    @classmethod
    def of(cls, config: dict) -> "Judge":
        section = config["hyperopt"]
        outputs = config["output_features"]
        searched = (section.get("output_feature"), section.get("metric"), section.get("goal", "minimize"))
        if searched == ("combined", "loss", "minimize") and len(outputs) == 1 and outputs[0]["type"] in JUDGED_BY:
            return cls(*JUDGED_BY[outputs[0]["type"]], output=outputs[0]["name"])
        return cls(section.get("metric", "loss"), section.get("goal", "minimize"))

    def score(self, record: dict) -> float | None:
        """The fold's score: its search score, or its output's metric at its lowest validation loss."""
        if self.output is None:
            return record["metric_score"]
        from plait.run_directory import RunDirectory
        from plait.search.results import evaluations_of

        evaluations = [r["validation"] for r in evaluations_of(RunDirectory(record["run_directory"]))
                       if "loss" in r.get("validation", {}).get("combined", {})]
        if not evaluations:
            return None
        kept = min(evaluations, key=lambda evaluation: evaluation["combined"]["loss"])
        return kept.get(self.output, {}).get(self.metric)


@dataclass
class Finalist:
    record: dict
    """The search's record of its trial (its values and config)."""
    fold_scores: list[float]
    """Its score on each fold that finished (``Judge``)."""
    fold_models: list[str] = field(default_factory=list)
    """The model of each fold that finished, in the order of ``fold_scores``."""
    rerun_model: str | None = None
    """When its search trial was stopped: the model of its values trained again, to their end, on
    the search's own split (None until that run finished)."""

    @property
    def model(self) -> tuple[str, str]:
        """Where the model auto_train returns if this finalist wins, and which it is: its search
        trial's (``trial``), when that trial trained to its end; else (the scheduler or the budget
        stopped it, on loanapp after 5 epochs) the same values trained again to their end on the
        same split (``rerun``); failing that, its first fold's (``fold``), trained on the same rows
        with a fifth of them held out for early stopping."""
        if not was_stopped(self.record):
            return self.record["model_path"], "trial"
        if self.rerun_model is not None:
            return self.rerun_model, "rerun"
        if self.fold_models:
            return self.fold_models[0], "fold"
        return self.record["model_path"], "trial"

    @property
    def model_path(self) -> str:
        return self.model[0]

    @property
    def mean_score(self) -> float | None:
        """The mean over the folds; None unless every fold finished."""
        return float(np.mean(self.fold_scores)) if len(self.fold_scores) == FOLDS else None

    def summary(self, judge: Judge) -> dict:
        return {"parameters": self.record["parameters"], "validation_score": self.record["metric_score"],
                "metric": judge.metric, "fold_scores": self.fold_scores, "mean_score": self.mean_score}


def was_stopped(record: dict) -> bool:
    """Whether the search ended the trial before its end (its scheduler or its time budget)."""
    return record.get("status") != "completed"


def ranked(finalists: list[Finalist], goal: str) -> list[Finalist]:
    """Best mean first (``goal``: minimize or maximize), equal means in the order given; a
    finalist whose folds did not all finish ranks last."""
    sign = 1.0 if goal == "minimize" else -1.0
    return sorted(finalists, key=lambda f: (f.mean_score is None, sign * (f.mean_score or 0.0)))


def winner(finalists: list[Finalist], goal: str, baseline: Finalist | None,
           search_best: Finalist | None = None) -> Finalist | None:
    """The finalist auto_train keeps: ``baseline`` (plait's defaults) unless others beat it by
    more than the folds' noise, then the best mean of those; without a baseline, the best mean.
    None when the baseline (or, without one, every finalist) did not finish its folds.
    ``search_best``: on a large table, the search's best trial, kept when its folds did not all
    finish (its one validation split judged it, and measures well there)."""
    if search_best is not None and search_best.mean_score is None:
        return search_best
    finished = [f for f in finalists if f.mean_score is not None]
    if not finished or (baseline is not None and baseline.mean_score is None):
        return None
    if baseline is None:
        return ranked(finished, goal)[0]
    better = [f for f in finished if f is not baseline and clearly_better(f, baseline, goal)]
    return ranked(better, goal)[0] if better else baseline


def against_rival(kept: Finalist | None, rival: Finalist | None, networks: list[Finalist], goal: str,
                  search_goal: str) -> Finalist | None:
    """The networks' winner (``kept``) or the GBM rival: the rival where, on the folds (``goal``),
    it beats the network finalist of the best mean, fold by fold by more than the folds' noise (a
    one-sided paired t-test at 10%, ``T_CRITICAL_RIVAL``); or, where no network has a mean (a large
    table's search best, kept without its folds), where its score on the search's validation split
    (``search_goal``) is better than the winner's. Otherwise the network stays.

    Against the best mean (the luckiest of several networks, a score biased upwards), not only the
    kept network's: judged against the kept defaults' mean alone, the rival took iris and wine
    (seed 0), whose other finalists' means were above its own, and scored 0.935 and 0.944 on their
    test rows against the defaults' 0.968 and 0.972. With the t-test: wage2's rival had the best
    mean squared error over the folds by 2% (t = 0.64) and an R² of 0.185 on the test rows against
    the network's 0.215; loanapp's beat the best network at t = 1.95 (ROC AUC 0.952 against 0.943
    over the folds) and scored 0.937 against 0.930. At 10%, not the 5% that guards plait's
    defaults in ``winner``: the rival is one model named before any score was seen, not the best
    of a search's many trials."""
    if rival is None or rival.mean_score is None or kept is None:
        return kept
    finished = [f for f in networks if f.mean_score is not None]
    if not finished:
        return rival if better_on_split(kept.record, rival.record, search_goal) is rival.record else kept
    best = ranked(finished, goal)[0]
    return rival if clearly_better(rival, best, goal, T_CRITICAL_RIVAL) else kept


def better_on_split(search_best: dict, rival: dict | None, goal: str) -> dict:
    """Of the search's best trial and the GBM rival's (records), the better score on the search's
    validation split (the same rows and metric for both); equal scores keep the search's."""
    if rival is None or rival["metric_score"] is None:
        return search_best
    sign = 1.0 if goal == "minimize" else -1.0
    return rival if sign * rival["metric_score"] < sign * search_best["metric_score"] else search_best


def clearly_better(finalist: Finalist, baseline: Finalist, goal: str, critical: float = T_CRITICAL) -> bool:
    """A one-sided paired t-test of the finalist's gain over the baseline on the same folds, at the
    t value ``critical``."""
    gains = np.array(finalist.fold_scores) - np.array(baseline.fold_scores)
    gains = gains if goal == "maximize" else -gains
    spread = gains.std(ddof=1)
    if spread == 0:
        return bool(gains.mean() > 0)
    return bool(gains.mean() / (spread / math.sqrt(len(gains))) > critical)


def finalists(records: list[dict], first: dict | None) -> list[dict]:
    """The first trial's record (the one whose values are ``first``), then the best ``RIVALS``
    others with values of their own; trials without a score or a model are not finalists."""
    scored = [r for r in records if r["metric_score"] is not None and r["model_path"] is not None]
    chosen = [r for r in scored if first is not None and r["parameters"] == first][:1]
    rivals = 0
    for record in scored:
        if rivals == RIVALS:
            break
        if all(record["parameters"] != r["parameters"] for r in chosen):
            chosen.append(record)
            rivals += 1
    return chosen


def fits(search_seconds: float, trials: int, folds_to_run: int, seconds_left: float) -> bool:
    """Whether ``folds_to_run`` more trials fit in ``seconds_left``, at the pace the search ran
    ``trials`` in ``search_seconds`` (as many at once as it ran)."""
    return trials > 0 and FULL_TRIAL_COST * search_seconds * folds_to_run / trials <= seconds_left


def split_measures_well(rows: int) -> bool:
    """Whether the table is large enough for one validation split (a tenth of its rows) to tell
    the search's trials apart."""
    return rows > SMALL_TABLE_ROWS


def worth_scoring(rows: int, search_seconds: float, trials: int, seconds_left: float) -> bool:
    """Whether to score the finalists on the folds: on a small table always (the search left them
    their share of the budget, ``search_budget``; a finalist whose folds do not all finish in it
    is not kept), on a large one when the first two finalists' folds ``fits``."""
    if not split_measures_well(rows):
        return seconds_left > 1.0
    return fits(search_seconds, trials, 2 * FOLDS, seconds_left)


def rescore(groups: dict[str, tuple[dict, list[dict]]], table, *, seed: int, seconds_left: float,
            output_directory: str, backend: str | None) -> tuple[Judge, list[Finalist]]:
    """Each candidate's fold scores. ``groups``: experiment name -> (search config, candidates),
    a group per model type scored (the GBM rival's, the networks'). For each group one search,
    under its experiment name, whose trials are each candidate's values on each of ``FOLDS``
    validation splits of the rows the searches trained and validated on (``table``: the data, as
    Arrow) and, for each candidate its search stopped, its values on the search's own split, run
    to their end; the groups one after the other, in their order, all within ``seconds_left``.
    What scored them (the same for every group: one output, one search metric), and each
    candidate's scores, fold by fold (in the order given), and rerun model."""
    from plait.search import hyperopt

    started = time.monotonic()
    configs = [config for config, _ in groups.values()]
    rows, fold_columns, search_split = _fold_rows(configs[0], table, seed)
    judge = Judge.of(configs[0])
    scored = []
    for experiment_name, (config, candidates) in groups.items():
        budget = max(1.0, seconds_left - (time.monotonic() - started))
        found = hyperopt(_fold_search(config, candidates, fold_columns, search_split, budget), rows,
                         output_directory=output_directory, experiment_name=experiment_name, random_seed=seed,
                         backend=backend, tune_verbosity=0)
        scored += _fold_scores(judge, [Finalist(c, []) for c in candidates], found.trials, search_split)
    return judge, scored


def _fold_scores(judge: Judge, finalists: list[Finalist], trials: list[dict], search_split: str) -> list[Finalist]:
    """``finalists`` with the scores and models of their fold ``trials`` (and of their reruns on
    the search's split)."""
    for record in sorted(trials, key=lambda r: r["parameters"][SPLIT_PATH]):  # fold by fold
        values = {path: value for path, value in record["parameters"].items() if path != SPLIT_PATH}
        finalist = next(f for f in finalists if f.record["parameters"] == values)
        if record["parameters"][SPLIT_PATH] == search_split:
            if not was_stopped(record) and record["model_path"] is not None:
                finalist.rerun_model = record["model_path"]
            continue
        score = judge.score(record)
        if score is not None and math.isfinite(score) and record["model_path"] is not None:
            finalist.fold_scores.append(float(score))
            finalist.fold_models.append(record["model_path"])
    return finalists


def _fold_search(config: dict, candidates: list[dict], fold_columns: list[str], search_split: str,
                 budget_s: float) -> dict:
    """The search config whose trials are each candidate on each fold, in that order (the first
    candidate's folds first), each candidate the search stopped followed by its run on the search's
    own split (the column ``search_split``), every one run to its end within ``budget_s``. A rerun
    right after its folds: queued after every fold, plait's defaults' (the finalist most often
    kept) did not run in loanapp's budget on seed 1."""
    section = config["hyperopt"]
    points = []
    for candidate in candidates:
        reruns = [search_split] if was_stopped(candidate) else []
        points += [{**candidate["parameters"], SPLIT_PATH: column} for column in fold_columns + reruns]
    # The rows are the searched ones, sampled already; a scheduler's stop would score a fold
    # at its first few epochs.
    preprocessing = {k: v for k, v in config.get("preprocessing", {}).items() if k not in ("sample_ratio", "sample_size")}
    return {**copy.deepcopy(config),
            "preprocessing": {**preprocessing, "split": {"type": "fixed", "column": fold_columns[0]}},
            "hyperopt": {**section,
                         "parameters": {**section["parameters"],
                                        SPLIT_PATH: {"space": "choice",
                                                     "categories": [*fold_columns, search_split]}},
                         "search_alg": {"type": "variant_generator", "points_to_evaluate": points},
                         "executor": {**section["executor"], "num_samples": len(points), "time_budget_s": budget_s,
                                      "scheduler": {"type": "fifo"}}}}


def _fold_rows(config: dict, table, seed: int):
    """The rows the search trained and validated on (as a DataFrame), with ``FOLDS`` fixed-split
    columns and one more, and their names: in the k-th, the rows of fold k are validation rows (1),
    the others training rows (0); in the last, the search's own validation rows are (1)."""
    from plait.config import load_config
    from plait.data.preprocess import split_codes

    searched = {key: value for key, value in config.items() if key != "hyperopt"}
    row_numbers, codes = split_codes(load_config(searched), table, seed)
    kept = np.sort(row_numbers[codes != sp.TEST])
    frame = table.take(kept).to_pandas()
    fold = sp.fold_of(np.arange(len(frame)), FOLDS, seed)
    prefix = _unused_prefix(frame.columns)
    columns = [f"{prefix}{k}" for k in range(FOLDS)]
    for k, column in enumerate(columns):
        frame[column] = (fold == k).astype(np.int8)
    search_split = f"{prefix}search"
    frame[search_split] = np.isin(kept, row_numbers[codes == sp.VALIDATION]).astype(np.int8)
    return frame, columns, search_split


def _unused_prefix(taken) -> str:
    prefix = "auto_train_fold_"
    while any(str(name).startswith(prefix) for name in taken):
        prefix = "_" + prefix
    return prefix


def parameters_of_first_trial(section: dict) -> dict | None:
    """The values of the search's first trial (plait's defaults, in auto_train's search)."""
    points = (section.get("search_alg") or {}).get("points_to_evaluate") or []
    return points[0] if points else None
