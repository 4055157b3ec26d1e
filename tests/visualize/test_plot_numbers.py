"""The numbers behind the plots, checked against scikit-learn (or by hand) on the same data:
what a user reads off a curve must be what the standard tools compute."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics
from sklearn.calibration import calibration_curve

from plait.visualize import calibration, confusion, curves, hyperopt, performance, speed, training


@pytest.fixture
def scored():
    """200 rows: a binary truth and scores that agree with it loosely, with many ties."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 200)
    scores = np.round(np.clip(truth * 0.3 + rng.uniform(0, 0.7, 200), 0, 1), 2)
    return truth, scores


def test_roc_points_are_sklearns(scored):
    truth, scores = scored
    fpr, tpr, thresholds = curves.roc_points(truth.astype(bool), scores)
    want_fpr, want_tpr, want_thresholds = metrics.roc_curve(truth, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, want_fpr)
    np.testing.assert_allclose(tpr, want_tpr)
    np.testing.assert_allclose(thresholds[1:], want_thresholds[1:])
    assert curves.area(fpr, tpr) == pytest.approx(metrics.roc_auc_score(truth, scores))


def test_precision_recall_points_are_sklearns(scored):
    truth, scores = scored
    precision, recall, thresholds = curves.precision_recall_points(truth.astype(bool), scores)
    want_precision, want_recall, want_thresholds = metrics.precision_recall_curve(truth, scores)
    np.testing.assert_allclose(precision, want_precision)
    np.testing.assert_allclose(recall, want_recall)
    np.testing.assert_allclose(thresholds, want_thresholds)


def test_calibration_bins_and_brier_are_sklearns(scored):
    truth, scores = scored
    fraction, predicted, rows = calibration.calibration_bins(truth, scores)
    want_fraction, want_predicted = calibration_curve(truth, scores, n_bins=calibration.BINS)
    np.testing.assert_allclose(fraction, want_fraction)
    np.testing.assert_allclose(predicted, want_predicted)
    assert rows.sum() == len(truth)
    assert calibration.brier_score(truth, scores) == pytest.approx(metrics.brier_score_loss(truth, scores))


def test_prediction_scores_are_sklearns_macro_averages():
    rng = np.random.default_rng(1)
    truth, predicted = rng.integers(0, 4, 150), rng.integers(0, 5, 150)  # class 4 is only ever predicted
    scores = performance.prediction_scores(predicted, truth)
    assert scores["accuracy"] == pytest.approx(metrics.accuracy_score(truth, predicted))
    assert scores["precision"] == pytest.approx(metrics.precision_score(truth, predicted, average="macro",
                                                                        zero_division=0))
    assert scores["recall"] == pytest.approx(metrics.recall_score(truth, predicted, average="macro", zero_division=0))
    assert scores["f1"] == pytest.approx(metrics.f1_score(truth, predicted, average="macro", zero_division=0))


def test_ranking_scores_by_hand():
    probabilities = np.array([[0.7, 0.2, 0.1],   # true 0: rank 1
                              [0.5, 0.3, 0.2],   # true 1: rank 2
                              [0.6, 0.3, 0.1],   # true 2: rank 3
                              [0.2, 0.2, 0.6]])  # true -1 (a class the model lacks): no rank
    truth = np.array([0, 1, 2, -1])
    assert performance.ranking_scores(probabilities, truth, k=2) == {
        "accuracy": 0.25, "hits_at_k": 0.5, "mrr": pytest.approx((1 + 1 / 2 + 1 / 3) / 4)}


def test_labels_limit_sums_the_rare_classes_into_one():
    probabilities = np.array([[0.1, 0.2, 0.3, 0.4]])
    limited, truth = performance.limit_labels(probabilities, np.array([3]), 1)
    np.testing.assert_allclose(limited, [[0.1, 0.9]])
    assert truth.tolist() == [1]


def test_confusion_counts_are_sklearns_and_rows_normalize():
    rng = np.random.default_rng(2)
    truth, predicted = rng.integers(0, 3, 90), rng.integers(0, 3, 90)
    counts = confusion.confusion_counts(truth, predicted, 3)
    np.testing.assert_array_equal(counts, metrics.confusion_matrix(truth, predicted, labels=[0, 1, 2]))
    np.testing.assert_allclose(confusion.normalized(counts).sum(axis=1), 1.0)
    np.testing.assert_allclose(confusion.row_entropy(np.array([[5, 0], [1, 1]])), [0.0, np.log(2)])


def test_one_hot_leaves_an_unknown_class_all_zero():
    np.testing.assert_array_equal(calibration.one_hot(np.array([1, -1]), 2), [[0, 1], [0, 0]])


def test_learning_curve_values_keep_nulls_in_place_and_x_follows_the_evaluation_frequency():
    stats = {"training": {}, "validation": {"y": {"loss": [0.9, None, 0.5]}},
             "evaluation_frequency": {"frequency": 0.5, "period": "epoch"}}
    values = training.curve(stats, "validation", "y", "loss")
    assert values[0] == 0.9 and np.isnan(values[1]) and values[2] == 0.5
    xs, period = training.evaluation_axis(stats, 3)
    assert xs.tolist() == [0.5, 1.0, 1.5] and period == "epoch"
    assert training.curve(stats, "training", "y", "loss") is None


def test_speed_keeps_the_evaluations_that_measured_it_with_their_workers():
    stats = {"plait": {"epoch": [1, 1, 2], "rows_per_s": [None, 100.0, 120.0], "data_wait_fraction": [None, 0.1, 0.2],
                       "rows_per_s_per_worker": [None, [50.0, 50.0], [60.0, 60.0]]}}
    measured = speed.speed(stats)
    assert measured["epoch"].tolist() == [1, 2]
    assert measured["rows_per_s"].tolist() == [100.0, 120.0]
    assert measured["rows_per_s_per_worker"].tolist() == [[50.0, 50.0], [60.0, 60.0]]
    assert "data_wait_fraction_per_worker" not in measured  # an older run did not record it


def test_parallel_axes_place_numbers_by_range_logs_by_decade_and_categories_evenly():
    stats = {"hyperopt_config": {"goal": "minimize", "metric": "loss", "parameters": {
        "trainer.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1},
        "trainer.batch_size": {"space": "choice", "categories": [16, 32, 64]}}},
        "hyperopt_results": [{"parameters": {"trainer.learning_rate": 0.001, "trainer.batch_size": 64}, "metric_score": 2.0},
                             {"parameters": {"trainer.learning_rate": 0.01, "trainer.batch_size": 16}, "metric_score": 1.0},
                             {"parameters": {"trainer.learning_rate": 0.1, "trainer.batch_size": 32}, "metric_score": 1.5},
                             {"parameters": {"trainer.learning_rate": 0.1, "trainer.batch_size": 32}, "metric_score": None}]}
    trials = hyperopt.scored_trials(stats)
    assert trials.scores.tolist() == [2.0, 1.0, 1.5]  # the unscored trial is left out
    rate, batch, score = hyperopt.parallel_axes(trials)
    np.testing.assert_allclose(rate.places, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(batch.places, [0.0, 0.5, 1.0])
    assert [text for _, text in batch.ticks] == ["64", "16", "32"]
    np.testing.assert_allclose(score.places, [1.0, 0.0, 0.5])
    assert hyperopt.quantile_bins(np.array([1.0, 2.0, 2.0])) == ["1", "2", "2"]
