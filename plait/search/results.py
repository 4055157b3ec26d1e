"""What a search leaves: ``hyperopt_statistics.json`` and the one-screen summary.

Each trial is ``completed`` (it trained all its epochs and saved its model), ``stopped`` (a
scheduler or the time budget ended it: its model is made afterwards from the best weights of its
last checkpoint, Ludwig #1866) or ``error`` (its error line is kept).
"""

from __future__ import annotations

import logging
import math
import posixpath

from plait.config.render import resolved_dict
from plait.run_directory import RunDirectory
from plait.search.space import trial_values
from plait.search.tune_parts import METRIC

log = logging.getLogger("plait")

STATISTICS = "hyperopt_statistics.json"
SUMMARY_ROWS = 20


def trial_records(analysis, paths: tuple[str, ...], trials, tune, target: tuple[str, str, str],
                  mode: str) -> list[dict]:
    """One record per trial of Tune's ``ExperimentAnalysis``. ``trials``: the folder of the
    trials' run directories; ``tune``: Tune's folder, where each trial's ``progress.csv`` holds
    every report (its ``result.json`` starts over when PBT restarts a trial)."""
    records = []
    for trial in analysis.trials:
        history = _progress(tune / posixpath.basename(trial.path.rstrip("/")))
        run = RunDirectory(trials / trial.trial_id)
        reports = _with_own_tail(_history(history), _own_history(run, target))
        records.append({
            "trial_id": trial.trial_id,
            "parameters": trial_values(paths, trial.config),
            "metric_score": _best(reports, mode, _score(trial.last_result)),
            "status": _status(trial, run),
            "history": reports,
            "model_path": run.model_dir.url if run.has_model() else None,
            "run_directory": run.root.url,
            "error": _error_line(trial),
        })
    return records


def _with_own_tail(reports: list[dict], own: list[dict]) -> list[dict]:
    """Tune's record of a trial's reports, and after it the evaluations the trial's own statistics
    (or last checkpoint) hold that Tune had not logged when the trial ended (the time budget
    ending it during its first report; its last report, as a PBT search ended)."""
    if not reports:
        return own
    return reports + [r for r in own if r["step"] > reports[-1]["step"]]


def ranked(records: list[dict], mode: str) -> list[dict]:
    """Best first; trials without a score last."""
    def order(record):
        score = record["metric_score"]
        if score is None:
            return (1, 0.0)
        return (0, score if mode == "min" else -score)

    return sorted(records, key=order)


def _best(reports: list[dict], mode: str, last: float | None) -> float | None:
    """The trial's best evaluation: the one whose weights its model keeps (the trial's
    validation_metric is the searched one)."""
    scores = [r["metric_score"] for r in reports if math.isfinite(r["metric_score"])]
    if not scores:
        return last
    return min(scores) if mode == "min" else max(scores)


def _score(result: dict) -> float | None:
    value = (result or {}).get(METRIC)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _status(trial, run) -> str:
    """completed: the trial saved its statistics, or reported its last epoch (ASHA ends a trial
    at max_t right after that report, before it can save)."""
    if trial.status == "ERROR":
        return "error"
    if run.has_statistics("training"):
        return "completed"
    epochs = _epochs(run)
    return "completed" if epochs and (trial.last_result or {}).get("epoch") == epochs else "stopped"


def _epochs(run: RunDirectory) -> int | None:
    import yaml

    try:
        return yaml.safe_load(run.config_text())["trainer"]["epochs"]
    except (OSError, KeyError, TypeError):
        return None


def evaluations_of(run: RunDirectory) -> list[dict]:
    """A trial's evaluation records, one per evaluation: its training statistics, or, before the
    run wrote them, its latest checkpoint's; none when neither can be read."""
    from plait.evaluation.statistics import history_of
    from plait.training import checkpoint as ckpt

    try:
        if run.has_statistics("training"):
            return history_of(run.read_statistics("training"))
        latest = ckpt.latest_checkpoint(run.checkpoints)
        return ckpt.saved_state(latest)["history"] if latest else []
    except (OSError, ValueError, KeyError):
        return []


def _own_history(run: RunDirectory, target: tuple[str, str, str]) -> list[dict]:
    records = evaluations_of(run)
    split, feature, metric = target
    return [{"epoch": r["epoch"], "step": r["step"], "metric_score": float(r[split][feature][metric])}
            for r in records if r.get(split, {}).get(feature, {}).get(metric) is not None]


def _progress(folder):
    import io

    import pandas as pd

    try:
        return pd.read_csv(io.StringIO(folder.read_text("progress.csv")))
    except (OSError, ValueError):  # a trial that never reported has no rows
        return None


def _history(frame) -> list[dict]:
    """The trial's reports in order, one per step (a trial resumed at its last step reports it
    again)."""
    if frame is None or METRIC not in frame.columns:
        return []
    rows = frame[["epoch", "step", METRIC]].dropna().drop_duplicates(subset=["step"], keep="last")
    return [{"epoch": int(r["epoch"]), "step": int(r["step"]), "metric_score": float(r[METRIC])}
            for r in rows.to_dict("records")]


def _error_line(trial) -> str | None:
    if trial.status != "ERROR":
        return None
    error = trial.get_error()
    text = str(error) if error is not None else "the trial failed"
    lines = [line for line in text.splitlines() if line.strip()]
    plait_lines = [line for line in lines if "plait" in line.lower() and "error" in line.lower()]
    return (plait_lines or lines or ["the trial failed"])[-1].strip()[:500]


def statistics(config, records: list[dict]) -> dict:
    """The content of hyperopt_statistics.json."""
    section = config.hyperopt
    best = next((r for r in records if r["metric_score"] is not None), None)
    return {
        "hyperopt_config": resolved_dict(config)["hyperopt"],
        "metric": {"output_feature": section.output_feature, "metric": section.metric, "split": section.split,
                   "goal": section.goal},
        "best": best,
        "hyperopt_results": records,
    }


def summary(stats: dict) -> str:
    """A one-screen table of the trials, best first."""
    records = stats["hyperopt_results"]
    target = stats["metric"]
    lines = [f"Search: {len(records)} trials; {target['split']} {target['output_feature']} {target['metric']} "
             f"({target['goal']})", f"  {'trial':<18} {'status':<10} {'score':>12}  parameters"]
    for record in records[:SUMMARY_ROWS]:
        score = "-" if record["metric_score"] is None else f"{record['metric_score']:.6g}"
        values = ", ".join(f"{path}={_short(value)}" for path, value in record["parameters"].items())
        lines.append(f"  {record['trial_id']:<18} {record['status']:<10} {score:>12}  {values}")
    if len(records) > SUMMARY_ROWS:
        lines.append(f"  ... {len(records) - SUMMARY_ROWS} more in {stats.get('file', 'hyperopt_statistics.json')}")
    best = stats["best"]
    if best:
        lines.append(f"Best: {best['trial_id']} ({best['metric_score']:.6g}); model in {best['model_path']}")
    return "\n".join(lines)


def _short(value) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
