"""The combiner section: Ludwig's keys and defaults validate; what plait does not implement is
refused by name with what to use instead."""

from __future__ import annotations

import pytest

# Every combiner as Ludwig 0.17 renders it (all defaults written out), over FEATURES (age, city).
LUDWIG_RENDERED = [
    {"type": "concat", "dropout": 0.0, "activation": "relu", "flatten_inputs": False, "residual": False,
     "use_bias": True, "bias_initializer": "zeros", "weights_initializer": "xavier_uniform", "num_fc_layers": 0,
     "output_size": 256, "norm": None, "norm_params": None, "fc_layers": None, "batch_ensemble": False,
     "num_ensemble_members": 4},
    {"type": "transformer", "dropout": 0.1, "transformer_output_size": 256, "hidden_size": 256, "num_layers": 1,
     "num_heads": 8, "use_bias": True, "bias_initializer": "zeros", "weights_initializer": "xavier_uniform",
     "num_fc_layers": 0, "output_size": 256, "norm": None, "norm_params": None, "fc_layers": None,
     "fc_dropout": 0.0, "fc_activation": "relu", "fc_residual": False, "reduce_output": "mean"},
    {"type": "tabnet", "size": 32, "dropout": 0.05, "output_size": 128, "num_steps": 3, "num_total_blocks": 4,
     "num_shared_blocks": 2, "relaxation_factor": 1.5, "bn_epsilon": 0.001, "bn_momentum": 0.05,
     "bn_virtual_bs": 1024, "sparsity": 0.0001, "entmax_mode": "sparsemax", "entmax_alpha": 1.5},
    {"type": "tabtransformer", "embed_input_feature_name": None, "reduce_output": "concat", "hidden_size": 256,
     "num_heads": 8, "fc_layers": [{"output_size": 64, "dropout": 0.1}]},
    {"type": "comparator", "entity_1": ["age"], "entity_2": ["city"], "dropout": 0.0, "activation": "relu",
     "use_bias": True, "bias_initializer": "zeros", "weights_initializer": "xavier_uniform", "num_fc_layers": 1,
     "output_size": 256, "norm": None, "norm_params": None, "fc_layers": None},
    {"type": "project_aggregate", "projection_size": 128, "residual": True, "dropout": 0.0, "activation": "relu",
     "num_fc_layers": 2, "output_size": 128, "norm": "layer", "norm_params": None, "fc_layers": None,
     "use_bias": True, "bias_initializer": "zeros", "weights_initializer": "xavier_uniform"},
    {"type": "sequence_concat", "main_sequence_feature": None, "reduce_output": None},
    {"type": "sequence", "main_sequence_feature": None, "encoder": {"type": "parallel_cnn"}, "reduce_output": None},
    {"type": "concat", "weights_initializer": {"type": "normal", "std": 0.02}, "norm": "batch",
     "norm_params": {"momentum": 0.1}},
]


@pytest.mark.parametrize("combiner", LUDWIG_RENDERED, ids=lambda c: c["type"])
def test_ludwig_combiner_sections_validate(validate, combiner):
    code, out, err = validate(combiner=combiner)
    assert code == 0, err


@pytest.mark.parametrize("name", ["cross_attention", "perceiver", "gated_fusion", "hypernetwork", "tabpfn_v2"])
def test_ludwig_combiners_not_implemented_are_refused_with_advice(refused, name):
    assert refused(combiner={"type": name}).startswith(f"combiner.type: Ludwig's {name!r} is not implemented in plait; use")


@pytest.mark.parametrize("combiner,problem", [
    ({"type": "tabnet", "entmax_mode": "adaptive"}, "combiner.entmax_mode: got 'adaptive'; plait does not learn alpha"),
    ({"type": "tabnet", "num_shared_blocks": 5}, "combiner.num_shared_blocks: got 5; at most num_total_blocks (4)"),
    ({"type": "tabnet", "entmax_alpha": 2.5}, "combiner.entmax_alpha"),
    ({"type": "comparator", "entity_1": ["age"], "entity_2": ["town"]},
     "combiner.entity_2: town is not an input feature; input features are: age, city"),
    ({"type": "comparator", "entity_1": ["age"], "entity_2": ["age", "city"]},
     "combiner.entity_2: age is in both entities"),
    ({"type": "comparator", "entity_1": ["age"], "entity_2": ["city"], "num_fc_layers": 0},
     "combiner.num_fc_layers: got 0; the comparator needs at least one fully connected layer"),
    ({"type": "sequence_concat", "main_sequence_feature": "text"},
     "combiner.main_sequence_feature: got 'text', not an input feature"),
    ({"type": "sequence", "encoder": {"type": "stacked_cnn"}},
     "combiner.encoder: Ludwig's 'stacked_cnn' encoder is not implemented for the sequence combiner"),
    ({"type": "sequence", "encoder": {"type": "rnn", "state_size": 8}},
     "combiner.encoder.state_size: got 8; Ludwig's sequence combiner builds its encoder from `type` alone"),
    ({"type": "concat", "batch_ensemble": True}, "combiner.batch_ensemble: got True; plait does not implement"),
    ({"type": "concat", "norm": "layer", "norm_params": {"momentum": 0.1}},
     "combiner.norm_params: got {'momentum': 0.1}; layer norm takes bias, elementwise_affine, eps, not momentum"),
    ({"type": "concat", "weights_initializer": "glorot"}, "combiner.weights_initializer"),
    ({"type": "tabtransformer", "hidden_size": 8, "num_heads": 2, "embed_input_feature_name": 8},
     "combiner.embed_input_feature_name: got 8; must be smaller than hidden_size (8)"),
    ({"type": "transformer", "reduce_output": "median"}, "combiner.reduce_output"),
])
def test_combiner_mistakes_are_refused_with_the_path(refused, combiner, problem):
    assert refused(combiner=combiner).startswith(problem)


def test_the_sequence_combiners_encoder_takes_the_section_ludwig_renders_and_refuses_other_values():
    from plait.config import load_config
    from plait.errors import ConfigError

    rendered = {"type": "parallel_cnn", "skip": False, "adapter": None, "should_embed": True, "embedding_size": 256,
                "num_filters": 256, "filter_size": 3, "reduce_output": "sum", "conv_layers": None}
    base = {"input_features": [{"name": "t", "type": "text", "encoder": {"type": "rnn", "reduce_output": None}}],
            "output_features": [{"name": "y", "type": "binary"}]}
    assert load_config({**base, "combiner": {"type": "sequence", "encoder": rendered}}).combiner.encoder.type == "parallel_cnn"
    with pytest.raises(ConfigError) as caught:
        load_config({**base, "combiner": {"type": "sequence", "encoder": {**rendered, "num_filters": 8}}})
    assert "combiner.encoder.num_filters: got 8; Ludwig's sequence combiner builds its encoder from `type` alone" in str(caught.value)
