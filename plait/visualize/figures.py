"""Figures: made without pyplot, written whole.

matplotlib is imported here only, when a figure is made, so ``plait --help`` and every command
but visualize and report never load it. Figures are ``matplotlib.figure.Figure`` objects drawn
by the Agg canvas, never pyplot's: pyplot keeps global state and picks a GUI backend when one
is found, and a headless server (or a user's notebook) should get neither from plait.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
from dataclasses import dataclass

FILE_FORMATS = ("pdf", "png", "svg")

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
"""matplotlib's tab10, by index: model i is drawn in COLORS[i] in every plot."""


@dataclass(frozen=True)
class Target:
    """Where figures go: a folder (a local path or an fsspec URL) and a file format."""

    directory: str = "visualizations"
    file_format: str = "pdf"

    def __post_init__(self):
        if self.file_format not in FILE_FORMATS:
            from plait.errors import UsageError

            raise UsageError(f"--file_format {self.file_format!r}: give one of {', '.join(FILE_FORMATS)}")


def figure(width: float = 7.0, height: float = 4.8, rows: int = 1, columns: int = 1):
    """(figure, axes) of a new figure; axes is one Axes, or an array of them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(rows, columns, squeeze=True)


def save(fig, target: Target, name: str) -> str:
    """Write ``fig`` as ``<directory>/<name>.<format>``, whole or not at all; its path."""
    from plait.utils.fs import atomic_open, ensure_dir, resolve

    fs, folder = resolve(target.directory)
    ensure_dir(fs, folder)
    path = posixpath.join(folder, f"{safe_name(name)}.{target.file_format}")
    with atomic_open(fs, path, "wb") as handle:
        fig.savefig(handle, format=target.file_format, metadata=_fixed_metadata(target.file_format))
    return path if "://" not in target.directory else posixpath.join(target.directory, os.path.basename(path))


def svg_text(fig) -> str:
    """``fig`` as an SVG document, to put inline in an HTML page."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata=_fixed_metadata("svg"))
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # the XML declaration and doctype do not belong inside HTML


def _fixed_metadata(file_format: str) -> dict:
    """No creation date in the file: the same statistics give the same bytes."""
    return {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(file_format, {})


def safe_name(name: str) -> str:
    """A file name from output and class names, which may hold any character."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_") or "figure"


def label(model_names: list[str] | None, index: int, default: str = "") -> str:
    """Model ``index``'s name in a legend (Ludwig's --model_names, in the order of the files)."""
    if model_names and index < len(model_names):
        return model_names[index]
    return default or f"model {index + 1}"


def no_data(ax, message: str) -> None:
    """An axes that says why it is empty, rather than an empty frame."""
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])
