"""A search's results (hyperopt_statistics.json): hyperopt_report (the score against each
parameter, and the mean score of each pair of parameters' values) and hyperopt_hiplot (a static
parallel-coordinates figure: plait draws what Ludwig hands to the hiplot package)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plait.errors import DataError
from plait.visualize.figures import Target, figure, no_data, save

INT_SPACES = {"randint", "qrandint", "lograndint", "qlograndint"}
FLOAT_SPACES = {"uniform", "quniform", "loguniform", "qloguniform", "randn", "qrandn"}
LOG_SPACES = {"loguniform", "qloguniform", "lograndint", "qlograndint"}
BINS = 10
"""Ludwig's number of quantile bins of a numeric parameter in the pair plot."""


# ---- numbers ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trials:
    """The scored trials of a search: each parameter's values and the score, row by row."""

    parameters: dict[str, dict]  # name -> its space (hyperopt_config.parameters)
    values: dict[str, list]  # name -> the value of each trial
    scores: np.ndarray
    metric: str
    goal: str

    def is_numeric(self, name: str) -> bool:
        space = self.parameters[name].get("space")
        return space in INT_SPACES | FLOAT_SPACES and all(isinstance(v, (int, float)) for v in self.values[name])


def scored_trials(stats: dict) -> Trials:
    """The trials that have a score (an errored trial has none), in the file's order."""
    config = stats["hyperopt_config"]
    parameters = config["parameters"]
    results = [r for r in stats["hyperopt_results"] if isinstance(r.get("metric_score"), (int, float))]
    target = stats.get("metric") or {}
    metric = " ".join(str(target[k]) for k in ("split", "output_feature", "metric") if target.get(k)) or str(
        config.get("metric", "score"))
    return Trials(parameters=parameters, values={name: [r["parameters"].get(name) for r in results] for name in parameters},
                  scores=np.array([float(r["metric_score"]) for r in results]), metric=metric,
                  goal=str(config.get("goal", "minimize")))


@dataclass(frozen=True)
class Axis:
    """One vertical axis of the parallel-coordinates figure: each trial's place on it (0 to 1)
    and the ticks (place, text) to draw."""

    name: str
    places: np.ndarray
    ticks: list[tuple[float, str]]


def parallel_axes(trials: Trials) -> list[Axis]:
    """An axis per parameter, then the score: numbers scaled linearly between their smallest and
    largest value (logarithmically for a log space), categories spread evenly in first-seen order."""
    axes = []
    for name, space in trials.parameters.items():
        if trials.is_numeric(name):
            axes.append(_numeric_axis(name, np.array(trials.values[name], dtype=np.float64),
                                      space.get("space") in LOG_SPACES))
        else:
            axes.append(_category_axis(name, trials.values[name]))
    axes.append(_numeric_axis(trials.metric, trials.scores, False))
    return axes


def _numeric_axis(name: str, values: np.ndarray, log: bool) -> Axis:
    scaled = np.log10(values) if log and (values > 0).all() else values
    low, high = (float(scaled.min()), float(scaled.max())) if len(scaled) else (0.0, 1.0)
    span = high - low or 1.0
    places = (scaled - low) / span if high > low else np.full(len(scaled), 0.5)
    distinct = np.unique(scaled)
    marks = distinct if len(distinct) <= 5 else np.linspace(low, high, 5)  # few values: mark each one
    ticks = [((m - low) / span if high > low else 0.5, f"{10 ** m if log and (values > 0).all() else m:.3g}")
             for m in marks]
    return Axis(name, places, ticks)


def _category_axis(name: str, values: list) -> Axis:
    categories = list(dict.fromkeys(str(v) for v in values))
    step = 1.0 / max(len(categories) - 1, 1)
    place = {c: (i * step if len(categories) > 1 else 0.5) for i, c in enumerate(categories)}
    return Axis(name, np.array([place[str(v)] for v in values]), [(place[c], c) for c in categories])


def quantile_bins(values: np.ndarray, bins: int = BINS) -> list[str]:
    """Each value's bin among up to ``bins`` quantile bins, as its range's text (the value itself
    when there are no more distinct values than bins)."""
    edges = np.unique(np.quantile(values, np.linspace(0, 1, bins + 1)))
    if len(np.unique(values)) <= bins or len(edges) < 2:  # few values: each its own
        return [f"{v:.3g}" for v in values]
    which = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
    return [f"{edges[i]:.3g}-{edges[i + 1]:.3g}" for i in which]


# ---- figures ---------------------------------------------------------------------------------------

def _trials(hyperopt_statistics: dict) -> Trials:
    trials = scored_trials(hyperopt_statistics)
    if not len(trials.scores):
        raise DataError("the search's hyperopt_results hold no trial with a metric_score: no trial finished an "
                        "evaluation; see each trial's error in hyperopt_statistics.json")
    return trials


