"""Encoder and input-feature settings as a Ludwig user writes them: every Ludwig 0.17 default
validates, and what plait does not do is refused by name with what to use instead."""

from __future__ import annotations

import pytest

from plait.config import load_config
from plait.errors import ConfigError

FC = {"fc_layers": None, "use_bias": True, "weights_initializer": "xavier_uniform", "bias_initializer": "zeros",
      "norm": None, "norm_params": None}
EMBEDDING = {"representation": "dense", "embedding_size": 256, "embeddings_trainable": True,
             "pretrained_embeddings": None, "embeddings_on_cpu": False}
CONV = {"conv_layers": None, "num_conv_layers": None, "filter_size": 3, "num_filters": 256, "pool_function": "max",
        "pool_size": None}
STRIDED = {"strides": 1, "padding": "same", "dilation_rate": 1, "pool_strides": None, "pool_padding": "same"}
RECURRENT = {"cell_type": "rnn", "state_size": 256, "bidirectional": False, "recurrent_dropout": 0.0,
             "activation": "tanh", "recurrent_activation": "sigmoid", "unit_forget_bias": True,
             "recurrent_initializer": "orthogonal"}
SEQUENCE_FC = {**FC, "num_fc_layers": 0, "output_size": 256, "fc_activation": "relu", "fc_dropout": 0.0}

# Each encoder with every setting at Ludwig 0.17's default, as Ludwig renders it (its computed
# settings, such as vocab and max_sequence_length, are stripped before validation).
LUDWIG_RENDERED = [
    ("number", {"type": "passthrough", "adapter": None}),
    ("number", {"type": "dense", "adapter": None, "dropout": 0.0, "activation": "relu", "output_size": 256,
                "num_layers": 1, **FC}),
    ("number", {"type": "ple", "num_bins": 64, "output_size": 256}),
    ("number", {"type": "periodic", "num_frequencies": 64, "output_size": 256, "sigma": 1.0}),
    ("number", {"type": "bins", "num_bins": 32, "output_size": 256}),
    ("vector", {"type": "dense", "dropout": 0.0, "activation": "relu", "output_size": 256, "num_layers": 1, **FC}),
    ("category", {"type": "dense", "dropout": 0.0, "embedding_initializer": None, "embedding_size": 50,
                  "embeddings_on_cpu": False, "embeddings_trainable": True, "pretrained_embeddings": None}),
    ("category", {"type": "sparse", "dropout": 0.0, "embedding_initializer": None, "embeddings_on_cpu": False,
                  "embeddings_trainable": False, "pretrained_embeddings": None}),
    ("category", {"type": "onehot"}),
    ("category", {"type": "passthrough"}),
    ("category", {"type": "hash", "num_hash_buckets": 1024, "embedding_size": 50}),
    ("set", {"type": "embed", "dropout": 0.0, "activation": "relu", **EMBEDDING, "embedding_size": 50,
             "output_size": 10, "num_fc_layers": 0, **FC}),
    ("text", {"type": "embed", "dropout": 0.0, **EMBEDDING, "weights_initializer": "uniform", "reduce_output": "sum"}),
    ("text", {"type": "parallel_cnn", "dropout": 0.0, "activation": "relu", **EMBEDDING, **CONV, **FC,
              "reduce_output": "sum", "output_size": 256, "num_fc_layers": None}),
    ("text", {"type": "stacked_cnn", "dropout": 0.0, "activation": "relu", **EMBEDDING, **CONV, **STRIDED, **FC,
              "reduce_output": "sum", "output_size": 256, "num_fc_layers": None}),
    ("text", {"type": "stacked_parallel_cnn", "dropout": 0.0, "activation": "relu", **EMBEDDING,
              "stacked_layers": None, "num_stacked_layers": None, "filter_size": 3, "num_filters": 256,
              "pool_function": "max", "pool_size": None, **FC, "reduce_output": "sum", "output_size": 256,
              "num_fc_layers": None}),
    ("text", {"type": "rnn", "dropout": 0.0, **EMBEDDING, **RECURRENT, "num_layers": 1, **SEQUENCE_FC,
              "reduce_output": "last"}),
    ("text", {"type": "cnnrnn", "dropout": 0.0, **EMBEDDING, **RECURRENT, **CONV, **STRIDED, "filter_size": 5,
              "pool_size": 2, "conv_activation": "relu", "conv_dropout": 0.0, "num_rec_layers": 1, **SEQUENCE_FC,
              "reduce_output": "last"}),
    ("text", {"type": "transformer", "dropout": 0.1, **EMBEDDING, "num_layers": 1, "hidden_size": 256,
              "num_heads": 8, "transformer_output_size": 256, **SEQUENCE_FC, "reduce_output": "last",
              "use_rope": False}),
]


