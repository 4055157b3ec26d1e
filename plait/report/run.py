"""The sections of a training run's report: what ran, the config, the data, the learning curves,
each output's test results, the feature importance plait explain found, and the training speed. A part the run did not write (no test
statistics after plait train, no predictions with --skip-save-predictions) is left out with a
note saying why."""

from __future__ import annotations

import logging

import numpy as np

from plait.errors import PlaitError
from plait.report import page
from plait.report.explanations import importance_section
from plait.run_directory import RunDirectory
from plait.visualize import calibration, confusion, curves, figures, inputs, speed, training
from plait.visualize.performance import NOT_METRICS

log = logging.getLogger("plait")


def run_sections(run: RunDirectory, dataset: str | None = None) -> list[str]:
    root = run.root.local()
    metadata = _metadata(run)
    stats = _statistics(run, "training")
    tests = _statistics(run, "test")
    return [
        overview(run, stats),
        page.section("Config", page.preformatted(run.config_text()) if run.has_config() else page.note(
            "the run has no config.yaml")),
        data_section(metadata),
        learning_section(stats),
        outputs_section(root, metadata, tests, _truth(run, metadata, dataset)),
        importance_section(root),
        speed_section(stats),
    ]


def _metadata(run: RunDirectory) -> dict | None:
    try:
        return inputs.model_metadata(run.model_dir.local())
    except PlaitError:
        return None


def _statistics(run: RunDirectory, kind: str) -> dict | None:
    if not run.has_statistics(kind):
        return None
    path = run.root.local() / f"{kind}_statistics.json"
    return inputs.training_statistics(path) if kind == "training" else inputs.test_statistics(path)


def overview(run: RunDirectory, stats: dict | None) -> str:
    rows = [["run directory", str(run)]]
    try:
        description = run.description()
        rows += [["command", f"plait {description.get('command', 'train')}"],
                 ["random seed", description.get("random_seed")]]
        rows += [[name.replace("_", " "), source] for name, source in (description.get("data") or {}).items() if source]
    except (OSError, ValueError):
        rows.append(["description", "description.json is missing (--skip-save-training-description)"])
    plait = (stats or {}).get("plait") or {}
    if plait.get("epoch"):
        rows += [["epochs trained", plait["epoch"][-1]], ["steps trained", (plait.get("step") or [None])[-1]]]
    if plait.get("restarts"):
        rows.append(["worker-group restarts", len(plait["restarts"])])
    return page.section("Run", page.pairs(rows))


def data_section(metadata: dict | None) -> str:
    if metadata is None:
        return page.section("Data", page.note("the run saved no model (model/training_set_metadata.json), so the "
                                              "data it was trained on is not described"))
    splits = metadata.get("splits") or {}
    split_rows = [[name, (info or {}).get("rows")] for name, info in splits.items()]
    features = [[name, feature.get("type"), "output" if feature.get("output") else "input", _describe(feature)]
                for name, feature in metadata["features"].items()]
    by_type: dict[str, list[int]] = {}
    for _, kind, role, _ in features:
        by_type.setdefault(kind, [0, 0])[role == "output"] += 1
    return page.section(
        "Data",
        page.heading("Rows per split"), page.table(["split", "rows"], split_rows + [["total", sum(
            r[1] or 0 for r in split_rows)]]) if split_rows else page.note("the metadata records no splits"),
        page.heading("Features per type"), page.table(["type", "inputs", "outputs"],
                                                      [[k, v[0], v[1]] for k, v in sorted(by_type.items())]),
        page.heading("Features"), page.table(["feature", "type", "role", "from the training data"], features))


def _describe(feature: dict) -> str:
    """A line about what preprocessing learned of a feature."""
    if "vocabulary" in feature:
        vocabulary = [str(v) for v in feature["vocabulary"]]
        shown = ", ".join(vocabulary[:8]) + (", ..." if len(vocabulary) > 8 else "")
        return f"{len(vocabulary)} values: {shown}"
    if "mean" in feature and "std" in feature:
        return f"mean {feature['mean']:.4g}, std {feature['std']:.4g}, min {feature.get('min', float('nan')):.4g}, " \
               f"max {feature.get('max', float('nan')):.4g}"
    if "true_labels" in feature:
        return f"true: {', '.join(map(str, feature['true_labels']))} (of {', '.join(map(str, feature.get('labels', [])))})"
    return ""


def learning_section(stats: dict | None) -> str:
    if stats is None:
        return page.section("Learning curves", page.note("the run has no training_statistics.json"))
    items = []
    for output, metrics in training.recorded([stats]).items():
        for metric in [m for m in training.LUDWIG_METRICS if m in metrics]:
            items.append(page.figure_html(training.draw_curves([stats], output, metric), f"{output}: {metric}"))
    return page.section("Learning curves", page.figures(items) or page.note("no metric was recorded"))


