"""feature_importance (plait's own; Ludwig has no such plot): each input's global importance from
an ``explanation_summary.json`` that plait explain wrote, as horizontal bars, the largest on top.

Both methods' summaries hold ``importance`` ({input: value}): integrated gradients' is each
input's mean absolute attribution to the explained score; permutation's is how much the output's
validation metric worsens when the input is shuffled, which can be below zero by chance for an
input the model ignores.
"""

from __future__ import annotations

import numpy as np

from plait.errors import DataError
from plait.visualize.figures import COLORS, Target, figure, save


def ranked(summary: dict) -> tuple[list[str], np.ndarray]:
    """(inputs, importances), the most important first (ties in the summary's input order)."""
    importance = summary["importance"]
    names = sorted(importance, key=lambda name: -float(importance[name]))
    return names, np.array([float(importance[name]) for name in names], dtype=np.float64)


def measure(summary: dict) -> str:
    """What the bars measure, for the axis."""
    if summary.get("method") == "permutation":
        metric = summary.get("metric", "the validation metric")
        return f"worsening of {metric} when the input is shuffled (mean of {summary.get('repeats', 'several')} shuffles)"
    explained = summary.get("explained", "the predicted class")
    return f"mean |integrated gradients attribution| ({explained})"


def title(summary: dict) -> str:
    method = {"ig": "integrated gradients", "permutation": "permutation importance"}.get(
        summary.get("method"), str(summary.get("method")))
    return f"Feature importance of {summary.get('output_feature', 'the output')}: {method}"


def feature_importance(explanation_summary: dict, *, target: Target) -> list[str]:
    """One figure: ``feature_importance_<method>_<output>``."""
    if not explanation_summary.get("importance"):
        raise DataError("the explanation summary has no importance; give the explanation_summary.json plait "
                        "explain wrote")
    fig = draw_importance(explanation_summary)
    name = f"feature_importance_{explanation_summary.get('method')}_{explanation_summary.get('output_feature')}"
    return [save(fig, target, name)]


def draw_importance(summary: dict):
    names, values = ranked(summary)
    fig, ax = figure(7.0, max(2.4, 1.0 + 0.32 * len(names)))
    places = np.arange(len(names))[::-1]  # barh draws from the bottom: the first name goes on top
    ax.barh(places, values, color=[COLORS[0] if v >= 0 else COLORS[3] for v in values], height=0.7)
    ax.set_yticks(places, names)
    ax.axvline(0.0, color="#555555", linewidth=0.8)
    ax.set_xlabel(measure(summary))
    ax.set_title(title(summary))
    ax.grid(axis="x", alpha=0.4)
    return fig
