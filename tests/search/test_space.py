"""Parameter paths: how a trial's values land in the config, and which paths are refused."""

import pytest

from plait.config import load_config
from plait.errors import ConfigError
from plait.search.space import apply, check_parameters
from tests.search.conftest import INPUTS, OUTPUTS

SOURCE = {"input_features": [dict(f) for f in INPUTS], "output_features": [dict(f) for f in OUTPUTS],
          "combiner": {"type": "concat", "output_size": 32}, "hyperopt": {"parameters": {}}}


def validate(config: dict):
    return load_config(config)


def test_values_land_on_sections_features_and_defaults():
    config = apply(SOURCE, {"trainer.learning_rate": 0.01, "c.encoder.embedding_size": 7,
                            "defaults.number.preprocessing.normalization": "minmax", "combiner.num_fc_layers": 2})
    assert config["trainer"] == {"learning_rate": 0.01}
    assert config["input_features"][2]["encoder"] == {"embedding_size": 7}
    assert config["combiner"] == {"type": "concat", "output_size": 32, "num_fc_layers": 2}
    assert "hyperopt" not in config and "hyperopt" in SOURCE  # the source is left as it was
    resolved = load_config(config)
    assert resolved.input_features[0].preprocessing.normalization == "minmax"  # defaults reach the features


def test_a_sub_config_of_another_type_replaces_the_old_one_and_dot_merges_into_the_whole_config():
    config = apply(SOURCE, {"combiner": {"type": "tabnet", "size": 8}, ".": {"trainer": {"epochs": 3}}})
    assert config["combiner"] == {"type": "tabnet", "size": 8}
    assert config["trainer"] == {"epochs": 3}
    assert apply(SOURCE, {"combiner": {"output_size": 8}})["combiner"] == {"type": "concat", "output_size": 8}


def spaces(**paths) -> dict:
    section = load_config({**SOURCE, "hyperopt": {"parameters": paths}}).hyperopt
    return section.parameters


def test_a_path_that_names_nothing_is_refused_with_the_nearest_valid_one():
    with pytest.raises(ConfigError, match=r"hyperopt.parameters.trainer.learning_rat: names nothing in the config; "
                                          r"the nearest valid path is trainer.learning_rate"):
        check_parameters(SOURCE, spaces(**{"trainer.learning_rat": {"space": "uniform", "lower": 0.1, "upper": 1}}),
                         validate)
    with pytest.raises(ConfigError, match="the nearest valid path is c.encoder.embedding_size"):
        check_parameters(SOURCE, spaces(**{"c.encoder.embeding_size": {"space": "randint", "lower": 2, "upper": 9}}),
                         validate)


def test_settings_of_a_searched_type_are_checked_with_that_type():
    params = {"x1.encoder.type": {"space": "choice", "categories": ["dense"]},
              "x1.encoder.num_layers": {"space": "randint", "lower": 1, "upper": 3}}
    check_parameters(SOURCE, spaces(**params), validate)  # dense has num_layers; the default encoder does not
    params["x1.encoder.type"] = {"space": "choice", "categories": ["dense", "passthrough"]}
    with pytest.raises(ConfigError, match="x1.encoder.type='passthrough', x1.encoder.num_layers=1 makes the config invalid"):
        check_parameters(SOURCE, spaces(**params), validate)


def test_a_value_that_makes_an_invalid_config_is_refused_naming_it():
    with pytest.raises(ConfigError) as caught:
        check_parameters(SOURCE, spaces(**{"trainer.batch_size": {"space": "choice", "categories": [16, -4]}}),
                         validate)
    assert caught.value.problems[0] == "hyperopt.parameters: trainer.batch_size=-4 makes the config invalid:"
    assert caught.value.problems[1].startswith("trainer.batch_size: got -4")


def test_a_defaults_path_is_checked_on_the_features_of_its_type():
    check_parameters(SOURCE, spaces(**{"defaults.category.encoder.embedding_size": {"space": "randint", "lower": 2,
                                                                                    "upper": 9}}), validate)
    with pytest.raises(ConfigError, match="hyperopt.parameters.defaults.category.encoder.embeding_size: names nothing "
                                          "in the config; the nearest valid path is "
                                          "defaults.category.encoder.embedding_size"):
        check_parameters(SOURCE, spaces(**{"defaults.category.encoder.embeding_size": {
            "space": "randint", "lower": 2, "upper": 9}}), validate)
