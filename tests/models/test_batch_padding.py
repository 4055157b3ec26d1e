"""Which token columns a batch may pad to its own longest row, and that doing so changes no
prediction."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from plait.api import Model
from plait.models.ecd import ECD

META = {"vocabulary": ["<PAD>", "<UNK>", "a", "b"], "sequence_length": 6, "padding": "right"}


@pytest.mark.parametrize("encoder, padded", [
    ({"type": "embed"}, True), ({"type": "transformer", "num_heads": 2, "hidden_size": 8}, True),
    ({"type": "rnn"}, True), ({"type": "rnn", "bidirectional": True}, False), ({"type": "parallel_cnn"}, False),
    ({"type": "embed", "reduce_output": "concat"}, False),
])
def test_only_encoders_that_read_real_tokens_alone_take_batch_padding(plait_config, encoder, padded):
    config = plait_config(inputs=[{"name": "t", "type": "text", "encoder": encoder}])
    model = ECD(config, {"features": {"t": META, "y": {}}})
    assert model.batch_padded == (["t"] if padded else [])


def test_left_padded_inputs_keep_their_length(plait_config):
    config = plait_config(inputs=[{"name": "t", "type": "text", "preprocessing": {"padding": "left"}}])
    assert ECD(config, {"features": {"t": {**META, "padding": "left"}, "y": {}}}).batch_padded == []


def test_a_row_predicts_the_same_alone_and_beside_a_long_row(make_config):
    rows = pd.DataFrame({"t": ["a b", "a a a a a a a a b b b b b b b b"] * 30, "y": [0.0, 1.0] * 30})
    model = Model(make_config([{"name": "t", "type": "text", "encoder": "embed"}], [{"name": "y", "type": "number"}],
                              trainer={"epochs": 1}))
    model.train(rows)
    assert model.module.batch_padded == ["t"]
    alone, beside = model.predict(rows.iloc[:1]), model.predict(rows.iloc[:2])
    assert torch.allclose(torch.tensor(alone["y_predictions"].iloc[0]), torch.tensor(beside["y_predictions"].iloc[0]))
