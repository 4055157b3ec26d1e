"""The report's "Feature importance" section: the summaries plait explain wrote for the run.

plait explain writes where ``--output_directory`` says (default ./results), not into a run, so
the report looks in the places a user puts them: the run directory itself, and its
``explanations/`` folder and that folder's subfolders (one per method or output, say
``explanations/ig`` and ``explanations/permutation``). Each summary found gets its bar chart
and a table.
"""

from __future__ import annotations

from pathlib import Path

from plait.errors import PlaitError
from plait.report import page
from plait.visualize import importance, inputs

FOLDER = "explanations"
"""RUN_DIR/explanations: where the README tells plait explain to write a run's explanations."""


def summary_paths(root: Path) -> list[Path]:
    """The explanation summaries of the run at ``root``, in the order the section shows them."""
    folder = root / FOLDER
    found = [root / inputs.EXPLANATION_SUMMARY, folder / inputs.EXPLANATION_SUMMARY]
    found += sorted(folder.glob(f"*/{inputs.EXPLANATION_SUMMARY}")) if folder.is_dir() else []
    return [path for path in found if path.is_file()]


def importance_section(root: Path) -> str:
    paths = summary_paths(root)
    if not paths:
        return page.section("Feature importance", page.note(
            f"the run has no {inputs.EXPLANATION_SUMMARY} (in it or in {FOLDER}/): plait explain --model_path "
            f"RUN_DIR/model --dataset DATA --output_directory RUN_DIR/{FOLDER} writes one"))
    parts = []
    for path in paths:
        try:
            parts += summary_parts(inputs.explanation_summary(path), str(path.relative_to(root)))
        except PlaitError as err:
            parts.append(page.note(str(err)))
    return page.section("Feature importance", *parts)


def summary_parts(summary: dict, where: str) -> list[str]:
    """A heading, the chart and the table of one summary."""
    names, values = importance.ranked(summary)
    baselines = summary.get("baselines") or {}
    header = ["rank", "input", importance.measure(summary)] + (["baseline"] if baselines else [])
    rows = [[rank, name, float(value)] + ([baselines.get(name)] if baselines else [])
            for rank, (name, value) in enumerate(zip(names, values), start=1)]
    caption = importance.title(summary).replace("Feature importance of ", "", 1)
    return [page.heading(f"{caption} ({where})"),
            page.figures([page.figure_html(importance.draw_importance(summary), caption, wide=True)]),
            page.table(header, rows)]
