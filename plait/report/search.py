"""The sections of a search's report: the search, its config, every trial, and the parameters
against the score (parallel coordinates and one scatter per parameter)."""

from __future__ import annotations

from plait.errors import PlaitError
from plait.report import page
from plait.report.run import learning_section
from plait.run_directory import RunDirectory
from plait.visualize import hyperopt, inputs
from plait.visualize.figures import figure


def search_sections(run: RunDirectory) -> list[str]:
    stats = inputs.hyperopt_statistics(run.root.local())
    results = stats["hyperopt_results"]
    target = stats.get("metric") or {}
    best = stats.get("best") or {}
    rows = [["search directory", str(run)], ["trials", len(results)],
            ["goal", " ".join(str(target.get(k, "")) for k in ("goal", "split", "output_feature", "metric")).strip()],
            ["best trial", best.get("trial_id")], ["best score", best.get("metric_score")],
            ["best model", best.get("model_path")]]
    return [page.section("Search", page.pairs(rows)),
            page.section("Config", page.preformatted(run.config_text()) if run.has_config() else page.note(
                "the search has no config.yaml")),
            trials_section(stats), parameters_section(stats), best_section(best)]


def trials_section(stats: dict) -> str:
    names = list(stats["hyperopt_config"]["parameters"])
    rows = [[r.get("trial_id"), r.get("status"), r.get("metric_score")]
            + [_value(r.get("parameters", {}).get(n)) for n in names] + [r.get("error") or ""]
            for r in stats["hyperopt_results"]]
    return page.section("Trials", page.table(["trial", "status", "score", *names, "error"], rows))


def _value(value):
    return value if isinstance(value, (int, float, str)) or value is None else str(value)


def parameters_section(stats: dict) -> str:
    trials = hyperopt.scored_trials(stats)
    if not len(trials.scores):
        return page.section("Parameters", page.note("no trial has a score"))
    items = [page.figure_html(hyperopt.draw_parallel(trials), "parallel coordinates: a line per trial", wide=True)]
    for name in trials.parameters:
        fig, ax = figure(5.5, 4.0)
        hyperopt.draw_parameter(ax, trials, name)
        items.append(page.figure_html(fig, name))
    return page.section("Parameters", page.figures(items))


def best_section(best: dict) -> str:
    folder = best.get("run_directory")
    if not folder:
        return ""
    try:
        trial = RunDirectory(folder)
        stats = inputs.training_statistics(trial.root.local() / "training_statistics.json") \
            if trial.has_statistics("training") else None
    except (PlaitError, OSError):
        stats = None
    return learning_section(stats).replace("<h2>Learning curves</h2>",
                                           "<h2>Learning curves of the best trial</h2>", 1)
