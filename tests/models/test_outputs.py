"""Output heads: loss (with its options), predictions, and the ECD model's weighted total loss."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from plait.errors import PlaitError
from plait.models.ecd import ECD
from plait.models.heads import build_head

HIDDEN = 6
LABELS = ["a", "b", "c"]
OUTPUT_METADATA = {
    "binary": {},
    "category": {"vocabulary": LABELS},
    "number": {"shift": 10.0, "scale": 2.0},
    "set": {"vocabulary": ["red", "green", "blue"]},
}


@pytest.fixture
def make_head(plait_config):
    """make_head(type, **feature options) -> the output head, built from a validated config."""

    def make(ftype: str, metadata: dict | None = None, **options):
        config = plait_config(outputs=[{"name": "y", "type": ftype, **options}])
        return build_head(config.output_features[0], metadata or OUTPUT_METADATA[ftype], HIDDEN)

    return make


def _logits(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- binary --------------------------------------------------------------------------------

def test_binary_head_gives_one_logit_per_row(make_head):
    head = make_head("binary")
    assert head(torch.randn(4, HIDDEN)).shape == (4,)


def test_binary_loss_is_cross_entropy(make_head):
    head = make_head("binary")
    logits, target = _logits(20), (torch.arange(20) % 3 == 0).float()
    p = torch.sigmoid(logits)
    expected = -(target * p.log() + (1 - target) * (1 - p).log()).mean()
    torch.testing.assert_close(head.loss(logits, target), expected)


def test_binary_positive_class_weight_scales_the_positive_terms(make_head):
    head = make_head("binary", loss={"positive_class_weight": 3.0})
    logits, target = _logits(20), (torch.arange(20) % 3 == 0).float()
    p = torch.sigmoid(logits)
    expected = -(3.0 * target * p.log() + (1 - target) * (1 - p).log()).mean()
    torch.testing.assert_close(head.loss(logits, target), expected)
    # Mistakes on positives cost more than without the weight.
    wrong_positive = (torch.tensor([-3.0]), torch.tensor([1.0]))
    assert head.loss(*wrong_positive) == pytest.approx(3 * make_head("binary").loss(*wrong_positive).item())


@pytest.mark.parametrize("threshold", [0.5, 0.8])
def test_binary_predictions_use_the_threshold(make_head, threshold):
    head = make_head("binary", threshold=threshold)
    probabilities = torch.tensor([0.1, 0.6, 0.79, 0.81])
    out = head.predict(torch.logit(probabilities))
    torch.testing.assert_close(out["probability"], probabilities)
    assert out["prediction"].tolist() == [p >= threshold for p in probabilities.tolist()]


# ---- category ------------------------------------------------------------------------------

def _weighted_cross_entropy(logits, target, weights):
    """sum over valid rows of w[t] * -log softmax[t], divided by the sum of those weights."""
    valid = target >= 0
    logp = torch.log_softmax(logits[valid], -1)
    t = target[valid]
    w = weights[t]
    return -(w * logp[torch.arange(len(t)), t]).sum() / w.sum()


def test_category_head_gives_one_logit_per_label(make_head):
    assert make_head("category")(torch.randn(4, HIDDEN)).shape == (4, len(LABELS))


def test_category_class_weights_as_a_list_follow_vocabulary_order(make_head):
    head = make_head("category", loss={"class_weights": [1.0, 2.0, 5.0]})
    logits, target = _logits(30, 3), torch.arange(30) % 3
    expected = _weighted_cross_entropy(logits, target, torch.tensor([1.0, 2.0, 5.0]))
    torch.testing.assert_close(head.loss(logits, target), expected)


def test_category_class_weights_as_a_dict_default_to_one(make_head):
    head = make_head("category", loss={"class_weights": {"c": 5.0, "a": 0.5}})
    logits, target = _logits(30, 3), torch.arange(30) % 3
    expected = _weighted_cross_entropy(logits, target, torch.tensor([0.5, 1.0, 5.0]))
    torch.testing.assert_close(head.loss(logits, target), expected)


def test_category_class_weights_of_the_wrong_length_are_a_clear_error(make_head):
    with pytest.raises(PlaitError, match=r"class_weights.*3"):
        make_head("category", loss={"class_weights": [1.0, 2.0]})


def test_category_targets_marked_minus_one_are_ignored_by_the_loss(make_head):
    head = make_head("category", loss={"class_weights": [1.0, 2.0, 5.0]})
    logits = _logits(10, 3)
    target = torch.tensor([0, 1, -1, 2, -1, 1, 0, -1, 2, 2])
    valid = target >= 0
    torch.testing.assert_close(head.loss(logits, target), head.loss(logits[valid], target[valid]))
    unweighted = make_head("category")
    torch.testing.assert_close(unweighted.loss(logits, target), F.cross_entropy(logits[valid], target[valid]))


def test_category_row_losses_weigh_each_row_by_its_class_and_unknown_rows_by_zero(make_head):
    head = make_head("category", loss={"class_weights": [1.0, 2.0, 5.0]})
    logits, target = _logits(5, 3), torch.tensor([0, 2, -1, 1, 2])
    losses, weights = head.row_losses(logits, target)
    torch.testing.assert_close(weights, torch.tensor([1.0, 5.0, 0.0, 2.0, 5.0]))
    plain = F.cross_entropy(logits, target.clamp(min=0), reduction="none")
    torch.testing.assert_close(losses, weights * plain)


def test_category_predictions_are_the_most_probable_label(make_head):
    head = make_head("category")
    logits = _logits(8, 3)
    out = head.predict(logits)
    torch.testing.assert_close(out["probabilities"].sum(-1), torch.ones(8))
    assert torch.equal(out["prediction"], logits.argmax(-1))
    torch.testing.assert_close(out["probability"], out["probabilities"].max(-1).values)


# ---- number --------------------------------------------------------------------------------

@pytest.mark.parametrize("loss,reference", [
    ({"type": "mean_squared_error"}, lambda p, t: ((p - t) ** 2).mean()),
    ({"type": "mean_absolute_error"}, lambda p, t: (p - t).abs().mean()),
    ({"type": "huber", "delta": 0.5}, lambda p, t: torch.where((p - t).abs() <= 0.5, 0.5 * (p - t) ** 2,
                                                               0.5 * ((p - t).abs() - 0.25)).mean()),
])
def test_number_losses(make_head, loss, reference):
    head = make_head("number", loss=loss)
    pred, target = _logits(40, seed=1) * 2, _logits(40, seed=2)
    torch.testing.assert_close(head.loss(pred, target), reference(pred, target))


def test_number_predictions_are_in_the_data_units(make_head):
    head = make_head("number")
    normalized = torch.tensor([-1.0, 0.0, 2.5])
    # preprocessing stored x -> (x - shift) / scale; predictions undo it
    torch.testing.assert_close(head.predict(normalized)["prediction"], torch.tensor([8.0, 10.0, 15.0]))


# ---- set -----------------------------------------------------------------------------------

def test_set_loss_is_mean_binary_cross_entropy_over_elements(make_head):
    head = make_head("set")
    logits, target = _logits(6, 3), torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1]]).float()
    p = torch.sigmoid(logits)
    expected = -(target * p.log() + (1 - target) * (1 - p).log()).mean()
    torch.testing.assert_close(head.loss(logits, target), expected)


def test_set_predictions_are_the_elements_above_the_threshold(make_head):
    head = make_head("set", threshold=0.7)
    probabilities = torch.tensor([[0.9, 0.69, 0.71], [0.1, 0.2, 0.3]])
    out = head.predict(torch.logit(probabilities))
    assert out["prediction"].tolist() == [[True, False, True], [False, False, False]]
    torch.testing.assert_close(out["probabilities"], probabilities)


# ---- the whole model -----------------------------------------------------------------------

def _ecd(plait_config, input_metadata, weights=(2.0, 0.5, 0.0)):
    config = plait_config(
        inputs=[{"name": "x", "type": "number"}, {"name": "c", "type": "category"}, {"name": "t", "type": "text"}],
        outputs=[
            {"name": "b", "type": "binary", "loss": {"weight": weights[0]}},
            {"name": "k", "type": "category", "loss": {"weight": weights[1]}},
            {"name": "n", "type": "number", "loss": {"weight": weights[2]}},
        ],
    )
    metadata = {"features": {
        "x": input_metadata["number"], "c": input_metadata["category"], "t": input_metadata["text"],
        "b": OUTPUT_METADATA["binary"], "k": OUTPUT_METADATA["category"], "n": OUTPUT_METADATA["number"],
    }}
    return ECD(config, metadata)


def test_ecd_gives_logits_per_output_and_a_weighted_total_loss(plait_config, input_metadata, make_input_batch):
    torch.manual_seed(0)
    model = _ecd(plait_config, input_metadata)
    rows = 9
    inputs = {"x": make_input_batch("number", rows), "c": make_input_batch("category", rows),
              "t": make_input_batch("text", rows)}
    logits = model(inputs)
    assert logits["b"].shape == (rows,) and logits["k"].shape == (rows, 3) and logits["n"].shape == (rows,)
    targets = {"b": (torch.arange(rows) % 2).float(), "k": torch.arange(rows) % 3, "n": torch.randn(rows)}
    total, losses = model.loss(logits, targets)
    assert set(losses) == {"b", "k", "n"}
    expected = 2.0 * losses["b"] + 0.5 * losses["k"] + 0.0 * losses["n"]
    torch.testing.assert_close(total, expected)
    total.backward()
    # An output with weight 0 gets no gradient into its own head.
    head_n = model.heads["n"].projection.weight.grad
    assert head_n is None or torch.count_nonzero(head_n) == 0
    assert torch.count_nonzero(model.heads["b"].projection.weight.grad) > 0


def test_ecd_state_dict_round_trips_into_a_fresh_model(plait_config, input_metadata, make_input_batch):
    torch.manual_seed(0)
    a = _ecd(plait_config, input_metadata).eval()
    torch.manual_seed(1)
    b = _ecd(plait_config, input_metadata).eval()
    b.load_state_dict(a.state_dict())
    inputs = {"x": make_input_batch("number", 4), "c": make_input_batch("category", 4), "t": make_input_batch("text", 4)}
    for name, value in a(inputs).items():
        assert torch.equal(value, b(inputs)[name])
    assert not math.isnan(sum(v.sum().item() for v in a.state_dict().values() if v.is_floating_point()))
