"""Ludwig's output settings in the heads: every loss against a hand computation, the decoder's
fully connected keys, reduce_input, dependencies between outputs, and a short training with them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from plait.api import Model
from plait.errors import ConfigError
from plait.models.ecd import ECD
from plait.models.heads import build_head

HIDDEN = 4
METADATA = {
    "binary": {}, "category": {"vocabulary": ["a", "b", "c"]}, "number": {"shift": 10.0, "scale": 2.0},
    "set": {"vocabulary": ["red", "green"]},
}


@pytest.fixture
def make_head(plait_config):
    def make(ftype: str, input_shape=HIDDEN, **options):
        config = plait_config(outputs=[{"name": "y", "type": ftype, **options}])
        return build_head(config.output_features[0], METADATA[ftype], input_shape)

    return make


def close(value, expected):
    assert float(value) == pytest.approx(float(expected), rel=1e-5, abs=1e-6)


def _bce(p, y):
    return -(y * math.log(p) + (1 - y) * math.log(1 - p))


def _sigmoid(x):
    return 1 / (1 + math.exp(-x))


# ---- binary losses -------------------------------------------------------------------------

def test_binary_robust_lambda_mixes_in_a_constant_half(make_head):
    head = make_head("binary", loss={"robust_lambda": 0.2})
    logits, target = torch.tensor([0.3, -1.2]), torch.tensor([1.0, 1.0])
    rows = [0.8 * _bce(_sigmoid(x), 1) + 0.2 / 2 for x in (0.3, -1.2)]
    close(head.loss(logits, target), sum(rows) / 2)


def test_binary_confidence_penalty_is_zero_at_one_half_and_grows_with_certainty(make_head):
    head = make_head("binary", loss={"confidence_penalty": 0.5})
    plain = make_head("binary")
    close(head.loss(torch.tensor([0.0]), torch.tensor([1.0])), plain.loss(torch.tensor([0.0]), torch.tensor([1.0])))
    p = _sigmoid(2.0)
    entropy = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    expected = _bce(p, 1) + 0.5 * (math.log(2) - entropy) / math.log(2)
    close(head.loss(torch.tensor([2.0]), torch.tensor([1.0])), expected)


def test_binary_focal_loss(make_head):
    head = make_head("binary", loss={"type": "focal", "alpha": 0.25, "gamma": 2.0})
    p = _sigmoid(1.0)
    positive = 0.25 * (1 - p) ** 2 * _bce(p, 1)  # p_t = p for a positive row
    negative = 0.75 * p ** 2 * _bce(p, 0)  # p_t = 1 - p for a negative row
    close(head.loss(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 0.0])), (positive + negative) / 2)


# ---- category losses -----------------------------------------------------------------------

def _softmax(row):
    exps = [math.exp(v) for v in row]
    return [e / sum(exps) for e in exps]


LOGITS = [[1.0, 0.0, -1.0], [0.5, 0.5, 2.0]]
TARGET = [0, 1]


def _category(make_head, loss):
    return make_head("category", loss=loss).loss(torch.tensor(LOGITS), torch.tensor(TARGET))


def test_category_robust_lambda_mixes_in_one_over_the_class_count(make_head):
    rows = [0.7 * -math.log(_softmax(r)[t]) + 0.3 / 3 for r, t in zip(LOGITS, TARGET)]
    close(_category(make_head, {"robust_lambda": 0.3}), sum(rows) / 2)


def test_category_confidence_penalty(make_head):
    def row(r, t):
        p = _softmax(r)
        entropy = -sum(q * math.log(q) for q in p)
        return -math.log(p[t]) + 0.1 * (math.log(3) - entropy) / math.log(3)

    close(_category(make_head, {"confidence_penalty": 0.1}), sum(row(r, t) for r, t in zip(LOGITS, TARGET)) / 2)


def test_category_class_similarities_train_towards_similar_classes(make_head):
    similarities = [[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]]
    loss = {"class_similarities": similarities, "class_similarities_temperature": 0.5}

    def row(r, t):
        soft = _softmax([s / 0.5 for s in similarities[t]])
        return -sum(q * math.log(p) for q, p in zip(soft, _softmax(r)))

    close(_category(make_head, loss), sum(row(r, t) for r, t in zip(LOGITS, TARGET)) / 2)
    with pytest.raises(ConfigError, match=r"class_similarities: a 2 x 2 matrix for 3 labels"):
        make_head("category", loss={"class_similarities": [[1, 0], [0, 1]], "class_similarities_temperature": 1})


def test_category_focal_and_poly_losses(make_head):
    focal = [(1 - _softmax(r)[t]) ** 2 * -math.log(_softmax(r)[t]) for r, t in zip(LOGITS, TARGET)]
    close(_category(make_head, {"type": "focal", "gamma": 2.0}), sum(focal) / 2)
    poly = [-math.log(_softmax(r)[t]) + 0.5 * (1 - _softmax(r)[t]) for r, t in zip(LOGITS, TARGET)]
    close(_category(make_head, {"type": "poly", "epsilon": 0.5}), sum(poly) / 2)


def test_category_losses_ignore_rows_of_unseen_labels(make_head):
    head = make_head("category", loss={"type": "poly"})
    logits = torch.tensor([*LOGITS, [9.0, 9.0, 9.0]])
    close(head.loss(logits, torch.tensor([*TARGET, -1])), head.loss(torch.tensor(LOGITS), torch.tensor(TARGET)))


# ---- number losses -------------------------------------------------------------------------

# normalized predictions and targets; in data units (x * 2 + 10): predictions 12, 9; targets 10, 8
PRED, TRUE = torch.tensor([1.0, -0.5]), torch.tensor([0.0, -1.0])


@pytest.mark.parametrize(("loss", "expected"), [
    ("mean_squared_error", (1 + 0.25) / 2),
    ("mean_absolute_error", (1 + 0.5) / 2),
    ("root_mean_squared_error", math.sqrt((1 + 0.25) / 2)),
    ("mean_absolute_percentage_error", (2 / 10 + 1 / 8) / 2),  # in the data's units
    ("root_mean_squared_percentage_error", math.sqrt(((2 / 10) ** 2 + (1 / 8) ** 2) / 2)),
    ("huber", (0.5 + 0.5 * 0.25) / 2),  # |1| -> 1 - 0.5 (linear part), |0.5| -> 0.5 * 0.25
])
def test_number_losses(make_head, loss, expected):
    close(make_head("number", loss={"type": loss}).loss(PRED, TRUE), expected)


def test_number_clip_bounds_the_predictions(make_head):
    head = make_head("number", clip=[9.0, 11.0])
    assert head.predict(torch.tensor([-5.0, 0.2, 5.0]))["prediction"].tolist() == pytest.approx([9.0, 10.4, 11.0])


# ---- set -----------------------------------------------------------------------------------

def test_set_class_weights_scale_each_items_positive_term(make_head):
    head = make_head("set", loss={"class_weights": {"green": 3.0}})
    logits, target = torch.tensor([[0.5, -0.5]]), torch.tensor([[1.0, 1.0]])
    expected = (-math.log(_sigmoid(0.5)) + 3.0 * -math.log(_sigmoid(-0.5))) / 2
    close(head.loss(logits, target), expected)


# ---- decoders ------------------------------------------------------------------------------

def test_fc_keys_shape_the_decoder_stack(make_head):
    head = make_head("category", decoder={
        "num_fc_layers": 5,  # fc_layers wins
        "fc_layers": [{"output_size": 8, "norm": "layer", "norm_params": {"eps": 0.01}}, {"use_bias": False}],
        "fc_output_size": 5, "fc_activation": "tanh", "fc_dropout": 0.1, "fc_bias_initializer": "ones",
        "fc_weights_initializer": {"type": "constant", "val": 0.5}, "use_bias": False,
        "weights_initializer": "zeros",
    })
    first, second = (list(layer.layers) for layer in head.fc.stack)
    assert [type(m) for m in first + second] == [nn.Linear, nn.LayerNorm, nn.Tanh, nn.Dropout,
                                                 nn.Linear, nn.Identity, nn.Tanh, nn.Dropout]
    assert (first[0].in_features, first[0].out_features, second[0].out_features) == (HIDDEN, 8, 5)
    assert first[1].eps == 0.01 and second[0].bias is None and first[3].p == second[3].p == 0.1
    assert torch.all(first[0].weight == 0.5) and torch.all(first[0].bias == 1.0)
    assert head.projection.bias is None and torch.all(head.projection.weight == 0)
    assert head(torch.randn(3, HIDDEN)).shape == (3, 3)


def test_plaits_earlier_decoder_names_still_build_the_same_stack(make_head):
    head = make_head("number", decoder={"num_fc_layers": 1, "output_size": 7, "activation": "gelu", "norm": "batch"})
    assert [type(m) for m in head.fc.stack[0].layers] == [nn.Linear, nn.BatchNorm1d, nn.GELU, nn.Dropout]
    assert head.fc.output_size == 7 and head.feature.decoder.fc_output_size == 7


def test_mlp_classifier_adds_its_own_hidden_layers_after_the_stack(make_head):
    head = make_head("category", decoder={"type": "mlp_classifier", "fc_output_size": 6, "output_size": 5})
    assert head.fc.output_size == 6 and head.mlp.output_size == 5  # num_fc_layers (1) sets both, as in Ludwig
    assert head(torch.randn(2, HIDDEN)).shape == (2, 3)
    assert make_head("binary", decoder={"type": "mlp_classifier"})(torch.randn(2, HIDDEN)).shape == (2,)


@pytest.mark.parametrize(("mode", "expected"), [
    ("sum", [[4.0, 6.0]]), ("mean", [[4 / 3, 2.0]]), ("max", [[3.0, 4.0]]), ("last", [[3.0, 4.0]]),
    ("concat", [[1.0, 2.0, 3.0, 4.0, 0.0, 0.0]]),
])
def test_reduce_input_makes_one_vector_of_a_sequence(make_head, mode, expected):
    head = make_head("number", input_shape=(3, 2), reduce_input=mode)
    sequence = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]])  # the last step is padding
    torch.testing.assert_close(head.reducer(sequence), torch.tensor(expected))
    assert head(sequence).shape == (1,)


def test_a_sequence_that_is_not_reduced_is_refused(make_head):
    with pytest.raises(ConfigError, match=r"reduce_input: got None, but the combiner gives a sequence \[3, 2\]"):
        make_head("number", input_shape=(3, 2), reduce_input=None)


# ---- dependencies --------------------------------------------------------------------------

def test_a_dependent_head_reads_the_hidden_state_of_the_head_it_depends_on(plait_config):
    config = plait_config(outputs=[
        {"name": "total", "type": "number", "dependencies": ["kind"], "decoder": {"num_fc_layers": 1, "fc_output_size": 3}},
        {"name": "kind", "type": "category", "decoder": {"num_fc_layers": 1, "fc_output_size": 5}},
    ])
    model = ECD(config, {"features": {"x": {}, "total": METADATA["number"], "kind": METADATA["category"]}})
    assert model.head_order == ["kind", "total"]
    width = model.combiner.output_size
    assert model.head("total").fc.stack[0].layers[0].in_features == width + 5
    logits = model({"x": torch.randn(6)})
    assert logits["total"].shape == (6,) and logits["kind"].shape == (6, 3)
    model.loss(logits, {"total": torch.randn(6), "kind": torch.arange(6) % 3})[1]["total"].backward()
    # total's loss trains kind's layers too, through the hidden state it reads
    assert torch.count_nonzero(model.head("kind").fc.stack[0].layers[0].weight.grad) > 0


def test_model_trains_and_predicts_with_dependent_outputs(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x1": rng.normal(size=120), "x2": rng.normal(size=120)})
    frame["positive"] = frame.x1 > 0
    frame["amount"] = frame.x1 * 3 + frame.x2
    config = {
        "input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}],
        "output_features": [
            {"name": "amount", "type": "number", "dependencies": ["positive"],
             "loss": {"type": "root_mean_squared_error"}, "decoder": {"num_fc_layers": 1, "fc_output_size": 8}},
            {"name": "positive", "type": "binary", "decoder": {"num_fc_layers": 1, "fc_output_size": 4}},
        ],
        "trainer": {"epochs": 2, "batch_size": 32},
        "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
    }
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    predictions = model.predict(frame.drop(columns=["positive", "amount"]))
    assert len(predictions) == 120 and {"amount_predictions", "positive_predictions"} <= set(predictions.columns)
    assert np.isfinite(predictions.amount_predictions).all()


def test_an_initializer_with_ludwigs_stddev_spelling_builds_the_head(make_head):
    """The config accepts ``stddev`` for normal's ``std`` (as Ludwig's docs spell it)."""
    torch.manual_seed(0)
    head = make_head("number", decoder={"weights_initializer": {"type": "normal", "stddev": 0.001}})
    assert float(head.projection.weight.abs().max()) < 0.01
