"""learning_curves: each metric over the evaluations of training, one line per split and model."""

from __future__ import annotations

import numpy as np

from plait.errors import UsageError
from plait.visualize.figures import COLORS, Target, figure, label, save

LUDWIG_METRICS = ("loss", "accuracy", "hits_at_k", "edit_distance")
"""The metrics Ludwig's learning_curves draws when they were recorded (--metrics picks others)."""

SPLIT_STYLES = {"training": "-", "validation": "--", "test": ":"}


def curve(stats: dict, split: str, output: str, metric: str) -> np.ndarray | None:
    """The metric's value at each evaluation (NaN where it was not computed), or None when the
    split never recorded it."""
    values = stats.get(split, {}).get(output, {}).get(metric)
    if values is None:
        return None
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def evaluation_axis(stats: dict, count: int) -> tuple[np.ndarray, str]:
    """The x of each evaluation and its name, from the statistics' evaluation frequency (every
    epoch unless said otherwise), as Ludwig draws them: the n-th evaluation at n x frequency."""
    frequency = stats.get("evaluation_frequency") or {}
    step = float(frequency.get("frequency", 1.0))
    return np.arange(1, count + 1) * step, str(frequency.get("period", "epoch"))


def recorded(stats_list: list[dict]) -> dict[str, list[str]]:
    """{output: [metrics]} that any split of any model recorded, in first-seen order (the
    combined loss is an output here, as in Ludwig)."""
    found: dict[str, dict[str, None]] = {}
    for stats in stats_list:
        for split in SPLIT_STYLES:
            for output, metrics in stats.get(split, {}).items():
                found.setdefault(output, {}).update(dict.fromkeys(metrics))
    return {output: list(metrics) for output, metrics in found.items()}


def learning_curves(training_statistics: list[dict], *, target: Target, output_feature_name: str | None = None,
                    metrics: list[str] | None = None, model_names: list[str] | None = None) -> list[str]:
    """One figure per output and metric: the metric at each evaluation on each split."""
    available = recorded(training_statistics)
    if output_feature_name is not None and output_feature_name not in available:
        raise UsageError(f"--output_feature_name {output_feature_name!r}: the training statistics have no such output "
                         f"(they have {', '.join(available) or 'none'})")
    outputs = [output_feature_name] if output_feature_name else list(available)
    written = []
    for output in outputs:
        chosen = [m for m in (metrics or LUDWIG_METRICS) if m in available[output]]
        if metrics and not chosen:
            raise UsageError(f"--metrics {' '.join(metrics)}: output {output!r} recorded none of them (it recorded "
                             f"{', '.join(available[output])})")
        for metric in chosen:
            fig = draw_curves(training_statistics, output, metric, model_names)
            written.append(save(fig, target, f"learning_curves_{output}_{metric}"))
    return written


def draw_curves(stats_list: list[dict], output: str, metric: str, model_names: list[str] | None = None):
    fig, ax = figure()
    for i, stats in enumerate(stats_list):
        for split, style in SPLIT_STYLES.items():
            values = curve(stats, split, output, metric)
            if values is None or np.isnan(values).all():
                continue
            xs, period = evaluation_axis(stats, len(values))
            name = f"{label(model_names, i)} {split}" if len(stats_list) > 1 else split
            ax.plot(xs, values, style, color=COLORS[i % len(COLORS)], linewidth=2, marker="." if len(xs) < 30 else None,
                    label=name)
            ax.set_xlabel(period)
    if float((stats_list[0].get("evaluation_frequency") or {}).get("frequency", 1.0)).is_integer():
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no evaluation at epoch 1.5
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(f"Learning curves: {output}")
    ax.grid(alpha=0.4)
    ax.legend()
    return fig
