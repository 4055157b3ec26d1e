"""From the files the command line names to the inputs a plot reads: the loading half of
``plait visualize``, with an error for each input a plot needs and was not given."""

from __future__ import annotations

from plait.errors import UsageError
from plait.visualize import get_visualization, inputs, visualize

WHAT = {
    "training_statistics": "--training_statistics (a run's training_statistics.json; several to compare models)",
    "test_statistics": "--test_statistics (a run's test_statistics.json, or plait evaluate's "
                       "evaluation_statistics.json; several to compare models)",
    "hyperopt_statistics": "--hyperopt_stats_path (a search's hyperopt_statistics.json)",
    "explanation_summary": "--explanation_summary (the explanation_summary.json of plait explain)",
    "metadata": "--ground_truth_metadata (the model's model/training_set_metadata.json)",
    "probabilities": "--probabilities (a run's predictions.parquet, which holds each class's probability)",
    "predictions": "--predictions (a run's predictions.parquet)",
}


def from_files(name: str, *, training_statistics: list[str] = (), test_statistics: list[str] = (),
               probabilities: list[str] = (), predictions: list[str] = (), ground_truth: str | None = None,
               ground_truth_split: str = "2", ground_truth_metadata: str | None = None,
               hyperopt_stats_path: str | None = None, explanation_summary: str | None = None,
               output_directory: str = "visualizations",
               file_format: str = "pdf", **options) -> list[str]:
    """Load what the plot ``name`` reads from these files and draw it; the files written.
    ``options`` the plot does not take are left unused (Ludwig's scripts pass the same flags to
    every plot)."""
    visualization = get_visualization(name)
    given = {"training_statistics": list(training_statistics), "test_statistics": list(test_statistics),
             "hyperopt_statistics": hyperopt_stats_path, "explanation_summary": explanation_summary,
             "metadata": ground_truth_metadata,
             "probabilities": list(probabilities), "predictions": list(predictions)}
    needs = set(visualization.needs)
    for need in needs & set(WHAT):
        if not given[need] and not (need == "metadata" and name == "confusion_matrix"):  # labels are optional there
            raise UsageError(f"{name} needs {WHAT[need]}")
    loaded: dict = {}
    for need, loader in (("training_statistics", inputs.training_statistics),
                         ("test_statistics", inputs.test_statistics)):
        if need in needs:
            loaded[need] = [loader(path) for path in given[need]]
    if "hyperopt_statistics" in needs:
        loaded["hyperopt_statistics"] = inputs.hyperopt_statistics(hyperopt_stats_path)
    if "explanation_summary" in needs:
        loaded["explanation_summary"] = inputs.explanation_summary(explanation_summary)
    if "metadata" in needs:
        loaded["metadata"] = inputs.model_metadata(ground_truth_metadata) if ground_truth_metadata else None
    if "ground_truth" in needs:
        loaded |= _with_ground_truth(name, needs, given, ground_truth, ground_truth_split, ground_truth_metadata,
                                     options.get("output_feature_name"))
    chosen = {key: value for key, value in options.items() if key in visualization.options and value is not None}
    return visualize(name, output_directory=output_directory, file_format=file_format, **loaded, **chosen)


def _with_ground_truth(name: str, needs: set, given: dict, dataset: str | None, split: str, model: str | None,
                       output: str | None) -> dict:
    """The model's predicted probabilities (or classes) of one output and its true classes."""
    kind = "probabilities" if "probabilities" in needs else "predictions"
    if not given[kind]:
        raise UsageError(f"{name} needs {WHAT[kind]}")
    if not dataset or not model:
        raise UsageError(f"{name} needs --ground_truth (the dataset with the true values) and {WHAT['metadata']}, "
                         "whose config and seed choose the rows of --ground_truth_split (default 2: test)")
    metadata = inputs.model_metadata(model)
    output = inputs.only_output(metadata, output)
    labels = inputs.class_labels(metadata, output)
    read = inputs.probabilities if kind == "probabilities" else inputs.predictions
    values = [read(path, output, labels, f"--{kind}") for path in given[kind]]
    truth = inputs.ground_truth(inputs.GroundTruth(dataset, model, split), output)
    for path, value in zip(given[kind], values):
        inputs.check_rows(truth, value, f"--{kind}", path, str(split))
    loaded = {kind: values, "ground_truth": truth}
    if "labels" in needs:
        loaded["labels"] = labels
    return loaded
