"""The hyperopt section: Ludwig's schema, typed, every mistake named at its path."""

import pytest

from plait.config import load_config
from plait.errors import ConfigError

BASE = {"input_features": [{"name": "a", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}
LR = {"trainer.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1}}


def section(**hyperopt):
    return load_config({**BASE, "hyperopt": {"parameters": LR, **hyperopt}}).hyperopt


def test_ludwig_defaults():
    hyperopt = section()
    assert (hyperopt.goal, hyperopt.metric, hyperopt.output_feature, hyperopt.split) == (
        "minimize", "loss", "combined", "validation")
    assert (hyperopt.search_alg.type, hyperopt.executor.scheduler.type, hyperopt.num_samples) == (
        "variant_generator", "fifo", 10)
    assert hyperopt.executor.max_concurrent_trials == "auto" and hyperopt.executor.cpu_resources_per_trial == 1
    grid = section(parameters={"trainer.epochs": {"space": "grid_search", "values": [1, 2]}})
    assert grid.num_samples == 1  # each grid point once


def test_scheduler_fields_and_aliases():
    asha = section(executor={"scheduler": {"type": "asha", "max_t": 10}}).executor.scheduler
    assert (asha.type, asha.max_t, asha.grace_period, asha.reduction_factor, asha.time_attr) == (
        "asha", 10, 72, 5, "time_total_s")
    assert section(executor={"scheduler": {"type": "pbt"}}).executor.scheduler.perturbation_factors == (0.8, 1.2)


def test_searcher_settings_pass_through():
    assert section(search_alg={"type": "hyperopt", "n_initial_points": 5}).search_alg.options == {"n_initial_points": 5}


@pytest.mark.parametrize(("hyperopt", "message"), [
    ({"metric": "accuracy"}, "hyperopt.metric: got 'accuracy', which output feature combined does not report"),
    ({"output_feature": "z"}, "hyperopt.output_feature: got 'z', which is no output feature"),
    ({"split": "test"}, "hyperopt.split: got 'test'; plait reports the validation split"),
    ({"parameters": {"trainer.epochs": {"space": "randint", "lower": 3, "upper": 3}}}, "lower (3) must be below upper"),
    ({"parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 0, "upper": 1}}}, "must be above 0"),
    ({"parameters": {"trainer.epochs": {"space": "choice", "categories": []}}}, "categories"),
    ({"parameters": {"trainer.epochs": {"space": "normal"}}}, "hyperopt.parameters.trainer.epochs"),
    ({"search_alg": {"type": "skopt"}}, "hyperopt.search_alg.type: got 'skopt', which Ray Tune 2.60 no longer has"),
    ({"executor": {"scheduler": {"type": "resource_changing"}}}, "hyperopt.executor.scheduler.type: got "
                                                                "'resource_changing', which plait does not implement"),
    ({"executor": {"max_concurrent_trials": "many"}}, "hyperopt.executor.max_concurrent_trials"),
])
def test_mistakes_are_named_at_their_path(hyperopt, message):
    with pytest.raises(ConfigError) as caught:
        section(**hyperopt)
    assert message in str(caught.value)


def test_ludwigs_int_space_draws_whole_numbers_with_its_upper_bound_included():
    from plait.search.space import tune_domain

    space = section(parameters={"combiner.num_fc_layers": {"space": "int", "lower": 1, "upper": 3}}).parameters[
        "combiner.num_fc_layers"]
    drawn = {tune_domain(space).sample() for _ in range(200)}
    assert drawn == {1, 2, 3}
