"""Regenerates the models saved by plait before issue #14 (commit 3784bc2) and their predictions.

Run it from a checkout of that commit, which writes the fixtures beside this script:

    git worktree add /tmp/plait-3784bc2 3784bc2
    cd /tmp/plait-3784bc2 && PYTHONPATH=$PWD python /path/to/tests/models/saved_before_14/make.py

Each model is trained for two epochs on ``data.csv`` (written here first), saved with
``Model.save`` under ``<name>/``, and its predictions on the same rows are written to
``<name>/predictions.json``. The sizes are tiny so that the fixtures stay a few KB each; what
matters is the layout of the saved config and weights, not the model's accuracy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROWS = 24
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
COLORS = ["red", "green", "blue"]

OUTPUTS = [
    {"name": "out_binary", "type": "binary", "decoder": {"num_fc_layers": 1, "output_size": 4}},
    {"name": "out_category", "type": "category", "decoder": {"num_fc_layers": 1, "output_size": 4, "norm": "layer"}},
    {"name": "out_number", "type": "number", "decoder": {"num_fc_layers": 2, "output_size": 3, "activation": "tanh"}},
    {"name": "out_set", "type": "set", "decoder": {"num_fc_layers": 1, "output_size": 4, "dropout": 0.1}},
]

TEXT_ENCODERS = {
    "text_embed": {"type": "embed", "embedding_size": 4, "reduce_output": "sum"},
    "text_cnn": {"type": "parallel_cnn", "embedding_size": 4, "num_filters": 2, "filter_sizes": [2, 3]},
    "text_rnn": {"type": "rnn", "embedding_size": 4, "state_size": 3, "cell_type": "gru", "bidirectional": True},
    "text_transformer": {"type": "transformer", "embedding_size": 4, "num_layers": 1, "num_heads": 2,
                         "hidden_size": 6},
}

OTHER_INPUTS = [
    {"name": "category", "type": "category", "encoder": {"type": "dense", "embedding_size": 3}},
    {"name": "number", "type": "number", "encoder": {"type": "dense", "num_fc_layers": 1, "output_size": 2}},
    {"name": "number_raw", "type": "number"},
    {"name": "set", "type": "set", "encoder": {"type": "embed", "embedding_size": 3, "num_fc_layers": 1,
                                               "output_size": 3}},
    {"name": "vector", "type": "vector", "encoder": {"type": "dense", "num_fc_layers": 1, "output_size": 3}},
]

TRAINER = {"epochs": 2, "batch_size": 8, "learning_rate": 0.01}

MODELS = {
    # Every text encoder and every other input, concat with hidden layers and a norm.
    "concat": {
        "input_features": [{"name": n, "type": "text", "column": "text", "encoder": e} for n, e in TEXT_ENCODERS.items()]
        + OTHER_INPUTS,
        "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 5, "norm": "batch", "dropout": 0.1},
        "output_features": OUTPUTS,
    },
    # concat with a layer norm and its defaults otherwise.
    "concat_layer_norm": {
        "input_features": [OTHER_INPUTS[0], OTHER_INPUTS[2],
                           {"name": "text", "type": "text", "encoder": {"type": "embed", "embedding_size": 3}}],
        "combiner": {"type": "concat", "num_fc_layers": 1, "output_size": 4, "norm": "layer"},
        "output_features": OUTPUTS[:1],
    },
    # The transformer combiner (and the transformer text encoder's hidden_size at its default).
    "transformer": {
        "input_features": [{"name": "text", "type": "text",
                            "encoder": {"type": "transformer", "embedding_size": 4, "num_layers": 1, "num_heads": 1}}]
        + OTHER_INPUTS,
        "combiner": {"type": "transformer", "hidden_size": 4, "num_heads": 2, "num_layers": 1,
                     "transformer_output_size": 6, "num_fc_layers": 1, "output_size": 4, "reduce_output": "concat"},
        "output_features": OUTPUTS,
    },
}


def make_data() -> pd.DataFrame:
    rng = np.random.default_rng(14)
    number = rng.normal(size=ROWS).round(3)
    return pd.DataFrame({
        "text": [" ".join(rng.choice(WORDS, size=rng.integers(0, 6))) for _ in range(ROWS)],
        "category": rng.choice(["a", "b", "c"], size=ROWS),
        "number": number,
        "number_raw": rng.normal(size=ROWS).round(3),
        "set": [" ".join(sorted(set(rng.choice(COLORS, size=rng.integers(0, 3))))) for _ in range(ROWS)],
        "vector": [" ".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(ROWS)],
        "out_binary": number > 0,
        "out_category": rng.choice(["x", "y", "z"], size=ROWS),
        "out_number": (2 * number + rng.normal(scale=0.1, size=ROWS)).round(3),
        "out_set": [" ".join(sorted(set(rng.choice(COLORS, size=rng.integers(1, 3))))) for _ in range(ROWS)],
    })


def main() -> None:
    sys.path.insert(0, str(HERE.parent))
    from saved_models import write_fixtures  # beside this folder

    write_fixtures(HERE, make_data(), MODELS, TRAINER)


if __name__ == "__main__":
    main()
