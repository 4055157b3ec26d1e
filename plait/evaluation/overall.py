"""Ludwig's dataset-level entries of ``test_statistics.json``, from mergeable statistics.

Ludwig computes them from every prediction at once (``calculate_overall_stats`` of its category
and binary features, with ``ludwig/utils/eval_utils.py``'s ``ConfusionMatrix``). plait computes
them from statistics that add up over shards and workers, so a Ray Data job and a local run
write the same numbers:

* ``confusion_matrix`` (rows: the true class, columns: the predicted one, in the vocabulary's
  order), ``overall_stats`` and ``per_class_stats``: from the confusion matrix's counts, exactly;
* a binary output's ``roc_curve`` and ``precision_recall_curve``: from its score histograms, one
  point per occupied bin (``AUC_BINS`` bins of width 1/4096). Scores within one bin count as one
  threshold, so the curves are exact at the bins' edges, which is where plait's ``roc_auc``
  is computed as well.

One departure: Ludwig's ``avg_precision_weighted`` and ``avg_recall_weighted`` are micro
averages (its code passes ``average="micro"``); here they are the support-weighted averages their
names say (with a single-label output, the micro averages equal ``token_accuracy``, also given).
"""

from __future__ import annotations

import numpy as np


def confusion_statistics(cm: np.ndarray, labels: list[str]) -> dict:
    """``confusion_matrix``, ``overall_stats`` and ``per_class_stats`` of a confusion matrix of
    counts (true class by predicted class)."""
    cm = np.asarray(cm, dtype=np.float64)
    return {"confusion_matrix": cm.astype(np.int64).tolist(), "overall_stats": _overall_stats(cm),
            "per_class_stats": {str(label): _class_stats(cm, i) for i, label in enumerate(labels)}}


def _safe(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else 0.0


def _counts(cm: np.ndarray, i: int) -> tuple[float, float, float, float]:
    """(tp, tn, fp, fn) of class ``i``."""
    tp = cm[i, i]
    fp, fn = cm[:, i].sum() - tp, cm[i, :].sum() - tp
    return tp, cm.sum() - tp - fp - fn, fp, fn


def _class_stats(cm: np.ndarray, i: int) -> dict:
    tp, tn, fp, fn = _counts(cm, i)
    tpr, tnr = _safe(tp, tp + fn), _safe(tn, tn + fp)
    ppv, npv = _safe(tp, tp + fp), _safe(tn, tn + fn)
    mcc_den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return {
        "true_positives": int(tp), "true_negatives": int(tn), "false_positives": int(fp), "false_negatives": int(fn),
        "true_positive_rate": tpr, "true_negative_rate": tnr, "positive_predictive_value": ppv,
        "negative_predictive_value": npv, "false_negative_rate": 1.0 - tpr, "false_positive_rate": 1.0 - tnr,
        "false_discovery_rate": 1.0 - ppv, "false_omission_rate": 1.0 - npv,
        "accuracy": _safe(tp + tn, cm.sum()), "precision": ppv, "recall": tpr, "f1_score": _safe(2 * ppv * tpr, ppv + tpr),
        "sensitivity": tpr, "specificity": tnr, "hit_rate": tpr, "miss_rate": 1.0 - tpr, "fall_out": 1.0 - tnr,
        "matthews_correlation_coefficient": _safe(tp * tn - fp * fn, mcc_den),
        "informedness": tpr + tnr - 1.0, "markedness": ppv + npv - 1.0,
    }


def _overall_stats(cm: np.ndarray) -> dict:
    """Averages over the classes present in the targets or the predictions (as scikit-learn's,
    which Ludwig calls without a label list), and Cohen's kappa."""
    total, support, predicted = cm.sum(), cm.sum(1), cm.sum(0)
    present = (support + predicted) > 0
    tp = np.diag(cm)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(tp), where=(precision + recall) > 0)
    accuracy = _safe(tp.sum(), total)
    weights = support[present] / support.sum() if support.sum() else np.zeros(present.sum())
    expected = _safe((support * predicted).sum(), total * total)
    stats = {"token_accuracy": accuracy}
    for name, values in (("precision", precision), ("recall", recall), ("f1_score", f1)):
        stats[f"avg_{name}_macro"] = float(values[present].mean()) if present.any() else 0.0
        stats[f"avg_{name}_micro"] = accuracy
        stats[f"avg_{name}_weighted"] = float((values[present] * weights).sum())
    stats["kappa_score"] = _safe(accuracy - expected, 1.0 - expected)
    return stats


def binary_curves(hist_pos: np.ndarray, hist_neg: np.ndarray) -> dict:
    """ROC and precision-recall curves of a binary output from its score histograms, in the
    order scikit-learn gives them (Ludwig's ``roc_curve`` and ``precision_recall_curve``), and
    the average precision."""
    pos, neg = np.asarray(hist_pos, np.float64), np.asarray(hist_neg, np.float64)
    occupied = np.nonzero(pos + neg)[0][::-1]  # thresholds from the highest score down
    tp, fp = np.cumsum(pos[occupied]), np.cumsum(neg[occupied])
    positives, negatives = pos.sum(), neg.sum()
    fpr = np.concatenate([[0.0], fp / negatives if negatives else np.zeros_like(fp)])
    tpr = np.concatenate([[0.0], tp / positives if positives else np.zeros_like(tp)])
    precision = np.divide(tp, tp + fp, out=np.ones_like(tp), where=(tp + fp) > 0)
    recall = tp / positives if positives else np.zeros_like(tp)
    average_precision = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))
    # scikit-learn's order: thresholds rising, so recall falls, ending at (precision 1, recall 0).
    return {"roc_curve": {"false_positive_rate": fpr.tolist(), "true_positive_rate": tpr.tolist()},
            "precision_recall_curve": {"precisions": np.concatenate([precision[::-1], [1.0]]).tolist(),
                                       "recalls": np.concatenate([recall[::-1], [0.0]]).tolist()},
            "average_precision_macro": average_precision, "average_precision_micro": average_precision,
            "average_precision_samples": average_precision}
