"""auto_train's finalists: which trials they are, and the rows and folds they are scored on (the
scoring itself runs in tests/automl/test_auto_train.py, through the command)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from plait.automl import rescore


def record(trial: str, score, **values) -> dict:
    return {"trial_id": trial, "metric_score": score, "parameters": values,
            "model_path": None if score is None else f"/runs/{trial}/model"}


def test_the_finalists_are_the_first_trial_and_the_three_best_others_with_values_of_their_own():
    ranked = [record("a", 0.1, lr=3), record("b", 0.2, lr=3), record("c", 0.3, lr=2), record("d", 0.4, lr=1),
              record("e", 0.5, lr=5), record("f", 0.6, lr=4), record("g", None, lr=6)]
    assert [r["trial_id"] for r in rescore.finalists(ranked, first={"lr": 1})] == ["d", "a", "c", "e"]
    assert [r["trial_id"] for r in rescore.finalists(ranked, first={"lr": 3})] == ["a", "c", "d", "e"]
    assert [r["trial_id"] for r in rescore.finalists(ranked, first={"lr": 6})] == ["a", "c", "d"]  # it has no score
    assert [r["trial_id"] for r in rescore.finalists(ranked[-1:], first=None)] == []


def test_finalists_rank_by_their_mean_over_the_folds_and_one_cut_short_ranks_last():
    low, high = (rescore.Finalist(record(t, 0.5), [v] * rescore.FOLDS) for t, v in (("a", 0.3), ("b", 0.4)))
    cut_short = rescore.Finalist(record("c", 0.1), [0.1] * (rescore.FOLDS - 1))
    assert rescore.ranked([cut_short, high, low], "minimize") == [low, high, cut_short]
    assert rescore.ranked([cut_short, low, high], "maximize") == [high, low, cut_short]
    assert rescore.fits(search_seconds=100, trials=20, folds_to_run=10, seconds_left=60)
    assert not rescore.fits(search_seconds=100, trials=20, folds_to_run=10, seconds_left=40)


def test_a_small_table_always_scores_its_finalists_a_large_one_when_the_folds_fit():
    small, large = rescore.SMALL_TABLE_ROWS, rescore.SMALL_TABLE_ROWS + 1
    assert rescore.worth_scoring(small, search_seconds=180, trials=13, seconds_left=100)  # its share was left them
    assert not rescore.worth_scoring(large, search_seconds=180, trials=13, seconds_left=100)
    assert rescore.worth_scoring(large, search_seconds=100, trials=20, seconds_left=60)


def test_a_winner_whose_search_trial_was_stopped_returns_its_rerun_else_its_first_folds_model():
    folds = [0.9] * rescore.FOLDS
    models = [f"/folds/{k}/model" for k in range(rescore.FOLDS)]
    finished = rescore.Finalist({**record("a", 0.5), "status": "completed"}, folds, models)
    rerun = rescore.Finalist({**record("b", 0.5), "status": "stopped"}, folds, models, rerun_model="/rerun/model")
    stopped = rescore.Finalist({**record("c", 0.5), "status": "stopped"}, folds, models)
    assert finished.model == ("/runs/a/model", "trial")
    assert rerun.model == ("/rerun/model", "rerun")
    assert stopped.model == ("/folds/0/model", "fold")  # the budget ended its rerun


def test_the_fold_search_reruns_each_stopped_finalist_on_the_searchs_split_after_its_folds():
    config = {"input_features": [], "output_features": [], "preprocessing": {"sample_ratio": 0.5},
              "hyperopt": {"parameters": {"lr": {"space": "choice", "categories": [1, 2]}}, "executor": {}}}
    stopped = {**record("a", 0.5, lr=1), "status": "stopped"}
    finished = {**record("b", 0.5, lr=2), "status": "completed"}
    splits = [f"fold_{k}" for k in range(rescore.FOLDS)] + ["search"]
    search = rescore._fold_search(config, [stopped, finished], splits[:-1], splits[-1], budget_s=60)
    points = search["hyperopt"]["search_alg"]["points_to_evaluate"]
    assert points == [{"lr": 1, rescore.SPLIT_PATH: column} for column in splits] + \
                     [{"lr": 2, rescore.SPLIT_PATH: column} for column in splits[:-1]]
    assert search["hyperopt"]["executor"]["num_samples"] == len(points)
    assert search["hyperopt"]["executor"]["scheduler"] == {"type": "fifo"}  # every one to its end
    assert "sample_ratio" not in search["preprocessing"]


def test_plait_defaults_stay_unless_a_finalist_beats_them_fold_by_fold_beyond_the_noise():
    defaults = rescore.Finalist(record("defaults", 0.5), [0.80, 0.82, 0.78, 0.85, 0.80])
    steady = rescore.Finalist(record("steady", 0.4), [0.82, 0.83, 0.80, 0.86, 0.82])     # ahead on every fold
    lucky = rescore.Finalist(record("lucky", 0.3), [0.95, 0.70, 0.80, 0.85, 0.86])       # a higher mean, by chance
    assert lucky.mean_score > steady.mean_score > defaults.mean_score
    assert rescore.winner([defaults, lucky], "maximize", baseline=defaults) is defaults
    assert rescore.winner([defaults, lucky, steady], "maximize", baseline=defaults) is steady
    assert rescore.winner([defaults, lucky, steady], "minimize", baseline=defaults) is defaults
    assert rescore.winner([lucky, steady], "maximize", baseline=None) is lucky  # no defaults: the best mean
    cut_short = rescore.Finalist(record("cut", 0.5), [0.9] * (rescore.FOLDS - 1))
    assert rescore.winner([cut_short, steady], "maximize", baseline=cut_short) is None


def test_on_a_large_table_the_searchs_best_stays_when_its_folds_did_not_all_finish():
    defaults = rescore.Finalist(record("defaults", 0.5), [0.80, 0.82, 0.78, 0.85, 0.80])
    best = rescore.Finalist(record("best", 0.1), [0.95])  # the folds ran out of time after its first
    assert rescore.winner([defaults, best], "maximize", baseline=defaults) is defaults  # small: the folds judge
    assert rescore.winner([defaults, best], "maximize", baseline=defaults, search_best=best) is best
    judged = rescore.Finalist(record("best", 0.1), [0.70] * rescore.FOLDS)
    assert rescore.winner([defaults, judged], "maximize", baseline=defaults, search_best=judged) is defaults
    assert not rescore.split_measures_well(rescore.SMALL_TABLE_ROWS)
    assert rescore.split_measures_well(rescore.SMALL_TABLE_ROWS + 1)


def test_folds_are_judged_by_the_outputs_own_metric_unless_the_search_names_another():
    def config(output_type: str, **searched) -> dict:
        section = {"output_feature": "combined", "metric": "loss", "goal": "minimize", **searched}
        return {"output_features": [{"name": "y", "type": output_type}], "hyperopt": section}

    assert rescore.Judge.of(config("binary")) == rescore.Judge("roc_auc", "maximize", "y")
    assert rescore.Judge.of(config("category")) == rescore.Judge("accuracy", "maximize", "y")
    assert rescore.Judge.of(config("number")) == rescore.Judge("mean_squared_error", "minimize", "y")
    assert rescore.Judge.of(config("text")) == rescore.Judge("loss", "minimize")  # no metric of Ludwig's: the loss
    mine = config("binary", output_feature="y", metric="accuracy", goal="maximize")
    assert rescore.Judge.of(mine) == rescore.Judge("accuracy", "maximize")  # the search's own score of each fold
    assert rescore.Judge("accuracy", "maximize").score({"metric_score": 0.75}) == 0.75


def test_the_folds_deal_the_searched_rows_and_leave_the_test_rows_out_and_the_search_split_is_kept():
    n = 200
    table = pa.table({"x": np.arange(n, dtype=float), "y": np.arange(n) % 2,
                      "split": np.where(np.arange(n) < 150, 0, np.where(np.arange(n) < 170, 1, 2))})
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "fixed", "column": "split"}}, "hyperopt": {"parameters": {}}}
    rows, folds, search_split = rescore._fold_rows(config, table, seed=42)
    columns = [*folds, search_split]
    assert isinstance(rows, pd.DataFrame) and rows["x"].tolist() == list(range(170))  # training and validation rows
    assert columns == [f"auto_train_fold_{k}" for k in range(rescore.FOLDS)] + ["auto_train_fold_search"]
    assert rows[columns[-1]].tolist() == [0] * 150 + [1] * 20, "the search's own split"
    validation = rows[columns[:-1]].to_numpy()
    assert (validation.sum(axis=1) == 1).all(), "each row is a validation row in exactly one fold"
    assert all(20 < size < 50 for size in validation.sum(axis=0))


def test_on_a_small_table_the_search_leaves_the_folds_part_of_the_budget():
    assert rescore.search_budget(300, rows=rescore.SMALL_TABLE_ROWS) == 300 * rescore.SEARCH_SHARE
    assert rescore.search_budget(300, rows=rescore.SMALL_TABLE_ROWS + 1) == 300  # one split measures well


def test_the_gbm_rival_replaces_the_networks_winner_by_beating_the_best_network_beyond_the_folds_noise():
    # loanapp's folds (seed 0): better than plait's defaults on four of five, t = 1.95 against them,
    # the best network: past the rival's 10% point, not the 5% that guards the defaults in a search.
    defaults = rescore.Finalist(record("net", 0.24), [0.939, 0.949, 0.946, 0.950, 0.930])
    rival = rescore.Finalist(record("gbm", 0.19), [0.965, 0.952, 0.945, 0.956, 0.943])
    assert not rescore.clearly_better(rival, defaults, "maximize")
    assert rescore.against_rival(defaults, rival, [defaults], "maximize", "minimize") is rival
    luckier = rescore.Finalist(record("net2", 0.22), [0.97, 0.96, 0.95, 0.96, 0.95])
    assert rescore.against_rival(defaults, rival, [defaults, luckier], "maximize", "minimize") is defaults
    # wage2's (mean squared error): the best mean by 2%, t = 0.64: the network stays
    network = rescore.Finalist(record("net", 0.14), [0.154, 0.113, 0.122, 0.155, 0.145])
    trees = rescore.Finalist(record("gbm", 0.13), [0.163, 0.111, 0.126, 0.146, 0.130])
    assert rescore.against_rival(network, trees, [network], "minimize", "minimize") is network
    cut_short = rescore.Finalist(record("gbm", 0.1), [0.99] * (rescore.FOLDS - 1))
    assert rescore.against_rival(defaults, cut_short, [defaults], "maximize", "minimize") is defaults
    # a large table's search best, kept without its folds: the two meet on the search's split
    unscored = rescore.Finalist(record("net", 0.30), [])
    assert rescore.against_rival(unscored, rival, [unscored], "maximize", "minimize") is rival  # loss 0.19 < 0.30
    assert rescore.better_on_split(record("net", 0.1), record("gbm", 0.2), "minimize")["trial_id"] == "net"
    assert rescore.better_on_split(record("net", 0.1), None, "minimize")["trial_id"] == "net"
