"""throughput (plait's own): how fast training went and how long it waited on data, per epoch,
and per worker when the run had several."""

from __future__ import annotations

import numpy as np

from plait.errors import DataError
from plait.visualize.figures import COLORS, Target, figure, label, no_data, save


def speed(stats: dict) -> dict[str, np.ndarray]:
    """The evaluations that measured speed (those that ended an epoch), as arrays:
    ``epoch``, ``rows_per_s``, ``data_wait_fraction`` and, when recorded, the per-worker
    ``rows_per_s_per_worker`` and ``data_wait_fraction_per_worker`` (evaluations x workers)."""
    plait = stats.get("plait") or {}
    rates = plait.get("rows_per_s") or []
    keep = [i for i, rate in enumerate(rates) if rate is not None]
    epochs = plait.get("epoch") or list(range(1, len(rates) + 1))
    waits = plait.get("data_wait_fraction") or [None] * len(rates)
    found = {"epoch": np.array([epochs[i] for i in keep], dtype=np.float64),
             "rows_per_s": np.array([rates[i] for i in keep], dtype=np.float64),
             "data_wait_fraction": np.array([np.nan if waits[i] is None else waits[i] for i in keep], dtype=np.float64)}
    for name in ("rows_per_s_per_worker", "data_wait_fraction_per_worker"):
        rows = plait.get(name) or []
        kept = [rows[i] for i in keep if i < len(rows) and rows[i]]
        if kept and len(kept) == len(keep) and len({len(r) for r in kept}) == 1:
            found[name] = np.array(kept, dtype=np.float64)
    return found


def throughput(training_statistics: list[dict], *, target: Target, model_names: list[str] | None = None) -> list[str]:
    """One figure per model: rows per second (above) and the fraction of time spent waiting on
    data (below) at each epoch; thin lines for each worker."""
    written = []
    for i, stats in enumerate(training_statistics):
        measured = speed(stats)
        if not len(measured["epoch"]) and len(training_statistics) == 1:
            raise DataError("the training statistics hold no speed measurements (plait records rows_per_s under "
                            "'plait' at the end of each epoch; a Ludwig run's statistics have none)")
        fig = draw_throughput(measured, label(model_names, i, "") if len(training_statistics) > 1 else "")
        name = "throughput" if len(training_statistics) == 1 else f"throughput_{label(model_names, i)}"
        written.append(save(fig, target, name))
    return written


def draw_throughput(measured: dict[str, np.ndarray], title: str = ""):
    fig, (rate_ax, wait_ax) = figure(7.0, 5.6, rows=2)
    fig.suptitle(f"Training throughput {title}".strip())
    if not len(measured["epoch"]):
        no_data(rate_ax, "no speed measurements in these statistics")
        no_data(wait_ax, "")
        return fig
    epochs = measured["epoch"]
    for ax, name, scale in ((rate_ax, "rows_per_s", 1.0), (wait_ax, "data_wait_fraction", 100.0)):
        per_worker = measured.get(f"{name}_per_worker")
        if per_worker is not None and per_worker.shape[1] > 1:
            for w in range(per_worker.shape[1]):
                ax.plot(epochs, per_worker[:, w] * scale, color=COLORS[(w + 1) % len(COLORS)], linewidth=1,
                        alpha=0.7, label=f"worker {w}")
        ax.plot(epochs, measured[name] * scale, color=COLORS[0], linewidth=2.5, marker="." if len(epochs) < 30 else None,
                label="all workers" if per_worker is not None and per_worker.shape[1] > 1 else None)
        ax.grid(alpha=0.4)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small", ncols=2)
    rate_ax.set_ylabel("rows / s")
    rate_ax.set_ylim(bottom=0)
    wait_ax.set_ylabel("waiting on data (%)")
    wait_ax.set_ylim(bottom=0)
    wait_ax.set_xlabel("epoch")
    return fig
