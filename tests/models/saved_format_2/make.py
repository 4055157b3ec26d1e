"""Regenerates models saved by plait in format 2 (commit 2f74bd6, before issue #32 made the fully
connected modules one) and their predictions.

Run it from a checkout of that commit, which writes the fixtures beside this script:

    git worktree add /tmp/plait-2f74bd6 2f74bd6
    cd /tmp/plait-2f74bd6 && PYTHONPATH=$PWD python /path/to/tests/models/saved_format_2/make.py

Format 2 had three fully connected modules: the encoders' (four modules a layer in one sequence),
the decoders' (only the modules a layer used) and the combiners' (today's). The models put layers
with every part that holds tensors (linear, batch and layer norm, a PReLU activation) in each: in
encoders, decoders (mlp_classifier's hidden layers included), a tagger and a generator. Each is
trained for two epochs on ``data.csv`` (written here first) and saved under ``<name>/`` with its
predictions on the same rows in ``<name>/predictions.json``.
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

ENCODERS = [
    {"name": "number", "type": "number", "encoder": {"type": "dense", "num_layers": 2, "output_size": 3,
                                                      "norm": "batch", "activation": "prelu", "dropout": 0.1}},
    {"name": "vector", "type": "vector", "encoder": {"type": "dense", "output_size": 3, "norm": "layer", "fc_layers": [
        {"output_size": 4, "norm_params": {"eps": 0.001}},
        {"activation": "tanh", "norm": "batch", "norm_params": {"momentum": 0.2}}]}},
    {"name": "set", "type": "set", "encoder": {"type": "embed", "embedding_size": 3, "num_fc_layers": 1,
                                               "output_size": 3, "norm": "layer"}},
    {"name": "text", "type": "text", "encoder": {"type": "rnn", "embedding_size": 4, "state_size": 3,
                                                 "num_fc_layers": 2, "output_size": 3, "norm": "layer",
                                                 "fc_activation": "prelu"}},
]

OUTPUTS = [
    {"name": "out_binary", "type": "binary", "decoder": {"num_fc_layers": 1, "fc_output_size": 3, "fc_norm": "batch",
                                                         "fc_activation": "prelu", "fc_dropout": 0.1}},
    {"name": "out_number", "type": "number", "decoder": {"fc_activation": None, "fc_norm": "layer", "fc_layers": [
        {"output_size": 3}, {"output_size": 2, "activation": "tanh", "norm": "batch", "norm_params": {"eps": 0.01}}]}},
    {"name": "out_category", "type": "category", "decoder": {"type": "mlp_classifier", "num_fc_layers": 1,
                                                             "output_size": 3, "fc_output_size": 3, "fc_norm": "layer",
                                                             "activation": "prelu"}},
    {"name": "out_set", "type": "set", "decoder": {"num_fc_layers": 1, "fc_output_size": 3, "fc_dropout": 0.1}},
]

TRAINER = {"epochs": 2, "batch_size": 8, "learning_rate": 0.01}

MODELS = {
    # Fully connected layers in encoders, the concat combiner and decoders.
    "fc_everywhere": {
        "input_features": ENCODERS,
        "combiner": {"type": "concat", "num_fc_layers": 2, "output_size": 4, "norm": "batch", "dropout": 0.1,
                     "residual": True},
        "output_features": OUTPUTS,
    },
    # A tagger's and a generator's layers.
    "sequence": {
        "input_features": [{"name": "text", "type": "text",
                            "encoder": {"type": "rnn", "embedding_size": 4, "state_size": 3, "reduce_output": None}}],
        "combiner": {"type": "sequence_concat"},
        "output_features": [
            {"name": "out_tags", "type": "sequence",
             "decoder": {"type": "tagger", "num_fc_layers": 1, "fc_output_size": 3, "fc_norm": "batch"}},
            {"name": "out_text", "type": "text", "reduce_input": "sum",
             "decoder": {"type": "generator", "num_fc_layers": 1, "fc_output_size": 4, "fc_norm": "layer",
                         "fc_activation": "prelu"}}],
    },
}


def make_data() -> pd.DataFrame:
    rng = np.random.default_rng(32)
    number = rng.normal(size=ROWS).round(3)
    text = [" ".join(rng.choice(WORDS, size=rng.integers(1, 6))) for _ in range(ROWS)]
    return pd.DataFrame({
        "number": number,
        "vector": [" ".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(ROWS)],
        "set": [" ".join(sorted(set(rng.choice(COLORS, size=rng.integers(1, 3))))) for _ in range(ROWS)],
        "text": text,
        "out_binary": number > 0,
        "out_number": (2 * number + rng.normal(scale=0.1, size=ROWS)).round(3),
        "out_category": rng.choice(["x", "y", "z"], size=ROWS),
        "out_set": [" ".join(sorted(set(rng.choice(COLORS, size=rng.integers(1, 3))))) for _ in range(ROWS)],
        "out_tags": [" ".join("N" if w in ("cat", "dog", "mat") else "O" for w in t.split()) for t in text],
        "out_text": [" ".join(t.split()[::-1]) for t in text],
    })


def main() -> None:
    sys.path.insert(0, str(HERE.parent))
    from saved_models import write_fixtures  # beside this folder

    write_fixtures(HERE, make_data(), MODELS, TRAINER, random_seed=32)


if __name__ == "__main__":
    main()
