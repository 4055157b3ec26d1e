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
    assert refused(trainer={"validation_metric": "mean_absolute_error"}) == (  # no output reports it
        "trainer.validation_metric: got 'mean_absolute_error', which is not a metric of combined (the default "
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


LUDWIG_RENDERED_TRAINER = {
    "validation_field": None, "validation_metric": None, "early_stop": 5, "skip_all_evaluation": False,
    "enable_profiling": False, "profiler": {"wait": 1, "warmup": 1, "active": 3, "repeat": 5, "skip_first": 0},
    "learning_rate": 0.001,
    "learning_rate_scheduler": {
        "decay": None, "decay_rate": 0.96, "decay_steps": 10000, "staircase": False, "reduce_on_plateau": 0,
        "reduce_on_plateau_patience": 10, "reduce_on_plateau_rate": 0.1, "warmup_evaluations": 0,
        "warmup_fraction": 0.0, "reduce_eval_metric": "loss", "reduce_eval_split": "training", "t_0": None,
        "t_mult": 1, "eta_min": 0, "max_lr": None, "pct_start": 0.3, "div_factor": 25.0, "final_div_factor": 10000.0,
        "inverse_sqrt_warmup_steps": 4000, "polynomial_power": 1.0, "polynomial_end_lr": 0.0,
        "wsd_warmup_fraction": 0.1, "wsd_stable_fraction": 0.8, "wsd_decay_fraction": 0.1},
    "epochs": 100, "checkpoints_per_epoch": 0, "train_steps": None, "eval_steps": None, "steps_per_checkpoint": 0,
    "effective_batch_size": "auto", "batch_size": "auto", "max_batch_size": 1099511627776,
    "gradient_accumulation_steps": "auto", "eval_batch_size": None, "evaluate_training_set": False,
    "optimizer": {"type": "adam", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "amsgrad": False},
    "regularization_type": "l2", "regularization_lambda": 0.0, "should_shuffle": True,
    "increase_batch_size_on_plateau": 0, "increase_batch_size_on_plateau_patience": 5,
    "increase_batch_size_on_plateau_rate": 2.0, "increase_batch_size_eval_metric": "loss",
    "increase_batch_size_eval_split": "training",
    "gradient_clipping": {"clipglobalnorm": 0.5, "clipnorm": None, "clipvalue": None},
    "learning_rate_scaling": "linear", "bucketing_field": None, "use_mixed_precision": False, "compile": False,
    "enable_gradient_checkpointing": False, "layers_to_freeze_regex": None, "loss_balancing": "none",
    "loss_balancing_alpha": 1.5, "loss_balancing_lr": 0.01, "loss_balancing_preference_vector": None,
    "loss_balancing_tchebycheff_weight": 0.5, "contrastive_pretrain_epochs": 0, "contrastive_pretrain_temperature": 0.07,
    "contrastive_pretrain_projection_dim": 128, "contrastive_pretrain_learnable_temperature": True,
    "modality_dropout": 0.0, "model_soup": None, "model_soup_top_k": 5,
}
"""Every key of Ludwig 0.17's ECD trainer at Ludwig's default, as a config Ludwig rendered holds it."""


def test_a_trainer_section_ludwig_rendered_validates_unchanged(validate):
    code, out, err = validate(trainer=LUDWIG_RENDERED_TRAINER)
    assert code == 0, err
    shown = yaml.safe_load(out)["trainer"]
    assert set(shown) == set(LUDWIG_RENDERED_TRAINER) | {"mixed_precision_dtype"}  # and plait's own, at its default
    assert (shown["optimizer"]["type"], shown["gradient_accumulation_steps"], shown["eval_batch_size"]) == ("adam", 1, None)


@pytest.mark.parametrize("optimizer", [
    {"type": "sgd", "momentum": 0.0, "weight_decay": 0.0, "dampening": 0.0, "nesterov": False},
    {"type": "adamw", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "amsgrad": True},
    {"type": "adadelta", "rho": 0.9, "eps": 1e-06, "weight_decay": 0.0},
    {"type": "adagrad", "initial_accumulator_value": 0, "lr_decay": 0, "weight_decay": 0, "eps": 1e-10},
    {"type": "adamax", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0},
    {"type": "nadam", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "momentum_decay": 0.004},
    {"type": "rmsprop", "momentum": 0.0, "alpha": 0.99, "eps": 1e-08, "centered": False, "weight_decay": 0.0},
    {"type": "radam", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0},
])
def test_every_torch_optimizer_of_ludwig_validates_with_its_settings(validate, optimizer):
    code, out, err = validate(trainer={"optimizer": optimizer})
    assert code == 0, err
    assert yaml.safe_load(out)["trainer"]["optimizer"] == optimizer


@pytest.mark.parametrize(("trainer", "problem"), [
    ({"optimizer": {"type": "lion"}}, "trainer.optimizer.type: Ludwig's 'lion' is not implemented in plait; comes from bitsandbytes"),
    ({"optimizer": {"type": "lbfgs"}}, "trainer.optimizer.type: Ludwig's 'lbfgs' is not implemented in plait; L-BFGS"),
    ({"optimizer": {"type": "adam", "momentum": 0.9}},
     "trainer.optimizer.momentum: a setting of the sgd, rmsprop optimizers, not of adam"),
    ({"optimizer": {"type": "sgd", "nesterov": True, "momentum": 0.0}}, "trainer.optimizer.nesterov: Nesterov momentum needs"),
    ({"compile": True}, "trainer.compile: got True; plait does not implement this Ludwig setting and accepts only False"),
    ({"effective_batch_size": 128}, "trainer.effective_batch_size: got 128; plait does not implement"),
    ({"model_soup": "greedy"}, "trainer.model_soup: got 'greedy'; plait does not implement"),
    ({"loss_balancing": "famo"}, "trainer.loss_balancing: got 'famo'; plait does not implement"),
    ({"eval_steps": 10}, "trainer.eval_steps: got 10; plait does not implement"),
    ({"learning_rate_scheduler": {"reduce_eval_split": "test"}},
     "trainer.learning_rate_scheduler.reduce_eval_split: got 'test'; plait does not implement"),
    ({"learning_rate_scheduler": {"decay": "cosin"}}, "trainer.learning_rate_scheduler.decay: got 'cosin'; did you mean cosine?"),
    ({"learning_rate_scheduler": {"reduce_on_plateau_rate": 1.0}}, "trainer.learning_rate_scheduler.reduce_on_plateau_rate: "),
    ({"eval_batch_size": -1}, "trainer.eval_batch_size: got -1; the evaluation batch size must be 0 or more"),
    ({"steps_per_checkpoint": 5, "checkpoints_per_epoch": 2},
     "trainer.checkpoints_per_epoch: got 2 with steps_per_checkpoint 5; set only one of them"),
    ({"layers_to_freeze_regex": "encoder(["}, "trainer.layers_to_freeze_regex: got 'encoder([', which is no regular expression"),
    ({"regularization_type": "l3"}, "trainer.regularization_type: got 'l3'"),
    ({"regularization_lambda": 2}, "trainer.regularization_lambda: "),
])
def test_refused_trainer_settings_name_the_path_and_the_fix(refused, trainer, problem):
    assert refused(trainer=trainer).startswith(problem)


@pytest.mark.parametrize(("trainer", "key", "shown"), [
    ({"eval_batch_size": 0}, "eval_batch_size", None),  # upgraded to null, which means the same
    ({"eval_batch_size": None}, "eval_batch_size", None),
    ({"eval_batch_size": 512}, "eval_batch_size", 512),
    ({"gradient_accumulation_steps": "auto"}, "gradient_accumulation_steps", 1),
    ({"gradient_clipping": None}, "gradient_clipping", {"clipglobalnorm": 0.5, "clipnorm": None, "clipvalue": None}),
    ({"optimizer": {}}, "optimizer", {"type": "adam", "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "amsgrad": False}),
    ({"regularization_type": "l1_l2", "regularization_lambda": 0.01}, "regularization_type", "l1_l2"),
    ({"checkpoints_per_epoch": 4}, "checkpoints_per_epoch", 4),
    ({"enable_gradient_checkpointing": True}, "enable_gradient_checkpointing", True),
])
def test_ludwig_spellings_are_accepted_with_ludwigs_meaning(validate, trainer, key, shown):
    code, out, err = validate(trainer=trainer)
    assert code == 0, err
    assert yaml.safe_load(out)["trainer"][key] == shown


def test_plaits_own_defaults_record_ludwigs():
    from plait.config.base import LUDWIG_DEFAULT
    from plait.config.trainer import SGDConfig, TrainerConfig

    recorded = {name: (f.json_schema_extra or {}).get(LUDWIG_DEFAULT) for name, f in TrainerConfig.model_fields.items()}
    assert {k: v for k, v in recorded.items() if v is not None} == {}  # the rest now are Ludwig's
    assert SGDConfig.model_fields["momentum"].json_schema_extra == {LUDWIG_DEFAULT: 0.0}


def test_clipnorm_and_clipglobalnorm_both_bound_the_global_norm():
    from plait.config.trainer import GradientClipping

    assert GradientClipping(clipnorm=0.2).max_norm == 0.2
    assert GradientClipping(clipnorm=2.0).max_norm == 0.5
    assert GradientClipping(clipglobalnorm=None).max_norm is None


def test_a_validation_metric_without_a_field_watches_the_one_output_that_reports_it():
    from plait.config import load_config
    from plait.errors import ConfigError

    outputs = [{"name": "label", "type": "category"}, {"name": "price", "type": "number"}]
    base = {"input_features": [{"name": "x", "type": "number"}], "output_features": outputs}
    assert load_config({**base, "trainer": {"validation_metric": "accuracy"}}).trainer.validation_field == "label"
    assert load_config({**base, "trainer": {"validation_metric": "loss"}}).trainer.validation_field is None
    two = {**base, "output_features": [*outputs, {"name": "kind", "type": "category"}]}
    with pytest.raises(ConfigError, match="reported by several outputs .label, kind.; name the one to watch"):
        load_config({**two, "trainer": {"validation_metric": "accuracy"}})
