"""ROC and precision-recall curves of one class against the rest: worked out from each model's
probabilities and the ground truth (roc_curves, precision_recall_curves), or read from test
statistics (the *_from_test_statistics plots, for binary outputs)."""

from __future__ import annotations

import numpy as np

from plait.errors import UsageError
from plait.visualize.figures import COLORS, Target, figure, label, save
from plait.visualize.inputs import entry, output_names

CURVE_FIX = ("plait writes it for binary outputs; for a category output use roc_curves or precision_recall_curves "
             "with --probabilities and --ground_truth")


# ---- numbers ---------------------------------------------------------------------------------------

def _counts(truth: np.ndarray, scores: np.ndarray):
    """(thresholds high to low, true positives and false positives at or above each)."""
    order = np.argsort(-scores, kind="mergesort")
    scores, truth = scores[order], truth[order].astype(np.int64)
    last = np.r_[np.flatnonzero(np.diff(scores)), len(scores) - 1]  # the last row of each distinct score
    tps = np.cumsum(truth)[last]
    return scores[last], tps, (last + 1) - tps


def roc_points(truth: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(false positive rates, true positive rates, thresholds) at every distinct score, from
    (0, 0) at an infinite threshold: scikit-learn's roc_curve(drop_intermediate=False)."""
    thresholds, tps, fps = _counts(truth, scores)
    positives, negatives = tps[-1], fps[-1]
    tpr = np.r_[0.0, tps / positives] if positives else np.full(len(tps) + 1, np.nan)
    fpr = np.r_[0.0, fps / negatives] if negatives else np.full(len(fps) + 1, np.nan)
    return fpr, tpr, np.r_[np.inf, thresholds]


def precision_recall_points(truth: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precisions, recalls, thresholds) as scikit-learn's precision_recall_curve gives them:
    at each distinct score, thresholds rising, then (1, 0) appended."""
    thresholds, tps, fps = _counts(truth, scores)
    precision = tps / np.maximum(tps + fps, 1)
    recall = tps / tps[-1] if tps[-1] else np.ones_like(tps, dtype=np.float64)
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], thresholds[::-1]


def area(xs: np.ndarray, ys: np.ndarray) -> float:
    """The area under a curve by the trapezoid rule, whichever way x runs."""
    xs, ys = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    return float(abs(np.sum(np.diff(xs) * (ys[1:] + ys[:-1]) / 2)))


def positive_class(labels: list[str], positive_label) -> int:
    """The class one-vs-rest curves are drawn for: a binary output's True; else --positive_label,
    a class index (Ludwig's default 1) or a class name."""
    if labels == ["False", "True"]:
        return 1
    if str(positive_label) in labels and not str(positive_label).lstrip("-").isdigit():
        return labels.index(str(positive_label))
    try:
        index = int(positive_label)
    except (TypeError, ValueError):
        index = -1
    if not 0 <= index < len(labels):
        raise UsageError(f"--positive_label {positive_label!r}: give a class index from 0 to {len(labels) - 1} or a "
                         f"class name ({', '.join(labels[:10])}{', ...' if len(labels) > 10 else ''})")
    return index


# ---- figures ---------------------------------------------------------------------------------------

def roc_curves(probabilities: list[np.ndarray], ground_truth: np.ndarray, labels: list[str], *, target: Target,
               positive_label=1, model_names: list[str] | None = None) -> list[str]:
    """The ROC curve of each model for the positive class."""
    positive = positive_class(labels, positive_label)
    truth = ground_truth == positive
    curves = [roc_points(truth, probs[:, positive])[:2] for probs in probabilities]
    fig = draw_roc(curves, model_names, f"ROC curves: {labels[positive]} against the rest")
    return [save(fig, target, "roc_curves")]


def roc_curves_from_test_statistics(test_statistics: list[dict], *, target: Target,
                                    output_feature_name: str | None = None,
                                    model_names: list[str] | None = None) -> list[str]:
    written = []
    for output in _outputs_with(test_statistics, output_feature_name, "roc_curve"):
        curves = []
        for i, stats in enumerate(test_statistics):
            curve = entry(stats, i, output, "roc_curve", CURVE_FIX)
            curves.append((np.asarray(curve["false_positive_rate"]), np.asarray(curve["true_positive_rate"])))
        fig = draw_roc(curves, model_names, f"ROC curves: {output}")
        written.append(save(fig, target, f"roc_curves_from_prediction_statistics_{output}"))
    return written


def precision_recall_curves(probabilities: list[np.ndarray], ground_truth: np.ndarray, labels: list[str], *,
                            target: Target, positive_label=1, model_names: list[str] | None = None) -> list[str]:
    positive = positive_class(labels, positive_label)
    truth = ground_truth == positive
    curves = [precision_recall_points(truth, probs[:, positive])[:2] for probs in probabilities]
    fig = draw_precision_recall(curves, model_names, f"Precision-recall: {labels[positive]} against the rest")
    return [save(fig, target, "precision_recall_curves")]


def precision_recall_curves_from_test_statistics(test_statistics: list[dict], *, target: Target,
                                                 output_feature_name: str | None = None,
                                                 model_names: list[str] | None = None) -> list[str]:
    written = []
    for output in _outputs_with(test_statistics, output_feature_name, "precision_recall_curve"):
        curves = []
        for i, stats in enumerate(test_statistics):
            curve = entry(stats, i, output, "precision_recall_curve", CURVE_FIX)
            curves.append((np.asarray(curve["precisions"]), np.asarray(curve["recalls"])))
        fig = draw_precision_recall(curves, model_names, f"Precision-recall: {output}")
        written.append(save(fig, target, f"precision_recall_curves_from_prediction_statistics_{output}"))
    return written


def _outputs_with(test_statistics: list[dict], wanted: str | None, key: str) -> list[str]:
    """The outputs to draw: ``wanted``, else those whose statistics have the curve (the first
    output when none has, so that the error names it)."""
    outputs = output_names(test_statistics, wanted, "--test_statistics")
    if wanted is not None:
        return outputs
    return [o for o in outputs if key in test_statistics[0][o]] or outputs[:1]


def draw_roc(curves: list[tuple[np.ndarray, np.ndarray]], model_names, title: str, ax=None):
    fig = None
    if ax is None:
        fig, ax = figure(6.0, 5.5)
    ax.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1)
    for i, (fpr, tpr) in enumerate(curves):
        ax.plot(fpr, tpr, color=COLORS[i % len(COLORS)], linewidth=2,
                label=f"{label(model_names, i)} (AUC {area(fpr, tpr):.3f})")
    _unit_square(ax, "false positive rate", "true positive rate", title)
    ax.legend(loc="lower right")
    return fig


def draw_precision_recall(curves: list[tuple[np.ndarray, np.ndarray]], model_names, title: str, ax=None):
    fig = None
    if ax is None:
        fig, ax = figure(6.0, 5.5)
    for i, (precision, recall) in enumerate(curves):
        ax.plot(recall, precision, color=COLORS[i % len(COLORS)], linewidth=2, drawstyle="steps-post",
                label=f"{label(model_names, i)} (area {area(recall, precision):.3f})")
    _unit_square(ax, "recall", "precision", title)
    ax.legend(loc="lower left")
    return fig


def _unit_square(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.4)
