"""Metrics from sufficient statistics: shards add up to the whole, and values match scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from plait.config.metrics import METRICS_BY_OUTPUT_TYPE
from plait.evaluation.metrics import METRICS_BY_TYPE, MAX_CONFUSION_CLASSES, MetricSet, OutputMetrics, metrics_for

SHARDS = (17, 230, 53)
ROWS = sum(SHARDS)
LABELS = ["a", "b", "c", "d"]
ELEMENTS = ["red", "green", "blue", "gold"]
NUMBER_META = {"shift": 40.0, "scale": 7.5}


def filled(metric, logits, target):
    """A metric's statistics over one batch of logits and targets."""
    stats = metric.zeros()
    metric.update(stats, logits, target)
    return stats


def _generator(seed=0):
    return torch.Generator().manual_seed(seed)


def _binary(rows=ROWS, seed=0):
    g = _generator(seed)
    target = (torch.rand(rows, generator=g) < 0.4).float()
    logits = 1.5 * (2 * target - 1) + 1.5 * torch.randn(rows, generator=g)
    return logits, target


def _category(rows=ROWS, seed=0, unknown_every=23):
    g = _generator(seed)
    target = torch.randint(0, len(LABELS), (rows,), generator=g)
    logits = torch.randn(rows, len(LABELS), generator=g) + 1.5 * torch.nn.functional.one_hot(target, len(LABELS))
    target[::unknown_every] = -1  # labels unseen in training: wrong in accuracy, left out of the loss
    return logits, target


def _number(rows=ROWS, seed=0):
    g = _generator(seed)
    target = torch.randn(rows, generator=g)  # normalized, as preprocessing writes it
    logits = target + 0.4 * torch.randn(rows, generator=g)
    return logits, target


def _set(rows=ROWS, seed=0):
    g = _generator(seed)
    target = (torch.rand(rows, len(ELEMENTS), generator=g) < 0.4).float()
    target[torch.arange(rows), torch.randint(0, len(ELEMENTS), (rows,), generator=g)] = 1.0  # never empty
    logits = 1.2 * (2 * target - 1) + 1.5 * torch.randn(rows, len(ELEMENTS), generator=g)
    return logits, target


DATA = {"binary": _binary, "category": _category, "number": _number, "set": _set}
METADATA = {"binary": {}, "category": {"vocabulary": LABELS}, "number": NUMBER_META, "set": {"vocabulary": ELEMENTS}}
EXPECTED_METRICS = {ftype: set(METRICS_BY_OUTPUT_TYPE[ftype]) for ftype in DATA}
"""What the config says each type reports (``trainer.validation_metric`` is checked against it)."""


def test_every_output_type_the_config_names_has_its_metrics_class():
    assert set(METRICS_BY_TYPE) == set(METRICS_BY_OUTPUT_TYPE)


@pytest.fixture
def output_metrics(make_head):
    def make(ftype: str, **options) -> OutputMetrics:
        return metrics_for(make_head(ftype, METADATA[ftype], **options))

    return make


@pytest.mark.parametrize("ftype", sorted(DATA))
def test_metrics_of_merged_shard_statistics_equal_metrics_of_the_whole(output_metrics, ftype):
    metric = output_metrics(ftype)
    logits, target = DATA[ftype]()
    whole = filled(metric, logits, target)
    merged = metric.zeros()
    start = 0
    for rows in SHARDS:  # uneven shards, as workers or evaluation batches see them
        merged += filled(metric, logits[start : start + rows], target[start : start + rows])
        start += rows
    torch.testing.assert_close(merged, whole, rtol=1e-12, atol=1e-9)
    expected, got = metric.compute(whole), metric.compute(merged)
    assert set(got) == EXPECTED_METRICS[ftype] | ({"unseen_labels"} if ftype == "category" else set())
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_binary_metrics_match_scikit_learn(output_metrics):
    logits, target = _binary()
    metric = output_metrics("binary")
    got = metric.compute(filled(metric, logits, target))
    score = torch.sigmoid(logits).numpy()
    y, pred = target.numpy().astype(int), (score >= 0.5).astype(int)
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), abs=1e-12)
    assert got["precision"] == pytest.approx(skm.precision_score(y, pred), abs=1e-12)
    assert got["recall"] == pytest.approx(skm.recall_score(y, pred), abs=1e-12)
    assert got["f1"] == pytest.approx(skm.f1_score(y, pred), abs=1e-12)
    assert got["loss"] == pytest.approx(skm.log_loss(y, score), rel=1e-5)
    # Scores are binned into histograms (mergeable across workers): AUC is exact up to binning.
    assert got["roc_auc"] == pytest.approx(skm.roc_auc_score(y, score), abs=1e-3)


