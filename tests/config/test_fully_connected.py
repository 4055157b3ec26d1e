"""The fully connected stack's settings, the same in every section: one layer class, one check of
the norms and their parameters, one rule for a bias's initializer, one message per mistake."""

from __future__ import annotations

import pytest

from plait.config import load_config
from small_config import FEATURES

GHOST = "got 'ghost'; ghost batch norm is implemented in the combiners' fully connected layers only"
BIAS = "got 'xavier_uniform'; xavier_uniform initializes a matrix, and a bias is a vector: use constant, normal, ones"


def _input(encoder: dict, ftype: str = "number") -> dict:
    return {"input_features": [{"name": "age", "type": ftype, "encoder": encoder}]}


def _output(decoder: dict) -> dict:
    return {"output_features": [{"name": "bought", "type": "binary", "decoder": decoder}]}


@pytest.mark.parametrize("sections,problem", [
    (_input({"type": "dense", "norm": "layer", "norm_params": {"momentum": 0.1}}),
     "input_features[0].encoder.norm_params: got {'momentum': 0.1}; layer norm takes bias, elementwise_affine, eps, "
     "not momentum"),
    # A layer's parameters are checked against its own norm, or the section's where it sets none.
    (_input({"type": "dense", "norm": "batch", "fc_layers": [{"norm": "layer", "norm_params": {"momentum": 0.1}}]}),
     "input_features[0].encoder.fc_layers[0].norm_params: got {'momentum': 0.1}; layer norm takes"),
    (_input({"type": "dense", "norm": "batch", "norm_params": {"momentum": 0.1}, "fc_layers": [{"norm": "layer"}]}),
     "input_features[0].encoder.fc_layers[0].norm_params: got {'momentum': 0.1}; layer norm takes"),
    ({"combiner": {"type": "concat", "norm": "ghost", "norm_params": {"virtual_batch_size": 4},
                   "fc_layers": [{}, {"norm": "layer"}]}},
     "combiner.fc_layers[1].norm_params: got {'virtual_batch_size': 4}; layer norm takes"),
    (_output({"fc_norm_params": {"eps": 0.01}}),
     "output_features[0].decoder.fc_norm_params: got {'eps': 0.01}, but no norm is set; set the norm or remove these"),
    # Convolutions' norms take the same parameters.
    (_input({"type": "parallel_cnn", "norm": "batch", "conv_layers": [{"norm_params": {"elementwise_affine": False}}]},
            "text"),
     "input_features[0].encoder.conv_layers[0].norm_params: got {'elementwise_affine': False}; batch norm takes"),
    (_input({"type": "stacked_cnn", "conv_norm": "layer", "conv_norm_params": {"momentum": 0.1}}, "image"),
     "input_features[0].encoder.conv_norm_params: got {'momentum': 0.1}; layer norm takes"),
])
def test_norm_params_that_do_not_fit_their_norm_are_refused_in_every_section(refused, sections, problem):
    assert refused(**{**FEATURES, **sections}).startswith(problem)


@pytest.mark.parametrize("sections,path", [
    (_input({"type": "dense", "norm": "ghost"}), "input_features[0].encoder.norm"),
    (_input({"type": "dense", "fc_layers": [{"norm": "ghost"}]}), "input_features[0].encoder.fc_layers[0].norm"),
    (_input({"type": "parallel_cnn", "conv_layers": [{"norm": "ghost"}]}, "text"),
     "input_features[0].encoder.conv_layers[0].norm"),
    (_output({"fc_norm": "ghost"}), "output_features[0].decoder.fc_norm"),
    (_output({"fc_layers": [{"norm": "ghost"}]}), "output_features[0].decoder.fc_layers[0].norm"),
])
def test_ghost_norm_outside_the_combiners_is_refused_saying_where_it_is_taken(refused, sections, path):
    assert refused(**{**FEATURES, **sections}).startswith(f"{path}: {GHOST}")


def test_ghost_norm_is_taken_by_a_combiners_layers():
    combiner = {"type": "concat", "norm": "ghost", "fc_layers": [{"norm": "ghost"}]}
    config = load_config({**FEATURES, "combiner": combiner})
    assert [layer.norm for layer in config.combiner.fc_layer_settings()] == ["ghost"]


@pytest.mark.parametrize("sections,path", [
    (_input({"type": "dense", "bias_initializer": "xavier_uniform"}), "input_features[0].encoder.bias_initializer"),
    (_input({"type": "dense", "fc_layers": [{"bias_initializer": "xavier_uniform"}]}),
     "input_features[0].encoder.fc_layers[0].bias_initializer"),
    ({"combiner": {"type": "concat", "bias_initializer": "xavier_uniform"}}, "combiner.bias_initializer"),
    (_output({"fc_bias_initializer": "xavier_uniform"}), "output_features[0].decoder.fc_bias_initializer"),
])
def test_a_bias_takes_only_an_initializer_of_a_vector_as_in_ludwig(refused, sections, path):
    """Ludwig 0.17 hands a bias to torch's initializer as it is, and torch's xavier, kaiming,
    orthogonal, eye and sparse fail on a vector: plait refuses them before training, everywhere."""
    assert refused(**{**FEATURES, **sections}).startswith(f"{path}: {BIAS}")


@pytest.mark.parametrize("section,expected", [
    # encoders: unprefixed settings; decoders: fc_ settings (use_bias is the projection's)
    ({"input_features": [{"name": "age", "type": "number", "encoder": {
        "type": "dense", "num_layers": 2, "output_size": 3, "norm": "batch", "activation": "tanh",
        "fc_layers": [{"output_size": 5}, {"activation": "relu", "dropout": 0.2}]}}]},
     [(5, "batch", "tanh", 0.0, True), (3, "batch", "relu", 0.2, True)]),
    ({"output_features": [{"name": "bought", "type": "binary", "decoder": {
        "num_fc_layers": 2, "fc_output_size": 4, "fc_norm": "layer", "fc_dropout": 0.1, "use_bias": False}}]},
     [(4, "layer", "relu", 0.1, True)] * 2),
    # a text rnn: its stack's activation and dropout are fc_activation and fc_dropout
    ({"input_features": [{"name": "age", "type": "text", "encoder": {
        "type": "rnn", "num_fc_layers": 1, "dropout": 0.3, "fc_activation": "gelu"}}]},
     [(256, None, "gelu", 0.0, True)]),
])
def test_each_layer_takes_its_sections_settings_under_the_names_the_section_gives_them(section, expected):
    config = load_config({**FEATURES, **section})
    owner = (config.input_features if "input_features" in section else config.output_features)[0]
    stack = owner.encoder if "input_features" in section else owner.decoder
    layers = stack.fc_layer_settings()
    assert [(layer.output_size, layer.norm, layer.activation, layer.dropout, layer.use_bias)
            for layer in layers] == expected


def test_a_rendered_text_encoder_with_fc_layers_validates_again():
    """A rendered config writes num_fc_layers at its default beside fc_layers: no conflict."""
    from plait.config.render import resolved_dict

    config = load_config({**FEATURES, "input_features": [
        {"name": "age", "type": "text", "encoder": {"type": "rnn", "fc_layers": [{"output_size": 4}]}}]})
    assert load_config(resolved_dict(config)) == config
