"""Comparing models' performance: from their test statistics (compare_performance,
compare_classifiers_multiclass_multimetric, frequency_vs_f1), or worked out again from their
probabilities or predictions against the ground truth (compare_classifiers_performance_from_prob,
_from_pred)."""

from __future__ import annotations

import numpy as np

from plait.visualize.figures import COLORS, Target, figure, label, no_data, save
from plait.visualize.inputs import class_frequencies, class_labels, entry, output_names

NOT_METRICS = {"overall_stats", "confusion_matrix", "per_class_stats", "predictions", "probabilities", "roc_curve",
               "precision_recall_curve", "loss"}
"""Entries of an output's test statistics that are not one number to compare (Ludwig leaves the
loss out too: it is on another scale than the rest)."""

PER_CLASS_FIX = ("run plait evaluate (or plait experiment) again with this plait, which writes per-class statistics "
                 "for category and binary outputs")


# ---- numbers ---------------------------------------------------------------------------------------

def scalar_metrics(stats_list: list[dict], output: str) -> dict[str, list[float]]:
    """{metric: [value per model]} for the metrics every model has for ``output``."""
    names = [name for name, value in stats_list[0][output].items()
             if name not in NOT_METRICS and isinstance(value, (int, float)) and not isinstance(value, bool)]
    return {name: [float(stats[output][name]) for stats in stats_list] for name in names
            if all(isinstance(stats[output].get(name), (int, float)) for stats in stats_list)}


def limit_labels(probabilities: np.ndarray | None, truth: np.ndarray, limit: int):
    """Ludwig's --labels_limit: classes from index ``limit`` on become one class, ``limit``
    (their probabilities summed), so that rare classes do not crowd a plot."""
    if limit <= 0:
        return probabilities, truth
    truth = np.where(truth > limit, limit, truth)
    if probabilities is not None and probabilities.shape[1] > limit + 1:
        kept = probabilities[:, :limit + 1].copy()
        kept[:, limit] = probabilities[:, limit:].sum(axis=1)
        probabilities = kept
    return probabilities, truth


def ranking_scores(probabilities: np.ndarray, truth: np.ndarray, k: int) -> dict[str, float]:
    """accuracy (the most probable class is the true one), hits_at_k (it is among the k most
    probable) and mrr (the mean of 1 / the true class's rank; 0 for a class the model lacks)."""
    order = np.argsort(-probabilities, axis=1, kind="stable")
    ranks = np.argmax(order == truth[:, None], axis=1) + 1
    known = (truth >= 0) & (truth < probabilities.shape[1])
    return {"accuracy": float(np.mean(known & (ranks == 1))),
            "hits_at_k": float(np.mean(known & (ranks <= k))),
            "mrr": float(np.mean(np.where(known, 1.0 / ranks, 0.0)))}