def test_binary_threshold_changes_the_predictions_counted(output_metrics):
    logits, target = _binary()
    stats_low, stats_high = (output_metrics("binary", threshold=t) for t in (0.2, 0.8))
    low, high = stats_low.zeros(), stats_high.zeros()
    stats_low.update(low, logits, target)
    stats_high.update(high, logits, target)
    low_m, high_m = stats_low.compute(low), stats_high.compute(high)
    assert low_m["recall"] > high_m["recall"] and low_m["precision"] < high_m["precision"]
    assert low_m["roc_auc"] == high_m["roc_auc"]  # ranking metric: the threshold does not matter


def test_roc_auc_of_a_perfect_and_of_a_constant_score(output_metrics):
    metric = output_metrics("binary")
    target = torch.tensor([0.0, 0.0, 1.0, 1.0])
    perfect = filled(metric, torch.tensor([-5.0, -4.0, 4.0, 5.0]), target)
    constant = filled(metric, torch.zeros(4), target)
    assert metric.compute(perfect)["roc_auc"] == pytest.approx(1.0)
    assert metric.compute(constant)["roc_auc"] == pytest.approx(0.5)


def test_category_metrics_match_scikit_learn(output_metrics):
    logits, target = _category()
    metric = output_metrics("category", top_k=2)
    got = metric.compute(filled(metric, logits, target))
    valid = (target >= 0).numpy()
    y, scores = target.numpy()[valid], logits.numpy()[valid]
    pred = scores.argmax(-1)
    assert set(np.unique(y)) == set(range(len(LABELS)))  # macro averages agree when every class occurs
    # Accuracy and hits_at_k count the unseen labels as wrong; the other metrics cover known labels.
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(y, pred) * valid.mean(), abs=1e-12)
    assert got["f1"] == pytest.approx(skm.f1_score(y, pred, average="macro"), abs=1e-9)
    assert got["precision"] == pytest.approx(skm.precision_score(y, pred, average="macro"), abs=1e-9)
    assert got["recall"] == pytest.approx(skm.recall_score(y, pred, average="macro"), abs=1e-9)
    assert got["hits_at_k"] == pytest.approx(skm.top_k_accuracy_score(y, scores, k=2, labels=range(len(LABELS))) * valid.mean(), abs=1e-12)
    probabilities = torch.softmax(logits[torch.from_numpy(valid)], -1).numpy()
    assert got["loss"] == pytest.approx(skm.log_loss(y, probabilities, labels=range(len(LABELS))), rel=1e-5)


def test_category_rows_with_unknown_labels_count_as_wrong_and_are_reported(output_metrics):
    logits, target = _category()
    metric = output_metrics("category")
    got = metric.compute(filled(metric, logits, target))
    assert got["unseen_labels"] == int((target < 0).sum()) == 14


def test_category_rows_all_unknown_give_zero_accuracy_not_empty_metrics(output_metrics):
    metric = output_metrics("category")
    got = metric.compute(filled(metric, torch.randn(5, len(LABELS)), torch.full((5,), -1)))
    assert (got["accuracy"], got["hits_at_k"], got["unseen_labels"]) == (0.0, 0.0, 5.0)


def test_category_metrics_of_known_labels_leave_out_the_unseen_count(output_metrics):
    logits, target = _category(unknown_every=10**6)
    target[0] = 0
    metric = output_metrics("category")
    assert "unseen_labels" not in metric.compute(filled(metric, logits, target))


def test_category_with_many_classes_skips_the_confusion_matrix(make_head):
    vocabulary = [f"l{i}" for i in range(MAX_CONFUSION_CLASSES + 1)]
    metric = metrics_for(make_head("category", {"vocabulary": vocabulary}))
    logits = torch.randn(50, len(vocabulary), generator=_generator())
    target = torch.randint(0, len(vocabulary), (50,), generator=_generator(1))
    got = metric.compute(filled(metric, logits, target))
    assert {"loss", "accuracy", "hits_at_k"} <= set(got) and "f1" not in got
    assert metric.size < 100  # no classes^2 statistics


