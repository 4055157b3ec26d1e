"""confusion_matrix: the test statistics' confusion matrix of each classifier output (rows: the
true class, columns: the predicted one), and its rows ranked by entropy."""

from __future__ import annotations

import numpy as np

from plait.visualize.figures import Target, figure, label, save
from plait.visualize.inputs import entry, output_names

CONFUSION_FIX = ("it is written for category and binary outputs by plait experiment and plait evaluate; run them "
                 "again with this plait, or choose the output with --output_feature_name")


def confusion_counts(truth: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """The confusion matrix of class indices: [true class, predicted class] -> rows (a row
    whose class is outside 0..classes-1 is left out)."""
    keep = (truth >= 0) & (truth < classes) & (predicted >= 0) & (predicted < classes)
    counts = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(counts, (truth[keep], predicted[keep]), 1)
    return counts


def normalized(matrix: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (a row with none stays 0)."""
    sums = matrix.sum(axis=1, keepdims=True).astype(np.float64)
    return np.divide(matrix, sums, out=np.zeros(matrix.shape, dtype=np.float64), where=sums > 0)


def row_entropy(matrix: np.ndarray) -> np.ndarray:
    """The entropy (nats) of each row's distribution over predicted classes: 0 when a class is
    always predicted as one class, high when its rows scatter."""
    p = normalized(matrix)
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=1)


def labels_for(metadata: dict | None, output: str, size: int) -> list[str]:
    """The class names of ``output`` (its vocabulary, False/True for a binary), else 0..size-1."""
    feature = ((metadata or {}).get("features") or {}).get(output) or {}
    if feature.get("type") == "binary" and size == 2:
        return ["False", "True"]
    vocabulary = [str(v) for v in feature.get("vocabulary") or []]
    return vocabulary[:size] if len(vocabulary) >= size else [str(i) for i in range(size)]


def confusion_matrix(test_statistics: list[dict], metadata: dict | None = None, *, target: Target,
                     output_feature_name: str | None = None, top_n_classes: list[int] | None = None,
                     normalize: bool = False, model_names: list[str] | None = None) -> list[str]:
    """Per model, output with a confusion matrix, and --top_n_classes k: the heatmap of the
    first k classes and the bar chart of their rows' entropy."""
    written = []
    for i, stats in enumerate(test_statistics):
        model = label(model_names, i, "") if len(test_statistics) > 1 or model_names else ""
        outputs = output_names([stats], output_feature_name, "--test_statistics")
        with_matrix = [o for o in outputs if "confusion_matrix" in stats[o]] if output_feature_name is None else outputs
        for output in with_matrix or outputs[:1]:  # none has one: the error names the first
            matrix = np.asarray(entry(stats, i, output, "confusion_matrix", CONFUSION_FIX), dtype=np.float64)
            labels = labels_for(metadata, output, len(matrix))
            for k in top_n_classes or [0]:
                k = min(k, len(matrix)) if k > 0 else len(matrix)
                shown = normalized(matrix[:k, :k]) if normalize else matrix[:k, :k]
                fig = draw_matrix(shown, labels[:k], f"{model} confusion matrix: {output}".strip(), normalize)
                written.append(save(fig, target, f"confusion_matrix_{model}_{output}_top{k}"))
                fig = draw_entropy(row_entropy(matrix[:k, :k]), labels[:k])
                written.append(save(fig, target, f"confusion_matrix_entropy_{model}_{output}_top{k}"))
    return written


def draw_matrix(matrix: np.ndarray, labels: list[str], title: str, normalize: bool = False, ax=None):
    """A heatmap with each cell's value written in it (when there are few enough cells)."""
    size = len(labels)
    fig = None
    if ax is None:
        side = min(12.0, max(4.5, 0.5 * size + 2.5))
        fig, ax = figure(side + 1.0, side)
    image = ax.imshow(matrix, cmap="Blues", vmin=0, vmax=1 if normalize else None)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ticks = np.arange(size)
    ax.set_xticks(ticks, labels, rotation=45 if size > 3 else 0, ha="right" if size > 3 else "center",
                  fontsize="small" if size > 10 else None)
    ax.set_yticks(ticks, labels, fontsize="small" if size > 10 else None)
    ax.set_xlabel("predicted")
    ax.set_ylabel("actual")
    ax.set_title(title)
    if size <= 20:
        top = np.nanmax(matrix) if matrix.size else 0
        for r in range(size):
            for c in range(size):
                value = matrix[r, c]
                text = f"{value:.2f}" if normalize else f"{value:.0f}"
                ax.text(c, r, text, ha="center", va="center", fontsize="small" if size > 8 else None,
                        color="white" if top and value > 0.6 * top else "black")
    return fig


def draw_entropy(entropy: np.ndarray, labels: list[str]):
    order = np.argsort(-entropy, kind="stable")
    fig, ax = figure(max(6.0, 0.4 * len(labels) + 2), 4.0)
    ax.bar(np.arange(len(order)), entropy[order], color="#1f77b4")
    ax.set_xticks(np.arange(len(order)), [labels[i] for i in order], rotation=45 if len(labels) > 6 else 0,
                  ha="right" if len(labels) > 6 else "center")
    ax.set_ylabel("entropy of the row (nats)")
    ax.set_title("Classes ranked by the entropy of their confusion-matrix row")
    ax.grid(axis="y", alpha=0.4)
    return fig
