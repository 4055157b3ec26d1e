"""Ludwig's trainer options in a short training through ``Model.train``: another optimizer and
schedule, evaluations per epoch, the regularization penalty, reductions on a plateau, frozen
layers and training without evaluation."""

from __future__ import annotations

import logging

import pytest
import torch

from plait.api import Model
from plait.errors import TrainingError


def _train(config, dataset):
    model = Model(config)
    return model, model.train(dataset=dataset, progress_bar=False)


def test_rmsprop_with_a_staircase_exponential_schedule_trains(train_config, tabular_df):
    config = train_config(epochs=2, optimizer={"type": "rmsprop", "momentum": 0.1, "centered": True},
                          checkpoints_per_epoch=2,
                          learning_rate_scheduler={"decay": "exponential", "decay_steps": 3, "staircase": True,
                                                   "warmup_evaluations": 1})
    _, result = _train(config, tabular_df)
    history = result.training_statistics
    # 9 steps per epoch (280 training rows in batches of 32), evaluated every 9 // 2 = 4 steps.
    assert [r["step"] for r in history] == [4, 8, 12, 16]
    assert history[-1]["validation"]["y"]["loss"] < history[0]["validation"]["y"]["loss"]


def test_the_regularization_penalty_is_added_to_the_training_loss(train_config, tabular_df):
    def first_training_loss(**trainer):
        _, result = _train(train_config(epochs=1, **trainer), tabular_df)
        return result.training_statistics[0]["training"]["combined"]["loss"]

    plain = first_training_loss()
    assert first_training_loss(regularization_type="l2", regularization_lambda=0.01) > plain + 0.01
    assert first_training_loss(regularization_type=None, regularization_lambda=0.01) == pytest.approx(plain)


def test_reduce_on_plateau_lowers_the_learning_rate_once_the_loss_stalls(train_config, tabular_df, caplog):
    # A learning rate too small to move the loss: every evaluation after the first is a plateau.
    config = train_config(epochs=3, learning_rate=1e-9, early_stop=-1, learning_rate_scheduler={
        "reduce_on_plateau": 1, "reduce_on_plateau_patience": 1, "reduce_on_plateau_rate": 0.5,
        "reduce_eval_split": "validation"})
    with caplog.at_level(logging.INFO, logger="plait"):
        _train(config, tabular_df)
    reductions = [r.getMessage() for r in caplog.records if "learning rate reduced" in r.getMessage()]
    assert reductions == ["No improvement on a plateau: learning rate reduced to 5e-10."]


def test_skip_all_evaluation_trains_without_validation_metrics(train_config, tabular_df):
    _, result = _train(train_config(epochs=2, skip_all_evaluation=True), tabular_df)
    assert len(result.training_statistics) == 2
    assert not any("validation" in r for r in result.training_statistics)


def test_evaluate_training_set_reports_every_training_metric(train_config, tabular_df):
    _, result = _train(train_config(epochs=1, evaluate_training_set=True), tabular_df)
    assert {"accuracy", "loss", "roc_auc"} <= set(result.training_statistics[0]["training"]["y"])


def test_frozen_layers_keep_their_initial_weights(train_config, tabular_df):
    def combiner_and_head(epochs):
        model, _ = _train(train_config(epochs=epochs, layers_to_freeze_regex="^combiner\\."), tabular_df)
        weights = model.module.state_dict()
        return ({k: v for k, v in weights.items() if k.startswith("combiner.")},
                {k: v for k, v in weights.items() if not k.startswith("combiner.")})

    (frozen_1, rest_1), (frozen_2, rest_2) = combiner_and_head(1), combiner_and_head(2)
    assert frozen_1 and all(torch.equal(frozen_1[k], frozen_2[k]) for k in frozen_1)
    assert any(not torch.equal(rest_1[k], rest_2[k]) for k in rest_1 if rest_1[k].is_floating_point())


def test_a_freezing_pattern_that_matches_nothing_names_the_parameters(train_config, tabular_df):
    with pytest.raises(TrainingError, match="layers_to_freeze_regex: 'nothing' matches no parameter"):
        _train(train_config(epochs=1, layers_to_freeze_regex="nothing"), tabular_df)