def config_with(*inputs: dict) -> dict:
    return {"input_features": list(inputs), "output_features": [{"name": "y", "type": "binary"}]}


def problem(*inputs: dict) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(config_with(*inputs))
    lines = str(err.value).splitlines()
    assert len(lines) == 2, str(err.value)
    return lines[1].strip()


@pytest.mark.parametrize("ftype,encoder", LUDWIG_RENDERED, ids=[f"{f}-{e['type']}" for f, e in LUDWIG_RENDERED])
def test_ludwig_rendered_encoders_validate_unchanged(ftype, encoder):
    feature = {"name": "x", "type": ftype, "column": "x", "tied": None, "active": True, "encoder": encoder}
    config = load_config(config_with(feature))
    built = config.input_features[0].encoder
    assert built.type == encoder["type"]
    for key, value in encoder.items():
        if key != "adapter":
            assert getattr(built, key) == value, key


def test_plait_defaults_that_differ_from_ludwigs_are_kept():
    config = load_config(config_with({"name": "t", "type": "text"}, {"name": "r", "type": "text", "encoder": "rnn"}))
    cnn, rnn = (f.encoder for f in config.input_features)
    assert (cnn.type, cnn.embedding_size, cnn.num_filters, cnn.reduce_output) == ("parallel_cnn", 64, 64, "max")
    assert (rnn.cell_type, rnn.state_size, rnn.reduce_output) == ("lstm", 64, "mean")


@pytest.mark.parametrize("encoder,expected", [
    ({"type": "mt5"}, "Ludwig 0.17 does not register the mt5 encoder either; use auto_transformer"),
    ({"type": "llm"}, "use auto_transformer (any Hugging Face model), or model_type: llm"),
    ({"type": "tf_idf"}, "use the embed encoder"),
    ({"type": "mamba"}, "use the rnn or transformer encoder"),
])
def test_ludwig_text_encoders_plait_lacks_are_refused_with_advice(encoder, expected):
    assert expected in problem({"name": "t", "type": "text", "encoder": encoder})


def test_target_encoding_is_refused_with_advice():
    assert "use the dense (embedding) or hash encoder" in problem({"name": "c", "type": "category",
                                                                    "encoder": "target"})


@pytest.mark.parametrize("feature,expected", [
    ({"type": "text", "encoder": {"type": "rnn", "num_filters": 8}},
     "input_features[0].encoder.num_filters: a setting of the cnnrnn, parallel_cnn, stacked_parallel_cnn, "
     "text/sequence/timeseries/audio stacked_cnn encoders, not of the rnn encoder"),
    ({"type": "number", "encoder": {"type": "dense", "num_bins": 8}},
     "input_features[0].encoder.num_bins: a setting of the bins, ple encoders, not of the dense encoder"),
    ({"type": "number", "encoder": {"type": "dense", "embedding_size": 8}},
     "input_features[0].encoder.embedding_size: a setting of the bag embed, category dense, cnnrnn, date embed, h3 embed, "),
    ({"type": "text", "decoder": {"type": "classifier"}},
     "input_features[0].decoder: a setting of output features, not of input features"),
    ({"type": "text", "state_size": 8}, "input_features[0].state_size: an encoder setting: write it under encoder"),
])
def test_a_key_of_another_encoder_or_feature_kind_says_whose_it_is(feature, expected):
    assert problem({"name": "x", **feature}).startswith(expected)