def _truth(run: RunDirectory, metadata: dict | None, dataset: str | None) -> tuple[dict, str]:
    """({output: true classes of the predicted rows}, why there are none): the test split of the
    run's dataset, as the model's config and seed split it."""
    if metadata is None:
        return {}, "the run saved no model"
    try:
        data = run.description().get("data") or {}
    except (OSError, ValueError):
        data = {}
    source = dataset or data.get("dataset")
    split = "test"
    if source is None and data.get("test_set"):
        source, split = data["test_set"], "full"
    if source is None:
        return {}, "the run's description names no dataset; give plait report --dataset"
    try:
        return inputs.true_classes(inputs.GroundTruth(str(source), str(run.model_dir.local()), split)), ""
    except PlaitError as err:
        return {}, f"the true classes could not be read from {source}: {err}"


def outputs_section(root, metadata: dict | None, tests: dict | None, truth: tuple[dict, str]) -> str:
    if tests is None:
        return page.section("Test results", page.note("the run has no test_statistics.json (plait train evaluates no "
                                                      "test split; plait experiment does)"))
    parts = []
    for output, values in tests.items():
        if output == "combined":
            continue
        metrics = [[name, float(v)] for name, v in values.items()
                   if name not in NOT_METRICS - {"loss"} and isinstance(v, (int, float)) and not isinstance(v, bool)]
        parts += [page.heading(f"Output {output}"), page.table(["metric", "value"], metrics)]
        if metadata is not None and (metadata["features"].get(output) or {}).get("type") in ("category", "binary"):
            parts.append(classifier_figures(root, metadata, tests, output, truth))
    return page.section("Test results", *parts)


def classifier_figures(root, metadata: dict, tests: dict, output: str, truth: tuple[dict, str]) -> str:
    """The confusion matrix and calibration of a classifier output (and its ROC curve if it is
    binary): from the predictions against the true classes where both are at hand, else the
    confusion matrix of the test statistics."""
    labels = inputs.class_labels(metadata, output)
    probabilities, why = _probabilities(root, output, labels, truth)
    items, notes = [], []
    if probabilities is not None:
        true = truth[0][output]
        predicted = np.argmax(probabilities, axis=1)
        matrix = confusion.confusion_counts(true, predicted, len(labels))
        items.append(_matrix_figure(matrix, labels, f"{output}: confusion matrix (test split)"))
        fig, ax = figures.figure(6.0, 5.5)
        bins = [calibration.calibration_bins(true == c, probabilities[:, c])[:2] for c in range(len(labels))]
        calibration.draw_calibration(ax, bins, labels, f"Calibration of {output}: each class against the rest")
        items.append(page.figure_html(fig, f"{output}: calibration"))
        if len(labels) == 2:
            fpr, tpr, _ = curves.roc_points(true == 1, probabilities[:, 1])
            items.append(page.figure_html(curves.draw_roc([(fpr, tpr)], [output], f"ROC: {output}"), f"{output}: ROC"))
    else:
        notes.append(page.note(f"no calibration for {output}: {why}"))
        if "confusion_matrix" in tests[output]:
            matrix = np.asarray(tests[output]["confusion_matrix"], dtype=np.float64)
            items.append(_matrix_figure(matrix, confusion.labels_for(metadata, output, len(matrix)),
                                        f"{output}: confusion matrix (test statistics)"))
    return "".join(notes) + page.figures(items)


def _matrix_figure(matrix: np.ndarray, labels: list[str], caption: str) -> str:
    return page.figure_html(confusion.draw_matrix(matrix, labels, caption.split(": ", 1)[-1].capitalize()), caption)


def _probabilities(root, output: str, labels: list[str], truth: tuple[dict, str]):
    """(the test predictions' probabilities, '') or (None, why not)."""
    found = [root / name for name in inputs.PREDICTIONS if (root / name).exists()]
    if not found:
        return None, "the run has no predictions (--skip-save-predictions)"
    if output not in truth[0]:
        return None, truth[1] or f"no true classes for {output}"
    try:
        probabilities = inputs.probabilities(found[0], output, labels)
        inputs.check_rows(truth[0][output], probabilities, "predictions", str(found[0]), "test")
    except PlaitError as err:
        return None, str(err)
    return probabilities, ""


def speed_section(stats: dict | None) -> str:
    measured = speed.speed(stats or {})
    if not len(measured["epoch"]):
        return page.section("Throughput", page.note("no speed measurements in the training statistics"))
    return page.section("Throughput", page.figures([page.figure_html(speed.draw_throughput(measured),
                                                                     "rows per second and time waiting on data")]))
