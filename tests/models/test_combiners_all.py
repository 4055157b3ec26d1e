"""Every combiner builds, runs forward and backward, and trains a tiny model through the API."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from plait.api import Model
from plait.errors import ConfigError
from plait.models.combiners import build_combiner

SHAPES = {"num": (1,), "cat": (4,), "text": (6, 8)}
TYPES = {"num": "number", "cat": "category", "text": "text"}
ROWS = 6

COMBINERS = {
    "concat": {"type": "concat", "flatten_inputs": True, "residual": True, "norm": "ghost",
               "fc_layers": [{"output_size": 8}, {"output_size": 8, "activation": "tanh", "use_bias": False}]},
    "transformer": {"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1, "output_size": 8},
    "ft_transformer": {"type": "ft_transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1, "output_size": 8},
    "tabnet": {"type": "tabnet", "size": 4, "output_size": 8, "num_steps": 2, "bn_virtual_bs": 4},
    "tabnet_entmax15": {"type": "tabnet", "size": 4, "output_size": 8, "entmax_mode": "entmax15"},
    "tabtransformer": {"type": "tabtransformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1,
                       "embed_input_feature_name": 2, "output_size": 8},
    "comparator": {"type": "comparator", "entity_1": ["num", "cat"], "entity_2": ["text"], "output_size": 8},
    "project_aggregate": {"type": "project_aggregate", "projection_size": 8, "output_size": 8},
    "sequence_concat": {"type": "sequence_concat", "reduce_output": "sum"},
    "sequence": {"type": "sequence", "encoder": {"type": "rnn"}, "reduce_output": "last"},
}
OUTPUT_SHAPES = {"concat": (8,), "transformer": (8,), "ft_transformer": (8,), "tabnet": (8,), "tabnet_entmax15": (8,),
                 "tabtransformer": (8,), "comparator": (18,), "project_aggregate": (8,),
                 "sequence_concat": (13,), "sequence": (256,)}


def _encoded():
    g = torch.Generator().manual_seed(0)
    encoded = {name: torch.randn(ROWS, *shape, generator=g) for name, shape in SHAPES.items()}
    encoded["text"][:, 4:] = 0  # padding encodes to zeros
    return encoded


@pytest.mark.parametrize("name", COMBINERS)
def test_combiner_runs_forward_and_backward(plait_config, name):
    torch.manual_seed(0)
    config = plait_config(input_features=[{"name": n, "type": t} for n, t in TYPES.items()], combiner=COMBINERS[name])
    combiner = build_combiner(config.combiner, SHAPES, TYPES)
    encoded = {n: x.requires_grad_() for n, x in _encoded().items()}
    hidden, auxiliary = combiner(encoded)
    assert hidden.shape == (ROWS, *OUTPUT_SHAPES[name]) and combiner.output_shape == OUTPUT_SHAPES[name]
    assert (auxiliary is not None) == name.startswith("tabnet")
    (hidden.square().mean() + (auxiliary if auxiliary is not None else 0)).backward()
    assert all(p.grad is not None for p in combiner.parameters() if p.requires_grad)
    assert encoded["num"].grad is not None


def test_sequence_concat_joins_vectors_to_every_used_position(plait_config):
    config = plait_config(input_features=[{"name": n, "type": t} for n, t in TYPES.items()],
                          combiner={"type": "sequence_concat", "main_sequence_feature": "text", "reduce_output": None})
    combiner = build_combiner(config.combiner, SHAPES, TYPES)
    encoded = _encoded()
    hidden = combiner(encoded).hidden  # [rows, 6, 8 + 1 + 4]
    torch.testing.assert_close(hidden[:, :4, :8], encoded["text"][:, :4])
    torch.testing.assert_close(hidden[:, 2, 8:9], encoded["num"])
    assert (hidden[:, 4:] == 0).all()


def test_sequence_combiner_needs_a_sequence_output(plait_config):
    config = plait_config(combiner={"type": "sequence"})
    with pytest.raises(ConfigError, match="no input feature outputs a sequence"):
        build_combiner(config.combiner, {"num": (1,)}, {"num": "number"})


def test_concat_refuses_a_sequence_unless_flattened(plait_config):
    config = plait_config(combiner={"type": "concat"})
    with pytest.raises(ConfigError, match="flatten_inputs: true"):
        build_combiner(config.combiner, SHAPES, TYPES)


def test_comparator_is_symmetric_in_its_comparisons(plait_config):
    config = plait_config(input_features=[{"name": "a", "type": "vector"}, {"name": "b", "type": "vector"}],
                          combiner={"type": "comparator", "entity_1": ["a"], "entity_2": ["b"], "output_size": 3})
    combiner = build_combiner(config.combiner, {"a": (2,), "b": (2,)}).eval()
    combiner.fc[1].load_state_dict(combiner.fc[0].state_dict())  # the same layers for both entities
    x = torch.randn(4, 2)
    hidden = combiner({"a": x, "b": x}).hidden
    assert (hidden[:, 4:7] == 0).all()  # |e1 - e2| of identical entities
    torch.testing.assert_close(hidden[:, 0], hidden[:, 1:4].sum(1))  # the dot product is the products' sum


# Training through the API ----------------------------------------------------------------------

def _frame(rows: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=rows), rng.normal(size=rows)
    colour = rng.choice(["red", "green", "blue"], size=rows)
    return pd.DataFrame({"a": a, "b": b, "colour": colour, "y": (a + b + (colour == "red") > 0.5)})


TRAINED = {
    "concat": {"type": "concat", "num_fc_layers": 2, "output_size": 8, "residual": True},
    "transformer": {"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1, "output_size": 8},
    "ft_transformer": {"type": "ft_transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1, "output_size": 8},
    "tabnet": {"type": "tabnet", "size": 4, "output_size": 8, "num_steps": 2, "bn_virtual_bs": 8},
    "tabtransformer": {"type": "tabtransformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1,
                       "embed_input_feature_name": "add", "output_size": 8},
    "comparator": {"type": "comparator", "entity_1": ["a"], "entity_2": ["b", "colour"], "output_size": 8},
    "project_aggregate": {"type": "project_aggregate", "projection_size": 8, "output_size": 8},
}


@pytest.mark.parametrize("name", TRAINED)
def test_combiner_trains_and_predicts(tmp_path, name):
    config = {"input_features": [{"name": "a", "type": "number"}, {"name": "b", "type": "number"},
                                 {"name": "colour", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}], "combiner": TRAINED[name],
              "trainer": {"epochs": 2, "batch_size": 16},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    df = _frame()
    model = Model(config)
    result = model.train(dataset=df, random_seed=1, progress_bar=False)
    losses = [r["training"]["combined"]["loss"] for r in result.training_statistics]
    assert len(losses) == 2 and all(np.isfinite(losses))
    predictions = model.predict(df)
    assert len(predictions) == len(df)
