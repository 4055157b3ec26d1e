"""Output features as Ludwig 0.17 writes them: decoder, loss and feature keys accepted, and what
plait does not implement refused by name with what to use instead."""

from __future__ import annotations

import pytest

from plait.config import load_config
from plait.errors import ConfigError

INPUTS = [{"name": "age", "type": "number"}]


def outputs(*features: dict):
    return load_config({"input_features": INPUTS, "output_features": list(features)}).output_features


def test_a_ludwig_rendered_output_validates_unchanged():
    rendered = {
        "active": True, "name": "bought", "type": "binary", "column": "bought", "dependencies": [], "reduce_input": "sum",
        "reduce_dependencies": "sum", "threshold": 0.5, "calibration": False,
        "decoder": {"type": "regressor", "fc_layers": None, "num_fc_layers": 0, "fc_output_size": 256,
                    "fc_use_bias": True, "fc_weights_initializer": "xavier_uniform", "fc_bias_initializer": "zeros",
                    "fc_norm": None, "fc_norm_params": None, "fc_activation": "relu", "fc_dropout": 0.0,
                    "use_bias": True, "weights_initializer": "xavier_uniform", "bias_initializer": "zeros"},
        "loss": {"type": "binary_weighted_cross_entropy", "weight": 1.0, "positive_class_weight": None,
                 "robust_lambda": 0, "confidence_penalty": 0},
    }
    [feature] = outputs(rendered)
    assert feature.decoder.fc_weights_initializer == "xavier_uniform" and feature.loss.robust_lambda == 0


def test_an_inactive_output_is_refused():
    with pytest.raises(ConfigError) as info:
        outputs({"name": "bought", "type": "binary", "active": False})
    assert info.value.problems[0].startswith("output_features[0].active: got False; plait does not implement")
    assert info.value.problems[0].endswith("remove the feature from output_features")


@pytest.mark.parametrize(("ftype", "loss"), [
    ("binary", "focal"), ("category", "focal"), ("category", "poly"), ("number", "mean_absolute_percentage_error"),
    ("number", "root_mean_squared_error"), ("number", "root_mean_squared_percentage_error"), ("number", "huber"),
    ("set", "sigmoid_cross_entropy"),
])
def test_every_ludwig_loss_plait_implements_is_accepted(ftype, loss):
    [feature] = outputs({"name": "y", "type": ftype, "loss": {"type": loss, "weight": 2.0}})
    assert (feature.loss.type, feature.loss.weight) == (loss, 2.0)


def test_a_loss_without_a_type_takes_the_default_type():
    [feature] = outputs({"name": "y", "type": "category", "loss": {"robust_lambda": 0.1}})
    assert feature.loss.type == "softmax_cross_entropy"


def test_plaits_earlier_decoder_names_are_read_as_ludwigs():
    [feature] = outputs({"name": "y", "type": "number",
                         "decoder": {"num_fc_layers": 2, "output_size": 8, "activation": "tanh", "dropout": 0.1}})
    decoder = feature.decoder
    assert (decoder.fc_output_size, decoder.fc_activation, decoder.fc_dropout) == (8, "tanh", 0.1)


def test_dependencies_may_form_a_chain():
    features = outputs({"name": "a", "type": "binary", "dependencies": ["b"]},
                       {"name": "b", "type": "number", "dependencies": ["c"]}, {"name": "c", "type": "category"})
    assert [f.dependencies for f in features] == [["b"], ["c"], []]


ONE_OUTPUT = {"input_features": [{"name": "age", "type": "number"}]}


@pytest.mark.parametrize(("feature", "problem"), [
    ({"name": "y", "type": "category", "loss": {"type": "corn"}},
     "output_features[0].loss.type: Ludwig's 'corn' is not implemented in plait; plait does not implement ordinal "
     "(CORN) outputs; use softmax_cross_entropy"),
    ({"name": "y", "type": "number", "decoder": {"type": "projector"}},
     "output_features[0].decoder.type: unknown type 'projector'; valid names are: regressor"),
    ({"name": "y", "type": "number", "top_k": 2},
     "output_features[0].top_k: top_k is a setting of category output features, not of number ones"),
    ({"name": "y", "type": "number", "decoder": {"multiplier": 2}},
     "output_features[0].decoder.multiplier: multiplier is a setting of the projector decoder (vector outputs)"),
    ({"name": "y", "type": "number", "clip": [5, 1]}, "output_features[0].clip: got [5.0, 1.0]; give [low, high] with "
                                                      "low at most high"),
    ({"name": "y", "type": "number", "dependencies": ["z"]},
     "output_features[0].dependencies: got 'z', which is no output feature; there is no other output"),
    ({"name": "y", "type": "number", "decoder": {"fc_norm": "batch", "fc_norm_params": {"momentum": 0.1, "size": 3}}},
     "output_features[0].decoder.fc_norm_params: got {'momentum': 0.1, 'size': 3}; batch norm takes affine, eps, "
     "momentum, track_running_stats, not size"),
    ({"name": "y", "type": "number", "decoder": {"weights_initializer": {"type": "constant"}}},
     "output_features[0].decoder.weights_initializer: got {'type': 'constant'}; constant needs its val: write "
     "{type: constant, val: ...}"),
    ({"name": "y", "type": "number", "decoder": {"output_size": 8, "fc_output_size": 8}},
     "output_features[0].decoder.output_size: output_size is plait's earlier name of fc_output_size, which is also "
     "set; keep only fc_output_size"),
    ({"name": "y", "type": "category", "loss": {"class_similarities_temperature": 1}},
     "output_features[0].loss.class_similarities_temperature: got 1.0, but class_similarities is not set; set it "
     "or use 0"),
])
def test_output_settings_plait_cannot_honour_are_refused_with_advice(refused, feature, problem):
    assert refused(**ONE_OUTPUT, output_features=[feature]) == problem


@pytest.mark.parametrize(("feature", "fragment"), [
    ({"name": "y", "type": "binary", "calibration": True}, "plait does not fit a temperature after training"),
    ({"name": "y", "type": "category", "decoder": {"mc_dropout_samples": 4}}, "one deterministic pass"),
    ({"name": "y", "type": "number", "decoder": {"fc_norm": "ghost"}}, "ghost batch norm is implemented in the combiners' fully connected layers only"),
    ({"name": "y", "type": "set", "loss": {"type": "focal"}}, "unknown type 'focal'"),
])
def test_ludwig_values_plait_does_not_implement_are_refused(refused, feature, fragment):
    assert fragment in refused(**ONE_OUTPUT, output_features=[feature])


def test_circular_dependencies_are_refused(refused):
    problem = refused(**ONE_OUTPUT, output_features=[{"name": "a", "type": "binary", "dependencies": ["b"]},
                                                     {"name": "b", "type": "binary", "dependencies": ["a"]}])
    assert problem == ("output_features[0].dependencies: output features a, b depend on each other in a cycle (or on "
                       "such features); remove one of those dependencies")
