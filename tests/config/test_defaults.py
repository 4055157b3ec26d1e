"""The ``defaults`` section: what reaches which features, and mistakes in it caught where written."""

from __future__ import annotations

import pytest

from plait.config import load_config
from plait.errors import ConfigError

CATEGORY_IN_AND_OUT = {
    "input_features": [{"name": "city", "type": "category"}, {"name": "age", "type": "number"}],
    "output_features": [{"name": "segment", "type": "category"}],
}


def with_defaults(defaults: dict, features: dict = CATEGORY_IN_AND_OUT) -> dict:
    return {**features, "defaults": defaults}


def problems_of(config) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    return info.value.problems


# ---- what reaches which features ---------------------------------------------------------------

def test_encoder_defaults_reach_input_features_only():
    config = load_config(with_defaults({"category": {"encoder": {"embedding_size": 8}}}))
    assert config.input_features[0].encoder.embedding_size == 8
    assert "encoder" not in type(config.output_features[0]).model_fields



def test_a_null_adapter_in_encoder_defaults_is_accepted_as_ludwig_renders_it():
    config = load_config(with_defaults({"category": {"encoder": {"type": "dense", "adapter": None}},
                                        "text": {"encoder": {"type": "parallel_cnn", "adapter": None}}}))
    assert config.input_features[0].encoder.type == "dense"
    [problem] = problems_of(with_defaults({"category": {"encoder": {"adapter": {"type": "lora"}}}}))
    assert problem.startswith("defaults.category.encoder.adapter: got {'type': 'lora'}")

def test_decoder_and_loss_defaults_reach_output_features_only():
    config = load_config(with_defaults({"category": {"decoder": {"num_fc_layers": 2}, "loss": {"weight": 3.0}}}))
    segment = config.output_features[0]
    assert (segment.decoder.num_fc_layers, segment.loss.weight) == (2, 3.0)


def test_preprocessing_defaults_reach_inputs_and_outputs():
    config = load_config(with_defaults({"category": {"preprocessing": {"most_common": 7}}}))
    assert config.input_features[0].preprocessing.most_common == 7
    assert config.output_features[0].preprocessing.most_common == 7


def test_encoder_default_given_as_a_name():
    features = {"input_features": [{"name": "review", "type": "text"}], "output_features": [{"name": "y", "type": "binary"}]}
    assert load_config(with_defaults({"text": {"encoder": "rnn"}}, features)).input_features[0].encoder.type == "rnn"


def test_an_encoder_default_without_a_type_is_for_the_default_encoder():
    """Unset, the default is the type's default encoder: it merges into a feature naming that
    encoder, and not into one naming another."""
    features = {"input_features": [{"name": "a", "type": "text", "encoder": {"type": "parallel_cnn"}},
                                   {"name": "b", "type": "text", "encoder": {"type": "rnn"}}],
                "output_features": [{"name": "y", "type": "binary"}]}
    a, b = load_config(with_defaults({"text": {"encoder": {"embedding_size": 16}}}, features)).input_features
    assert (a.encoder.embedding_size, b.encoder.embedding_size) == (16, 64)


def test_a_loss_default_without_a_type_merges_with_the_features_own_loss():
    features = {"input_features": [{"name": "x", "type": "number"}],
                "output_features": [{"name": "y", "type": "number", "loss": {"type": "mean_squared_error"}}]}
    loss = load_config(with_defaults({"number": {"loss": {"weight": 2.0}}}, features)).output_features[0].loss
    assert (loss.type, loss.weight) == ("mean_squared_error", 2.0)


# ---- mistakes ------------------------------------------------------------------------------------

def test_a_typo_in_defaults_of_a_type_no_feature_has_is_caught():
    assert problems_of(with_defaults({"set": {"encoder": {"embeding_size": 8}}})) == [
        "defaults.set.encoder.embeding_size: unknown field; did you mean embedding_size?"]


def test_a_typo_in_defaults_is_reported_once_not_again_in_each_feature():
    assert problems_of(with_defaults({"category": {"encoder": {"embeding_size": 8}}})) == [
        "defaults.category.encoder.embeding_size: unknown field; did you mean embedding_size?"]


def test_a_bad_value_in_defaults_names_its_path():
    [problem] = problems_of(with_defaults({"number": {"preprocessing": {"normalization": "zscor"}}}))
    assert problem == "defaults.number.preprocessing.normalization: got 'zscor'; did you mean zscore?"


def test_an_unknown_encoder_type_in_defaults():
    [problem] = problems_of(with_defaults({"category": {"encoder": {"type": "dens"}}}))
    assert problem.startswith("defaults.category.encoder.type: unknown type 'dens'; did you mean dense?")


def test_an_unknown_section_of_a_type():
    [problem] = problems_of(with_defaults({"number": {"encodr": {"type": "dense"}}}))
    assert problem.startswith("defaults.number.encodr: unknown field; did you mean encoder?")


def test_a_misspelt_feature_type_in_defaults():
    assert problems_of(with_defaults({"categroy": {"preprocessing": {}}})) == [
        "defaults.categroy: unknown field; did you mean category?"]


# ---- defaults as Ludwig renders them, for every type ----------------------------------------------

def test_defaults_of_every_ludwig_type_are_accepted_as_ludwig_renders_them():
    config = load_config(with_defaults({
        "image": {"preprocessing": {"height": None, "width": None, "num_channels": None},
                  "encoder": {"type": "stacked_cnn", "conv_layers": None}, "augmentation": [],
                  "decoder": {"type": "unet"}, "loss": {"type": "softmax_cross_entropy"}},
        "audio": {"preprocessing": {"audio_file_length_limit_in_s": 7.5}, "encoder": {"type": "parallel_cnn"}},
        "timeseries": {"decoder": {"type": "projector"}, "loss": {"type": "huber"}},
        "text": {"decoder": {"type": "generator", "cell_type": "gru"}, "loss": {"type": "sequence_softmax_cross_entropy"}},
        "vector": {"decoder": {"type": "projector"}, "loss": {"type": "mean_squared_error"}},
    }))
    assert config.defaults.image.encoder.type == "stacked_cnn" and config.defaults.image.augmentation == []


def test_image_defaults_reach_image_inputs():
    config = load_config({**with_defaults({"image": {"augmentation": True, "preprocessing": {"height": 8}}}),
                          "input_features": [{"name": "a", "type": "image", "preprocessing": {"width": 6}},
                                             {"name": "b", "type": "image", "augmentation": False}]})
    a, b = config.input_features
    assert [op.type for op in a.augmentation] == ["random_horizontal_flip", "random_rotate"] and b.augmentation == []
    assert (a.preprocessing.height, a.preprocessing.width) == (8, 6)


def test_defaults_of_ludwig_types_take_only_ludwigs_sections():
    [problem] = problems_of(with_defaults({"date": {"encoder": {"type": "embed"}, "threshold": 0.5}}))
    assert problem.startswith("defaults.date.threshold: unknown field")