def prediction_scores(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """accuracy and the macro precision, recall and F1 over the classes that occur in the truth
    or the predictions (as scikit-learn's average="macro" computes them)."""
    classes = np.union1d(truth, predicted)
    precision, recall, f1 = [], [], []
    for c in classes:
        hits = np.sum((predicted == c) & (truth == c))
        p = hits / max(np.sum(predicted == c), 1)
        r = hits / max(np.sum(truth == c), 1)
        precision.append(p)
        recall.append(r)
        f1.append(2 * p * r / (p + r) if p + r else 0.0)
    return {"accuracy": float(np.mean(predicted == truth)), "precision": float(np.mean(precision)),
            "recall": float(np.mean(recall)), "f1": float(np.mean(f1))}


def per_class(stats: dict, index: int, output: str, labels: list[str]) -> dict[str, np.ndarray]:
    """precision, recall and f1 of each class in class order (NaN for a class the statistics
    do not list)."""
    classes = entry(stats, index, output, "per_class_stats", PER_CLASS_FIX)
    values = {name: np.full(len(labels), np.nan) for name in ("precision", "recall", "f1_score")}
    for i, name in enumerate(labels):
        for metric in values:
            value = (classes.get(name) or {}).get(metric)
            values[metric][i] = np.nan if value is None else float(value)
    return values


# ---- figures ---------------------------------------------------------------------------------------

def bars(ax, groups: list[str], series: dict[str, list[float]], decimals: int = 3) -> None:
    """Grouped bars: a group per entry of ``groups``, a bar per series, its value on top."""
    width = 0.8 / max(len(series), 1)
    xs = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        drawn = ax.bar(xs + (i - (len(series) - 1) / 2) * width, np.nan_to_num(values), width,
                       label=name, color=COLORS[i % len(COLORS)])
        if len(groups) * len(series) <= 24:
            ax.bar_label(drawn, fmt=f"%.{decimals}f", fontsize="x-small", padding=2)
    ax.set_xticks(xs, groups, rotation=30 if max((len(g) for g in groups), default=0) > 8 else 0, ha="right"
                  if max((len(g) for g in groups), default=0) > 8 else "center")
    ax.grid(axis="y", alpha=0.4)
    if len(series) > 1:
        ax.legend(fontsize="small")


def _models(count: int, model_names: list[str] | None) -> list[str]:
    return [label(model_names, i) for i in range(count)]


def compare_performance(test_statistics: list[dict], *, target: Target, output_feature_name: str | None = None,
                        model_names: list[str] | None = None) -> list[str]:
    """One figure per output: a bar per model for each metric in its test statistics."""
    written = []
    for output in output_names(test_statistics, output_feature_name, "--test_statistics"):
        metrics = scalar_metrics(test_statistics, output)
        fig, ax = figure(max(6.0, 1.1 * len(metrics) * max(1, len(test_statistics)) ** 0.5 + 2), 4.5)
        if metrics:
            by_model = {name: [metrics[m][i] for m in metrics] for i, name in
                        enumerate(_models(len(test_statistics), model_names))}
            bars(ax, list(metrics), by_model)
        else:
            no_data(ax, f"no metrics for {output}")
        ax.set_title(f"Performance comparison on {output}")
        written.append(save(fig, target, f"compare_performance_{output}"))
    return written


def compare_classifiers_performance_from_prob(probabilities: list[np.ndarray], ground_truth: np.ndarray, *,
                                              target: Target, top_n_classes: list[int] | None = None,
                                              labels_limit: int = 0, model_names: list[str] | None = None) -> list[str]:
    """accuracy, hits_at_k (k: the first --top_n_classes, Ludwig's default 3) and MRR of each
    model, worked out from its probabilities."""
    k = (top_n_classes or [3])[0] or 3
    scores = []
    for probs in probabilities:
        probs, truth = limit_labels(probs, ground_truth, labels_limit)
        scores.append(ranking_scores(probs, truth, k))
    return [_score_bars(scores, model_names, target, "compare_classifiers_performance_from_prob")]


def compare_classifiers_performance_from_pred(predictions: list[np.ndarray], ground_truth: np.ndarray, *,
                                              target: Target, labels_limit: int = 0,
                                              model_names: list[str] | None = None) -> list[str]:
    """accuracy and macro precision, recall and F1 of each model, from its predicted classes."""
    scores = []
    for predicted in predictions:
        _, truth = limit_labels(None, ground_truth, labels_limit)
        _, predicted = limit_labels(None, predicted, labels_limit)
        scores.append(prediction_scores(predicted, truth))
    return [_score_bars(scores, model_names, target, "compare_classifiers_performance_from_pred")]


def _score_bars(scores: list[dict[str, float]], model_names, target: Target, name: str) -> str:
    fig, ax = figure(7.0, 4.5)
    metrics = list(scores[0])
    bars(ax, metrics, {model: [s[m] for m in metrics] for model, s in zip(_models(len(scores), model_names), scores)})
    ax.set_ylim(0, 1.1)
    ax.set_title(name.replace("_", " "))
    return save(fig, target, name)


def compare_classifiers_multiclass_multimetric(test_statistics: list[dict], metadata: dict, *, target: Target,
                                               output_feature_name: str | None = None,
                                               top_n_classes: list[int] | None = None,
                                               model_names: list[str] | None = None) -> list[str]:
    """Per model and output: precision, recall and F1 of the first k classes, of the k with the
    best and the worst F1, and of every class sorted by F1."""
    written = []
    for i, stats in enumerate(test_statistics):
        model = label(model_names, i, "") if len(test_statistics) > 1 or model_names else ""
        for output in output_names([stats], output_feature_name, "--test_statistics"):
            labels = class_labels(metadata, output)
            values = per_class(stats, i, output, labels)
            f1 = np.nan_to_num(values["f1_score"])
            by_f1 = np.argsort(-f1, kind="stable")
            for k in top_n_classes or [0]:
                k = min(k, len(labels)) if k > 0 else len(labels)
                for part, rows in ((f"top{k}", np.arange(k)), (f"best{k}", by_f1[:k]), (f"worst{k}", by_f1[::-1][:k]),
                                   ("sorted", by_f1)):
                    fig, ax = figure(max(6.0, 0.45 * len(rows) + 2), 4.5)
                    bars(ax, [labels[r] for r in rows], {m.replace("_", " "): values[m][rows] for m in values})
                    ax.set_ylim(0, 1.1)
                    ax.set_title(f"{model} precision, recall and F1 of {output}: {part}".strip())
                    written.append(save(fig, target, f"compare_classifiers_multiclass_multimetric_{model}_{output}_{part}"))
    return written


def frequency_vs_f1(test_statistics: list[dict], metadata: dict, *, target: Target,
                    output_feature_name: str | None = None, top_n_classes: list[int] | None = None,
                    model_names: list[str] | None = None) -> list[str]:
    """Per model and output, each class's F1 beside its frequency in the training data: sorted
    by F1 (above) and by frequency (below)."""
    written = []
    for i, stats in enumerate(test_statistics):
        model = label(model_names, i, "") if len(test_statistics) > 1 or model_names else ""
        for output in output_names([stats], output_feature_name, "--test_statistics"):
            labels = class_labels(metadata, output)
            frequency = class_frequencies(metadata, output)
            f1 = np.nan_to_num(per_class(stats, i, output, labels)["f1_score"])
            k = (top_n_classes or [0])[0]
            if k > 0:
                labels, frequency, f1 = labels[:k], frequency[:k], f1[:k]
            fig = _draw_frequency_vs_f1(labels, frequency, f1, f"{model} F1 vs frequency: {output}".strip())
            written.append(save(fig, target, f"frequency_vs_f1_{model}_{output}"))
    return written


def _draw_frequency_vs_f1(labels: list[str], frequency: np.ndarray, f1: np.ndarray, title: str):
    fig, axes = figure(max(7.0, 0.35 * len(labels) + 3), 7.0, rows=2)
    fig.suptitle(title)
    for ax, order, first in ((axes[0], np.argsort(-f1, kind="stable"), "F1"),
                             (axes[1], np.argsort(-frequency, kind="stable"), "frequency")):
        xs = np.arange(len(order))
        ax.plot(xs, f1[order], color=COLORS[0], marker="o", label="F1")
        ax.set_ylabel("F1", color=COLORS[0])
        ax.set_ylim(0, 1.05)
        twin = ax.twinx()
        twin.plot(xs, frequency[order], color=COLORS[1], marker="s", label="frequency")
        twin.set_ylabel("training frequency", color=COLORS[1])
        twin.set_ylim(bottom=0)
        ax.set_xticks(xs, [labels[j] for j in order], rotation=45 if len(labels) > 6 else 0,
                      ha="right" if len(labels) > 6 else "center", fontsize="small")
        ax.set_title(f"sorted by {first}", fontsize="medium")
        ax.grid(alpha=0.4)
    return fig