def test_number_metrics_match_scikit_learn_in_data_units(output_metrics):
    logits, target = _number()
    metric = output_metrics("number")
    got = metric.compute(filled(metric, logits, target))
    y = target.double().numpy() * NUMBER_META["scale"] + NUMBER_META["shift"]
    pred = logits.double().numpy() * NUMBER_META["scale"] + NUMBER_META["shift"]
    assert got["r2"] == pytest.approx(skm.r2_score(y, pred), abs=1e-6)
    assert got["mean_absolute_error"] == pytest.approx(skm.mean_absolute_error(y, pred), rel=1e-9)
    assert got["mean_squared_error"] == pytest.approx(skm.mean_squared_error(y, pred), rel=1e-9)
    assert got["root_mean_squared_error"] == pytest.approx(np.sqrt(skm.mean_squared_error(y, pred)), rel=1e-9)
    # The loss is the training loss: in normalized units.
    assert got["loss"] == pytest.approx(torch.nn.functional.mse_loss(logits, target).item(), rel=1e-5)


def test_r2_stays_accurate_for_targets_far_from_zero(make_head):
    meta = {"shift": 1e6, "scale": 1.0}
    metric = metrics_for(make_head("number", meta))
    logits, target = _number()
    y, pred = target.double().numpy() + 1e6, logits.double().numpy() + 1e6
    assert metric.compute(filled(metric, logits, target))["r2"] == pytest.approx(skm.r2_score(y, pred), abs=1e-4)


def test_set_metrics_match_scikit_learn(output_metrics):
    logits, target = _set()
    metric = output_metrics("set")
    got = metric.compute(filled(metric, logits, target))
    y, pred = target.numpy().astype(int), (torch.sigmoid(logits) >= 0.5).numpy().astype(int)
    assert got["jaccard"] == pytest.approx(skm.jaccard_score(y, pred, average="samples"), abs=1e-9)
    assert got["precision"] == pytest.approx(skm.precision_score(y, pred, average="micro"), abs=1e-12)
    assert got["recall"] == pytest.approx(skm.recall_score(y, pred, average="micro"), abs=1e-12)
    assert got["f1"] == pytest.approx(skm.f1_score(y, pred, average="micro"), abs=1e-12)



def _set_with_unseen(rows=ROWS, seed=0, unseen_every=7):
    """_set's rows with the trailing column of items training never saw: 1 or 2 on every
    ``unseen_every``-th row, as plait.data.tensors builds an output's target."""
    logits, target = _set(rows, seed)
    unseen = torch.zeros(rows, 1)
    unseen[::unseen_every] = 1.0
    unseen[::2 * unseen_every] = 2.0
    return logits, torch.cat([target, unseen], dim=1)


