"""plait visualize: Ludwig's plots of a run's results, by Ludwig's names.

``VISUALIZATIONS`` maps each name to what it draws and what it reads (``needs``): training or
test statistics, predictions or probabilities with the ground truth, the model's metadata, a
search's statistics. Each module holds one kind of plot, with the numbers behind it worked out in
plain numpy functions apart from the drawing, so they can be checked without looking at pixels:
training (learning curves), performance (comparisons of models and classes), confusion,
curves (ROC and precision-recall), calibration, hyperopt, speed (plait's own throughput),
importance (plait's own: plait explain's global feature importance).

``visualize(name, **inputs)`` draws from inputs already loaded; :func:`plait.visualize.files.from_files`
loads them from the files the CLI names first. matplotlib is imported only when a figure is made.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from plait.errors import UsageError
from plait.visualize import calibration, confusion, curves, hyperopt, importance, performance, speed, training
from plait.visualize.figures import FILE_FORMATS, Target


@dataclass(frozen=True)
class Visualization:
    """A plot: the function that draws it (it returns the files it wrote) and the inputs it
    reads, by the name of the function's parameter."""

    draw: Callable[..., list[str]]
    needs: tuple[str, ...]

    @property
    def options(self) -> tuple[str, ...]:
        """The settings it takes besides its inputs (output_feature_name, top_n_classes...)."""
        parameters = inspect.signature(self.draw).parameters
        return tuple(name for name in parameters if name not in self.needs and name != "target")

    def __call__(self, **inputs) -> list[str]:
        return self.draw(**inputs)


GROUND_TRUTH = ("ground_truth", "labels")
VISUALIZATIONS: dict[str, Visualization] = {
    "learning_curves": Visualization(training.learning_curves, ("training_statistics",)),
    "compare_performance": Visualization(performance.compare_performance, ("test_statistics",)),
    "compare_classifiers_performance_from_prob": Visualization(
        performance.compare_classifiers_performance_from_prob, ("probabilities", "ground_truth")),
    "compare_classifiers_performance_from_pred": Visualization(
        performance.compare_classifiers_performance_from_pred, ("predictions", "ground_truth")),
    "compare_classifiers_multiclass_multimetric": Visualization(
        performance.compare_classifiers_multiclass_multimetric, ("test_statistics", "metadata")),
    "frequency_vs_f1": Visualization(performance.frequency_vs_f1, ("test_statistics", "metadata")),
    "confusion_matrix": Visualization(confusion.confusion_matrix, ("test_statistics", "metadata")),
    "roc_curves": Visualization(curves.roc_curves, ("probabilities",) + GROUND_TRUTH),
    "roc_curves_from_test_statistics": Visualization(curves.roc_curves_from_test_statistics, ("test_statistics",)),
    "precision_recall_curves": Visualization(curves.precision_recall_curves, ("probabilities",) + GROUND_TRUTH),
    "precision_recall_curves_from_test_statistics": Visualization(
        curves.precision_recall_curves_from_test_statistics, ("test_statistics",)),
    "calibration_1_vs_all": Visualization(calibration.calibration_1_vs_all, ("probabilities",) + GROUND_TRUTH),
    "calibration_multiclass": Visualization(calibration.calibration_multiclass, ("probabilities", "ground_truth")),
    "hyperopt_report": Visualization(hyperopt.hyperopt_report, ("hyperopt_statistics",)),
    "hyperopt_hiplot": Visualization(hyperopt.hyperopt_hiplot, ("hyperopt_statistics",)),
    "throughput": Visualization(speed.throughput, ("training_statistics",)),
    "feature_importance": Visualization(importance.feature_importance, ("explanation_summary",)),
}
"""Every plot plait draws, by Ludwig's name (throughput and feature_importance are plait's own)."""

LUDWIG_ONLY = ("compare_classifiers_performance_subset", "compare_classifiers_performance_changing_k",
               "compare_classifiers_predictions", "compare_classifiers_predictions_distribution",
               "confidence_thresholding", "confidence_thresholding_data_vs_acc",
               "confidence_thresholding_data_vs_acc_subset", "confidence_thresholding_data_vs_acc_subset_per_class",
               "confidence_thresholding_2thresholds_2d", "confidence_thresholding_2thresholds_3d",
               "binary_threshold_vs_metric")
"""Ludwig's plots plait does not draw."""


def get_visualization(name: str) -> Visualization:
    """The plot called ``name``; an error listing the available ones if plait has none."""
    if name in VISUALIZATIONS:
        return VISUALIZATIONS[name]
    available = ", ".join(sorted(VISUALIZATIONS))
    if name in LUDWIG_ONLY:
        raise UsageError(f"--visualization {name}: Ludwig's {name} is not part of plait; plait draws {available}")
    raise UsageError(f"--visualization {name!r}: no such visualization; choose one of {available}")


def visualize(name: str, output_directory: str = "visualizations", file_format: str = "pdf", **inputs) -> list[str]:
    """Draw the plot ``name`` from loaded inputs (statistics as dicts, probabilities as arrays:
    see its function's parameters) into ``output_directory``; the paths of the files written."""
    visualization = get_visualization(name)
    accepted = set(visualization.needs) | set(visualization.options)
    unknown = sorted(set(inputs) - accepted)
    if unknown:
        raise UsageError(f"{name} takes {', '.join(sorted(accepted))}; not {', '.join(unknown)}")
    missing = [need for need in visualization.needs if inputs.get(need) is None
               and inspect.signature(visualization.draw).parameters[need].default is inspect.Parameter.empty]
    if missing:
        raise UsageError(f"{name} needs {', '.join(missing)}")
    return visualization(target=Target(output_directory, file_format), **inputs)


__all__ = ["FILE_FORMATS", "LUDWIG_ONLY", "VISUALIZATIONS", "Visualization", "get_visualization", "visualize"]