def hyperopt_report(hyperopt_statistics: dict, *, target: Target) -> list[str]:
    """A figure per parameter (the score of each trial against its value) and the pair plot."""
    trials = _trials(hyperopt_statistics)
    written = []
    for name in trials.parameters:
        fig, ax = figure(6.0, 4.5)
        draw_parameter(ax, trials, name)
        written.append(save(fig, target, f"hyperopt_{name}"))
    if len(trials.parameters) > 1:  # one parameter has no pairs
        written.append(save(draw_pairs(trials), target, "hyperopt_pair_plot"))
    return written


def draw_parameter(ax, trials: Trials, name: str) -> None:
    values = trials.values[name]
    if trials.is_numeric(name):
        ax.scatter(np.array(values, dtype=np.float64), trials.scores, s=36, color="#1f77b4", alpha=0.8)
        if trials.parameters[name].get("space") in LOG_SPACES:
            ax.set_xscale("log")
        elif trials.parameters[name].get("space") in INT_SPACES:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:  # a strip plot: the categories side by side, jittered so that equal scores stay visible
        axis = _category_axis(name, values)
        categories = [text for _, text in axis.ticks]
        xs = np.array([categories.index(str(v)) for v in values], dtype=np.float64)
        jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(xs))
        ax.scatter(xs + jitter, trials.scores, s=36, color="#1f77b4", alpha=0.8)
        ax.set_xticks(range(len(categories)), categories)
        ax.set_xlim(-0.5, len(categories) - 0.5)
    ax.set_xlabel(name)
    ax.set_ylabel(trials.metric)
    ax.set_title(f"Hyperopt report: {name}")
    ax.grid(alpha=0.4)


def draw_pairs(trials: Trials):
    """For each pair of parameters, the mean score of the trials at each pair of their values
    (numbers in quantile bins)."""
    names = list(trials.parameters)
    binned = {n: quantile_bins(np.array(trials.values[n], dtype=np.float64)) if trials.is_numeric(n)
              else [str(v) for v in trials.values[n]] for n in names}
    size = len(names)
    fig, axes = figure(3.6 * size, 3.2 * size, rows=size, columns=size)
    fig.suptitle(f"Hyperopt report: mean {trials.metric} by pair of parameters")
    low, high = float(trials.scores.min()), float(trials.scores.max())
    for r, row_name in enumerate(names):
        for c, column_name in enumerate(names):
            ax = axes[r, c]
            if r == c:
                no_data(ax, row_name)
                continue
            rows, columns = sorted(set(binned[row_name])), sorted(set(binned[column_name]))
            grid = np.full((len(rows), len(columns)), np.nan)
            for i, j in np.ndindex(grid.shape):
                chosen = [s for s, a, b in zip(trials.scores, binned[row_name], binned[column_name])
                          if a == rows[i] and b == columns[j]]
                grid[i, j] = np.mean(chosen) if chosen else np.nan
            image = ax.imshow(grid, cmap="viridis", vmin=low, vmax=high, aspect="auto")
            ax.set_xticks(range(len(columns)), columns, rotation=45, ha="right", fontsize="x-small")
            ax.set_yticks(range(len(rows)), rows, fontsize="x-small")
            ax.set_xlabel(column_name, fontsize="small")
            ax.set_ylabel(row_name, fontsize="small")
    fig.colorbar(image, ax=axes, shrink=0.6, label=trials.metric)
    return fig


def hyperopt_hiplot(hyperopt_statistics: dict, *, target: Target) -> list[str]:
    """Parallel coordinates: an axis per parameter and one for the score, a line per trial,
    colored by its score (the best trials drawn last, on top)."""
    fig = draw_parallel(_trials(hyperopt_statistics))
    return [save(fig, target, "hyperopt_hiplot")]


def draw_parallel(trials: Trials, ax=None):
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    axes = parallel_axes(trials)
    fig = None
    if ax is None:
        fig, ax = figure(max(9.0, 2.6 * len(axes)), 4.8)
    norm = Normalize(float(trials.scores.min()), float(trials.scores.max()) or 1.0)
    colors = colormaps["viridis"]
    better = trials.scores if trials.goal == "maximize" else -trials.scores
    for t in np.argsort(better, kind="stable"):
        ax.plot(range(len(axes)), [axis.places[t] for axis in axes], color=colors(norm(trials.scores[t])),
                linewidth=1.8, alpha=0.85)
    for x, axis in enumerate(axes):
        ax.axvline(x, color="#333333", linewidth=1)
        for place, text in axis.ticks:
            ax.text(x + 0.04, place, text, fontsize="x-small", va="center",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1})
    ax.set_xticks(range(len(axes)), [axis.name for axis in axes], fontsize="small")
    ax.set_xlim(-0.1, len(axes) - 0.6)
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{len(trials.scores)} trials: parameters and {trials.metric} ({trials.goal})")
    ax.figure.colorbar(ScalarMappable(norm, colors), ax=ax, label=trials.metric, fraction=0.04)
    return fig
