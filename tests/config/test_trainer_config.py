"""Trainer settings: honest ranges, and a validation field and metric that training reports."""

from __future__ import annotations

import pytest
import yaml


@pytest.mark.parametrize(("trainer", "problem"), [
    ({"batch_size": -4}, "trainer.batch_size: got -4; the batch size must be greater than 0 (rows per step, such as 64), or auto"),
    ({"batch_size": 0}, "trainer.batch_size: got 0; the batch size must be greater than 0 (rows per step, such as 64), or auto"),
    ({"learning_rate": -0.1}, "trainer.learning_rate: got -0.1; the learning rate must be greater than 0 (such as 0.001), or auto"),
    ({"learning_rate": 0}, "trainer.learning_rate: got 0.0; the learning rate must be greater than 0 (such as 0.001), or auto"),
])
def test_batch_size_and_learning_rate_must_be_positive(refused, trainer, problem):
    assert refused(trainer=trainer) == problem


@pytest.mark.parametrize(("trainer", "path", "bad"), [
    ({"epochs": 0}, "trainer.epochs", "0"),
    ({"train_steps": -1}, "trainer.train_steps", "-1"),
    ({"eval_batch_size": -1}, "trainer.eval_batch_size", "-1"),
    ({"early_stop": -2}, "trainer.early_stop", "-2"),
    ({"gradient_accumulation_steps": 0}, "trainer.gradient_accumulation_steps", "0"),
    ({"optimizer": {"betas": [0.9, 1.0]}}, "trainer.optimizer.betas[1]", "1.0"),
    ({"optimizer": {"weight_decay": -0.01}}, "trainer.optimizer.weight_decay", "-0.01"),
    ({"learning_rate_scheduler": {"warmup_fraction": 1.0}}, "trainer.learning_rate_scheduler.warmup_fraction", "1.0"),
    ({"learning_rate_scheduler": {"decay_rate": 0}}, "trainer.learning_rate_scheduler.decay_rate", "0"),
    ({"gradient_clipping": {"clipglobalnorm": 0}}, "trainer.gradient_clipping.clipglobalnorm", "0"),
])
def test_out_of_range_trainer_settings_name_the_field_and_value(refused, trainer, path, bad):
    problem = refused(trainer=trainer)
    assert problem.startswith(f"{path}: ") and f"(got {bad})" in problem


def test_numbers_must_be_finite(refused):
    assert refused(trainer={"optimizer": {"eps": float("nan")}}) == "trainer.optimizer.eps: Input should be a finite number (got nan)"


def test_the_edges_of_the_ranges_are_accepted(validate):
    trainer = {"batch_size": 1, "learning_rate": 1e-6, "early_stop": -1, "optimizer": {"betas": [0.0, 0.5]},
               "learning_rate_scheduler": {"warmup_fraction": 0.0, "decay_rate": 1.0}}
    code, out, err = validate(trainer=trainer)
    assert code == 0, err
    shown = yaml.safe_load(out)["trainer"]
    assert (shown["batch_size"], shown["early_stop"], shown["optimizer"]["betas"]) == (1, -1, [0.0, 0.5])


def test_a_validation_field_that_is_no_output_lists_the_outputs(refused):
    assert refused(trainer={"validation_field": "age"}) == (
        "trainer.validation_field: got 'age', which is no output feature; valid choices are: bought, combined")


def test_a_validation_metric_the_output_type_lacks_lists_its_metrics(refused):
    assert refused(trainer={"validation_field": "bought", "validation_metric": "r2"}) == (
        "trainer.validation_metric: got 'r2', which is not a metric of bought (a binary output); "
        "valid choices are: loss, accuracy, precision, recall, f1, roc_auc")


def test_the_combined_field_has_only_the_loss(refused):
    assert refused(trainer={"validation_metric": "accuracy"}) == (
        "trainer.validation_metric: got 'accuracy', which is not a metric of combined (the default "
        "validation_field); valid choices are: loss, or set trainer.validation_field to an output feature (bought)")


@pytest.mark.parametrize(("field", "metric"), [("bought", "roc_auc"), ("bought", "loss"), ("combined", "loss"), (None, "loss")])
def test_validation_metrics_training_reports_are_accepted(validate, field, metric):
    code, _, err = validate(trainer={"validation_field": field, "validation_metric": metric})
    assert code == 0, err


def test_metric_names_follow_each_output_type(validate):
    outputs = [{"name": "n", "type": "number"}, {"name": "k", "type": "category"}, {"name": "s", "type": "set"}]
    for field, metric in (("n", "root_mean_squared_error"), ("k", "hits_at_k"), ("s", "jaccard")):
        code, _, err = validate(output_features=outputs, trainer={"validation_field": field, "validation_metric": metric})
        assert code == 0, err