def test_set_items_unseen_in_training_count_as_missed_and_are_reported(output_metrics):
    logits, target = _set_with_unseen()
    metric = output_metrics("set")
    got = metric.compute(filled(metric, logits, target))
    known = metric.compute(filled(metric, logits, target[:, :-1]))
    y, pred = target[:, :-1].numpy().astype(int), (torch.sigmoid(logits) >= 0.5).numpy().astype(int)
    unseen = target[:, -1].numpy()
    tp, fp, fn = (y & pred).sum(), ((1 - y) & pred).sum(), (y & (1 - pred)).sum() + unseen.sum()
    assert got["unseen_labels"] == (unseen > 0).sum() == 43  # rows, not items (65 items)
    assert got["recall"] == pytest.approx(tp / (tp + fn), abs=1e-12) and got["recall"] < known["recall"]
    assert got["precision"] == known["precision"]  # no prediction can hold an unseen item
    assert got["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=1e-12)
    inter, union = (y & pred).sum(1), (y | pred).sum(1) + unseen
    assert got["jaccard"] == pytest.approx(np.mean(inter / union), abs=1e-12)
    # The loss is the trained loss, which covers the seen items only.
    assert got["loss"] == known["loss"] == pytest.approx(metric.head.loss(logits, target).item(), rel=1e-6)
    assert metric.head.loss(logits, target).item() == metric.head.loss(logits, target[:, :-1]).item()


def test_set_statistics_with_unseen_items_of_two_shards_merge_exactly(output_metrics):
    logits, target = _set_with_unseen()
    metric = output_metrics("set")
    whole = filled(metric, logits, target)
    merged = filled(metric, logits[:101], target[:101]) + filled(metric, logits[101:], target[101:])
    torch.testing.assert_close(merged, whole, rtol=1e-12, atol=1e-9)
    assert metric.compute(merged) == pytest.approx(metric.compute(whole), rel=1e-10, abs=1e-12)
    assert metric.compute(merged)["unseen_labels"] == 43


def test_a_set_row_whose_items_were_all_unseen_scores_zero_jaccard(output_metrics):
    metric = output_metrics("set")
    logits = torch.full((2, len(ELEMENTS)), -5.0)  # predicts the empty set
    target = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    got = metric.compute(filled(metric, logits, target))
    # Before, the first row was the empty set predicted right (jaccard 1, nothing missed).
    assert (got["jaccard"], got["recall"], got["unseen_labels"]) == (0.5, 0.0, 1.0)


WEIGHTED_LOSSES = [
    ("binary", {"positive_class_weight": 3.0}),
    ("category", {"class_weights": [1.0, 2.0, 5.0, 0.5]}),
    ("category", {"class_weights": {"c": 5.0, "a": 0.25}}),  # labels not named weigh 1
]


@pytest.mark.parametrize("ftype,loss", WEIGHTED_LOSSES, ids=["positive_class_weight", "class_weights_list", "class_weights_dict"])
def test_the_loss_metric_is_the_trained_loss_with_its_weights(output_metrics, ftype, loss):
    metric = output_metrics(ftype, loss=loss)
    logits, target = DATA[ftype]()
    trained = metric.head.loss(logits, target).item()
    assert metric.compute(filled(metric, logits, target))["loss"] == pytest.approx(trained, rel=1e-6)
    # The weights change the loss: a metric that ignored them would not match.
    assert output_metrics(ftype).head.loss(logits, target).item() != pytest.approx(trained, rel=1e-3)


@pytest.mark.parametrize("ftype,loss", WEIGHTED_LOSSES, ids=["positive_class_weight", "class_weights_list", "class_weights_dict"])
def test_the_weighted_loss_of_two_merged_shards_is_the_trained_loss_of_the_whole(output_metrics, ftype, loss):
    metric = output_metrics(ftype, loss=loss)
    logits, target = DATA[ftype]()
    merged = filled(metric, logits[:101], target[:101]) + filled(metric, logits[101:], target[101:])
    assert metric.compute(merged)["loss"] == pytest.approx(metric.head.loss(logits, target).item(), rel=1e-6)


def test_category_class_weights_give_torch_weighted_cross_entropy(output_metrics):
    weights = [1.0, 2.0, 5.0, 0.5]
    metric = output_metrics("category", loss={"class_weights": weights})
    logits, target = _category()
    expected = torch.nn.functional.cross_entropy(logits, target, weight=torch.tensor(weights), ignore_index=-1)
    assert metric.compute(filled(metric, logits, target))["loss"] == pytest.approx(expected.item(), rel=1e-6)


def test_no_rows_gives_no_metrics(output_metrics):
    metric = output_metrics("binary")
    assert metric.compute(metric.zeros()) == {}


def test_metric_set_reduces_every_output_in_one_call_and_weights_the_combined_loss(make_head):
    class Model:  # what MetricSet reads from an ECD
        heads = {"b": make_head("binary", {}), "n": make_head("number", NUMBER_META, loss={"weight": 0.5})}
        loss_weights = {"b": 1.0, "n": 0.5}
        preference = grpo = None

    metrics = MetricSet(Model())
    stats = metrics.zeros()
    metrics.update(stats, {"b": _binary()[0], "n": _number()[0]}, {"b": _binary()[1], "n": _number()[1]})
    calls = []

    def all_reduce_sum(flat):
        calls.append(flat.shape)
        return flat * 3  # as if three workers held the same statistics

    reduced = metrics.reduce(stats, all_reduce_sum)
    assert len(calls) == 1
    for name in stats:
        torch.testing.assert_close(reduced[name], stats[name] * 3)
    result = metrics.compute(reduced)
    # Tripling every statistic leaves the metrics unchanged.
    assert result["b"] == pytest.approx(metrics.compute(stats)["b"])
    assert result["combined"]["loss"] == pytest.approx(result["b"]["loss"] + 0.5 * result["n"]["loss"])
