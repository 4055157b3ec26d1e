"""Calibration: whether a predicted probability of p comes true a fraction p of the time.

calibration_1_vs_all draws each class against the rest, with the distribution of its predicted
probabilities and every class's Brier score; calibration_multiclass pools every class's
probability of every row into one curve.
"""

from __future__ import annotations

import numpy as np

from plait.visualize.figures import COLORS, Target, figure, label, save
from plait.visualize.performance import bars, limit_labels

BINS = 21
"""Ludwig's number of equal-width probability bins."""


# ---- numbers ---------------------------------------------------------------------------------------

def calibration_bins(truth: np.ndarray, probability: np.ndarray, bins: int = BINS):
    """(fraction of positives, mean predicted probability, rows) of each non-empty bin of equal
    width over [0, 1], as scikit-learn's calibration_curve(strategy="uniform") bins them."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.searchsorted(edges[1:-1], probability)
    rows = np.bincount(which, minlength=bins)
    positives = np.bincount(which, weights=truth.astype(np.float64), minlength=bins)
    predicted = np.bincount(which, weights=probability, minlength=bins)
    kept = rows > 0
    return positives[kept] / rows[kept], predicted[kept] / rows[kept], rows[kept]


def brier_score(truth: np.ndarray, probability: np.ndarray) -> float:
    """The mean squared difference between the probability and what happened (0 or 1)."""
    return float(np.mean((probability - truth.astype(np.float64)) ** 2))


def one_hot(truth: np.ndarray, classes: int) -> np.ndarray:
    """rows x classes, 1 at each row's class (a row whose class the model lacks: all 0)."""
    encoded = np.zeros((len(truth), classes))
    known = (truth >= 0) & (truth < classes)
    encoded[np.flatnonzero(known), truth[known]] = 1.0
    return encoded


# ---- figures ---------------------------------------------------------------------------------------

def calibration_1_vs_all(probabilities: list[np.ndarray], ground_truth: np.ndarray, labels: list[str], *,
                         target: Target, top_n_classes: list[int] | None = None, labels_limit: int = 0,
                         model_names: list[str] | None = None) -> list[str]:
    """For each of the first --top_n_classes classes: its calibration curve and the distribution
    of its predicted probabilities, per model; then every class's Brier score."""
    limited = [limit_labels(probs, ground_truth, labels_limit) for probs in probabilities]
    truth = limited[0][1]
    classes = limited[0][0].shape[1]
    names = labels[:classes - 1] + ["rare"] if classes < len(labels) else labels
    k = (top_n_classes or [0])[0]
    shown = min(k, classes) if k > 0 else classes
    written, briers = [], np.zeros((shown, len(limited)))
    for c in range(shown):
        positives = truth == c
        curves = [calibration_bins(positives, probs[:, c])[:2] for probs, _ in limited]
        briers[c] = [brier_score(positives, probs[:, c]) for probs, _ in limited]
        fig, ax = figure(6.0, 5.5)
        draw_calibration(ax, curves, model_names, f"Calibration: {names[c]} against the rest")
        written.append(save(fig, target, f"calibration_1_vs_all_{c}"))
        fig, ax = figure(6.0, 4.0)
        draw_distribution(ax, [probs[:, c] for probs, _ in limited], model_names, names[c])
        written.append(save(fig, target, f"calibration_1_vs_all_prediction_distribution_{c}"))
    fig, ax = figure(max(6.0, 0.5 * shown * len(limited) + 2), 4.5)
    bars(ax, names[:shown], {label(model_names, m): briers[:, m] for m in range(len(limited))}, decimals=3)
    ax.set_ylabel("Brier score (lower is better)")
    ax.set_title("Brier score of each class")
    written.append(save(fig, target, "calibration_1_vs_all_brier"))
    return written


def calibration_multiclass(probabilities: list[np.ndarray], ground_truth: np.ndarray, *, target: Target,
                           labels_limit: int = 0, model_names: list[str] | None = None) -> list[str]:
    """Every probability of every row against whether that row is of that class, as one
    calibration curve per model; and each model's Brier score of them all."""
    curves, briers = [], []
    for probs in probabilities:
        probs, truth = limit_labels(probs, ground_truth, labels_limit)
        happened = one_hot(truth, probs.shape[1]).ravel()
        curves.append(calibration_bins(happened, probs.ravel())[:2])
        briers.append(brier_score(happened, probs.ravel()))
    fig, ax = figure(6.0, 5.5)
    draw_calibration(ax, curves, model_names, "Calibration of every class's probability")
    written = [save(fig, target, "calibration_multiclass")]
    fig, ax = figure(6.0, 4.0)
    bars(ax, ["brier"], {label(model_names, m): [b] for m, b in enumerate(briers)}, decimals=4)
    ax.set_title("Brier score (lower is better)")
    written.append(save(fig, target, "calibration_multiclass_brier"))
    return written


def draw_calibration(ax, curves: list[tuple[np.ndarray, np.ndarray]], model_names, title: str) -> None:
    ax.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1, label="perfectly calibrated")
    for i, (fraction, predicted) in enumerate(curves):
        ax.plot(predicted, fraction, color=COLORS[i % len(COLORS)], marker="o", linewidth=2,
                label=label(model_names, i))
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("fraction of positives")
    ax.set_title(title)
    ax.grid(alpha=0.4)
    ax.legend(loc="upper left", fontsize="small")


def draw_distribution(ax, probabilities: list[np.ndarray], model_names, class_name: str) -> None:
    edges = np.linspace(0.0, 1.0, BINS + 1)
    for i, probs in enumerate(probabilities):
        ax.hist(probs, bins=edges, histtype="step", linewidth=2, color=COLORS[i % len(COLORS)],
                label=label(model_names, i))
    ax.set_xlabel(f"predicted probability of {class_name}")
    ax.set_ylabel("rows")
    ax.set_title(f"Distribution of the predicted probability of {class_name}")
    ax.grid(alpha=0.4)
    ax.legend(fontsize="small")
