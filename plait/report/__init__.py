"""plait report: one self-contained HTML page about a run or a search.

The page needs nothing but itself: CSS inline, each figure an SVG in a data: URL, no script, so it
can be mailed, attached to a ticket or opened offline. Its figures are drawn by plait.visualize's
drawing functions, the same as plait visualize writes to files.
"""

from __future__ import annotations

import os

from plait.errors import UsageError
from plait.report import page
from plait.report.run import run_sections
from plait.report.search import search_sections
from plait.run_directory import RunDirectory
from plait.visualize.inputs import HYPEROPT_STATISTICS

REPORT = "report.html"


def write_report(run_directory: str | os.PathLike, output: str | os.PathLike | None = None,
                 dataset: str | None = None) -> str:
    """Write the report of ``run_directory`` (a run, or a search with hyperopt_statistics.json)
    to ``output`` (default: report.html in it), whole or not at all; its path."""
    from plait.utils.fs import atomic_open, local_fs

    html = report_html(run_directory, dataset)
    path = os.fspath(output) if output is not None else os.path.join(os.fspath(run_directory), REPORT)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with atomic_open(local_fs(), path, "w") as handle:
        handle.write(html)
    return path


def report_html(run_directory: str | os.PathLike, dataset: str | None = None) -> str:
    """The report's HTML."""
    location = os.fspath(run_directory)
    if "://" in location:
        raise UsageError(f"plait report {location!r}: reads a run directory on this machine; copy it here first")
    if not os.path.isdir(location):
        raise UsageError(f"plait report {location!r}: no such directory; give a run directory (results/<name>_run_<n>)")
    run = RunDirectory(location)
    if run.root.is_file(HYPEROPT_STATISTICS):
        return page.page("plait search report", location, search_sections(run))
    if not (run.is_started() or run.has_statistics("training") or run.has_config()):
        raise UsageError(f"plait report {location!r}: not a plait run directory (no description.json, config.yaml or "
                         "training_statistics.json); give the folder a plait run wrote")
    return page.page("plait run report", location, run_sections(run, dataset))
