"""Ludwig's dataset-level test statistics from mergeable counts: the same numbers scikit-learn
(which Ludwig calls) gives on the predictions themselves."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics

from plait.evaluation.metrics import AUC_BINS
from plait.evaluation.overall import binary_curves, confusion_statistics


def test_confusion_statistics_are_scikit_learns_on_the_predictions():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, 500)
    predicted = np.where(rng.random(500) < 0.7, truth, rng.integers(0, 4, 500))
    predicted[predicted == 3] = 2  # class 3 is never predicted: its precision is 0, as sklearn's
    cm = metrics.confusion_matrix(truth, predicted, labels=range(4))
    stats = confusion_statistics(cm, ["a", "b", "c", "d"])
    assert stats["confusion_matrix"] == cm.tolist()
    overall = stats["overall_stats"]
    with np.errstate(all="ignore"):
        for name, score in (("precision", metrics.precision_score), ("recall", metrics.recall_score),
                            ("f1_score", metrics.f1_score)):
            for average in ("macro", "micro", "weighted"):
                want = score(truth, predicted, average=average, zero_division=0)
                assert overall[f"avg_{name}_{average}"] == pytest.approx(want, abs=1e-12), (name, average)
    assert overall["kappa_score"] == pytest.approx(metrics.cohen_kappa_score(truth, predicted), abs=1e-12)
    assert overall["token_accuracy"] == pytest.approx(metrics.accuracy_score(truth, predicted))
    per_class = stats["per_class_stats"]
    assert list(per_class) == ["a", "b", "c", "d"]
    b = per_class["b"]
    assert b["true_positives"] + b["false_negatives"] == int((truth == 1).sum())
    assert b["f1_score"] == pytest.approx(metrics.f1_score(truth == 1, predicted == 1))
    assert b["matthews_correlation_coefficient"] == pytest.approx(metrics.matthews_corrcoef(truth == 1, predicted == 1))
    assert per_class["d"]["precision"] == 0.0


def test_binary_curves_from_histograms_are_scikit_learns_at_the_bins_edges():
    """Scores on bin centres: each bin holds one distinct score, so the histogram's thresholds
    are every score sklearn's curves have."""
    rng = np.random.default_rng(1)
    truth = rng.random(2000) < 0.3
    bins = np.clip((rng.beta(2, 5, 2000) + 0.25 * truth) * AUC_BINS, 0, AUC_BINS - 1).astype(int)
    scores = (bins + 0.5) / AUC_BINS
    curves = binary_curves(np.bincount(bins[truth], minlength=AUC_BINS), np.bincount(bins[~truth], minlength=AUC_BINS))
    fpr, tpr, _ = metrics.roc_curve(truth, scores, drop_intermediate=False)
    assert curves["roc_curve"]["false_positive_rate"] == pytest.approx(fpr.tolist())
    assert curves["roc_curve"]["true_positive_rate"] == pytest.approx(tpr.tolist())
    precision, recall, _ = metrics.precision_recall_curve(truth, scores, drop_intermediate=False)
    assert curves["precision_recall_curve"]["precisions"] == pytest.approx(precision.tolist())
    assert curves["precision_recall_curve"]["recalls"] == pytest.approx(recall.tolist())
    assert curves["average_precision_macro"] == pytest.approx(metrics.average_precision_score(truth, scores))
