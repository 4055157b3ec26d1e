"""auto_train's refit: how long the winner trains again and on which rows (the refit itself runs
in tests/automl/test_auto_train.py, through the command)."""

from __future__ import annotations

import pandas as pd

from plait.automl import refit, rescore
from plait.automl.auto_config import search_section


def winner(epochs: list[int]) -> rescore.Finalist:
    record = {"trial_id": "a", "metric_score": 0.3, "parameters": {"trainer.learning_rate": 0.003},
              "model_path": "/runs/a/model", "status": "stopped"}
    return rescore.Finalist(record, [0.9] * len(epochs), [f"/folds/{k}/model" for k in range(len(epochs))], epochs)


def test_the_refit_trains_for_the_median_of_the_epochs_its_folds_kept():
    assert refit.epochs(winner([21, 24, 37, 24, 24])) == 24
    assert refit.epochs(winner([0, 1, 0, 1, 0])) == 1  # at least one


def test_the_refit_is_one_trial_of_the_winners_values_on_every_row_scored_on_its_training_rows():
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "fixed", "column": "split"}, "sample_ratio": 0.5},
              "trainer": {"epochs": 300, "early_stop": 20}, "hyperopt": search_section(300, "local", {"number"})}
    search = refit._refit_search(config, winner([3, 4, 5, 4, 4]), "auto_train_refit", 4, budget_s=30)
    assert search["preprocessing"] == {"split": {"type": "fixed", "column": "auto_train_refit"}}  # sampled already
    assert search["trainer"] == {"epochs": 4, "early_stop": -1}
    section = search["hyperopt"]
    assert (section["split"], section["output_feature"], section["metric"]) == ("training", "combined", "loss")
    assert section["search_alg"]["points_to_evaluate"] == [{"trainer.learning_rate": 0.003}]
    assert section["executor"]["num_samples"] == 1 and section["executor"]["time_budget_s"] == 30
    assert section["executor"]["scheduler"] == {"type": "fifo"}  # nothing stops it before its last epoch
    assert config["trainer"] == {"epochs": 300, "early_stop": 20}  # the search's config is left as it was


def test_no_refit_starts_without_the_time_to_finish_it(tmp_path):
    rows = pd.DataFrame({"x": [1.0, 2.0], "y": [0, 1]})
    assert refit.refit({}, rows, winner([3] * 5), seed=1, seconds_left=refit.MIN_SECONDS - 1,
                       output_directory=str(tmp_path), experiment_name="r", backend=None) is None
    assert not any(tmp_path.iterdir())


def test_the_refit_column_is_a_name_no_column_starts_with():
    assert rescore.unused_name(["x", "auto_train_refit"], "auto_train_refit") == "_auto_train_refit"
    assert rescore.unused_name(["x"], "auto_train_refit") == "auto_train_refit"