@pytest.mark.parametrize("feature,expected", [
    ({"type": "category", "encoder": {"type": "dense", "embeddings_on_cpu": True}},
     "encoder.embeddings_on_cpu: got True; plait does not implement this Ludwig setting"),
    ({"type": "text", "encoder": {"type": "transformer", "use_rope": True}}, "learns position embeddings"),
    ({"type": "text", "encoder": {"type": "rnn", "recurrent_activation": "tanh"}}, "gates use the sigmoid"),
    ({"type": "text", "encoder": {"type": "rnn", "adapter": {"type": "lora"}}}, "encoder.adapter: got {'type': 'lora'}"),
    ({"type": "number", "active": False}, "input_features[0].active: got False"),
    ({"type": "text", "encoder": {"type": "embed", "reduce_output": "attention_pooling"}},
     "use attention (a learned weighted sum over the sequence)"),
    ({"type": "text", "encoder": {"type": "rnn", "cell_type": "gru", "activation": "relu"}},
     "encoder.activation: got 'relu'; a gru cell takes tanh"),
    ({"type": "text", "encoder": {"type": "stacked_cnn", "conv_layers": [{}], "num_conv_layers": 2}},
     "encoder.num_conv_layers: give conv_layers or num_conv_layers, not both"),
    ({"type": "text", "encoder": {"type": "rnn", "fc_layers": [{}], "num_fc_layers": 2}},
     "encoder.num_fc_layers: give fc_layers or num_fc_layers, not both"),
    ({"type": "vector", "encoder": {"type": "dense", "weights_initializer": "glorot"}},
     "encoder.weights_initializer: got 'glorot'; an initializer is one of"),
    ({"type": "text", "encoder": {"type": "transformer", "hidden_size": 10, "num_heads": 4}},
     "encoder.num_heads: got 4; hidden_size (10) must be a multiple of num_heads"),
    ({"type": "text", "encoder": {"type": "parallel_cnn", "conv_layers": [{"filter_size": 0}]}},
     "encoder.conv_layers[0].filter_size"),
])
def test_settings_plait_does_not_do_are_refused_by_name(feature, expected):
    assert expected in problem({"name": "x", **feature})


def test_null_adapter_and_none_reduction_as_ludwig_writes_them_validate():
    config = load_config(config_with({"name": "t", "type": "text",
                                      "encoder": {"type": "rnn", "adapter": None, "reduce_output": "None"}}))
    assert config.input_features[0].encoder.reduce_output is None


def test_tied_names_another_input_of_the_same_type():
    config = load_config(config_with({"name": "a", "type": "text", "encoder": "rnn"},
                                     {"name": "b", "type": "text", "tied": "a"}))
    assert config.input_features[1].tied == "a"
    assert problem({"name": "a", "type": "text"}, {"name": "b", "type": "text", "tied": "c"}) == (
        "input_features[1].tied: got 'c', which is no other input feature; text inputs to tie to: a")
    assert problem({"name": "a", "type": "number"}, {"name": "b", "type": "text", "tied": "a"}).startswith(
        "input_features[1].tied: 'a' is a number feature and 'b' a text one")
    assert "tie to 'a' directly" in problem({"name": "a", "type": "set"}, {"name": "b", "type": "set", "tied": "a"},
                                            {"name": "c", "type": "set", "tied": "b"})
    assert problem({"name": "a", "type": "text", "encoder": "rnn"},
                   {"name": "b", "type": "text", "tied": "a", "encoder": "parallel_cnn"}).startswith(
        "input_features[1].encoder.type: got 'parallel_cnn', but 'b' shares the rnn encoder of 'a'")


def test_an_image_conv_layer_with_ludwigs_1d_keys_says_which_key_the_2d_blocks_read():
    config = {"input_features": [{"name": "i", "type": "image", "encoder": {
                  "type": "stacked_cnn", "conv_layers": [{"num_filters": 32}, {"kernel_size": 3, "pool_size": 2}]}}],
              "output_features": [{"name": "y", "type": "binary"}]}
    with pytest.raises(ConfigError) as error:
        load_config(config)
    problems = str(error.value)
    assert "encoder.conv_layers[0].num_filters: a key of Ludwig's 1-D convolution layers" in problems
    assert "(its 2-D blocks read out_channels" in problems and "write out_channels" in problems
    assert "encoder.conv_layers[1].pool_size:" in problems and "write pool_kernel_size" in problems
