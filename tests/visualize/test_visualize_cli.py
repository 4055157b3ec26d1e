"""plait visualize: every plot from a real run's files (and small hand-written ones), the true
classes of the split the run predicted, and one error line for each mistake a user can make."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from plait.visualize import LUDWIG_ONLY, VISUALIZATIONS, inputs, visualize
from test_feature_importance import IG_SUMMARY

TEST_STATS = {
    "combined": {"loss": 0.6},
    "y": {"loss": 0.6, "accuracy": 0.7, "f1": 0.65,
          "confusion_matrix": [[5, 1, 0], [2, 3, 1], [0, 0, 8]],
          "per_class_stats": {"a": {"precision": 0.71, "recall": 0.83, "f1_score": 0.77},
                              "b": {"precision": 0.75, "recall": 0.5, "f1_score": 0.6},
                              "c": {"precision": 0.89, "recall": 1.0, "f1_score": 0.94}},
          "roc_curve": {"false_positive_rate": [0.0, 0.1, 1.0], "true_positive_rate": [0.0, 0.8, 1.0]},
          "precision_recall_curve": {"precisions": [0.5, 0.8, 1.0], "recalls": [1.0, 0.8, 0.0]}},
}
METADATA = {"features": {"y": {"type": "category", "output": True, "vocabulary": ["a", "b", "c"],
                               "frequencies": [40, 25, 35]},
                         "x": {"type": "number", "output": False}}}
HYPEROPT = {
    "hyperopt_config": {"goal": "maximize", "metric": "accuracy", "output_feature": "y", "parameters": {
        "trainer.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1},
        "trainer.batch_size": {"space": "choice", "categories": [16, 32]}}},
    "hyperopt_results": [
        {"trial_id": "t0", "status": "completed", "metric_score": 0.8,
         "parameters": {"trainer.learning_rate": 0.01, "trainer.batch_size": 16}},
        {"trial_id": "t1", "status": "completed", "metric_score": 0.6,
         "parameters": {"trainer.learning_rate": 0.002, "trainer.batch_size": 32}},
        {"trial_id": "t2", "status": "error", "metric_score": None, "error": "plait: error: <boom>",
         "parameters": {"trainer.learning_rate": 0.05, "trainer.batch_size": 32}}],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory, classifier_run):
    """Paths of the run's files and of the hand-written ones."""
    folder = tmp_path_factory.mktemp("handwritten")
    for name, data in (("test_statistics.json", TEST_STATS), ("training_set_metadata.json", METADATA),
                       ("hyperopt_statistics.json", HYPEROPT), ("explanation_summary.json", IG_SUMMARY)):
        (folder / name).write_text(json.dumps(data))
    return {"run": classifier_run, "data": classifier_run.parent.parent / "data.csv",
            "model": classifier_run / "model", "stats": folder / "test_statistics.json",
            "metadata": folder / "training_set_metadata.json", "search": folder / "hyperopt_statistics.json",
            "explanation": folder / "explanation_summary.json"}


def arguments(name: str, f: dict) -> list:
    """The flags that give the plot ``name`` its inputs."""
    needs = VISUALIZATIONS[name].needs
    if "training_statistics" in needs:
        return ["-trs", f["run"] / "training_statistics.json"]
    if "hyperopt_statistics" in needs:
        return ["-hs", f["search"]]
    if "explanation_summary" in needs:
        return ["--explanation_summary", f["explanation"]]
    if "test_statistics" in needs:
        return ["-tes", f["stats"], "-gm", f["metadata"]]
    kind = "-prob" if "probabilities" in needs else "-pred"
    return [kind, f["run"] / "predictions.parquet", "-g", f["data"], "-gm", f["model"], "-ofn", "label", "-tn", "2"]


@pytest.mark.parametrize("name", sorted(VISUALIZATIONS))
def test_every_visualization_writes_its_figures(name, files, cli, tmp_path):
    code, out, err = cli("visualize", "-v", name, *arguments(name, files), "-od", tmp_path, "-ff", "png")
    assert code == 0, err
    written = json.loads(out)["files"]
    assert written and sorted(written) == sorted(str(p) for p in tmp_path.iterdir())
    for path in written:
        with open(path, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("file_format, magic", [("pdf", b"%PDF"), ("svg", b"<?xml")])
def test_pdf_and_svg(file_format, magic, files, cli, tmp_path):
    code, out, err = cli("visualize", "--visualization", "confusion_matrix", "--test-statistics", files["stats"],
                         "--ground-truth-metadata", files["metadata"], "--normalize", "-od", tmp_path,
                         "--file_format", file_format)
    assert code == 0, err
    assert sorted(p.rsplit("/", 1)[-1] for p in json.loads(out)["files"]) == [
        f"confusion_matrix__y_top3.{file_format}", f"confusion_matrix_entropy__y_top3.{file_format}"]
    assert (tmp_path / f"confusion_matrix__y_top3.{file_format}").read_bytes().startswith(magic)


def test_learning_curves_name_each_output_and_metric_the_run_recorded(files, tmp_path):
    stats = inputs.training_statistics(files["run"])
    written = visualize("learning_curves", output_directory=str(tmp_path), file_format="svg",
                        training_statistics=[stats], output_feature_name="label", metrics=["loss", "accuracy"])
    assert [p.rsplit("/", 1)[-1] for p in written] == ["learning_curves_label_loss.svg",
                                                        "learning_curves_label_accuracy.svg"]


def test_the_test_split_of_the_ground_truth_is_the_rows_the_experiment_predicted(files):
    """The predictions scored against the ground truth give the experiment's own test metrics."""
    metadata = inputs.model_metadata(files["run"])
    truth = inputs.true_classes(inputs.GroundTruth(str(files["data"]), str(files["model"]), "2"))
    tests = inputs.test_statistics(files["run"])
    labels = inputs.class_labels(metadata, "label")
    predicted = inputs.predictions(files["run"], "label", labels)
    assert len(truth["label"]) == sum(1 for _ in predicted) == metadata["splits"]["test"]["rows"]
    assert np.mean(predicted == truth["label"]) == pytest.approx(tests["label"]["accuracy"])
    from sklearn.metrics import roc_auc_score

    flag = inputs.probabilities(files["run"], "flag", inputs.class_labels(metadata, "flag"))
    assert roc_auc_score(truth["flag"], flag[:, 1]) == pytest.approx(tests["flag"]["roc_auc"], abs=1e-5)


def test_a_ludwig_plot_plait_lacks_is_refused_with_the_list(cli):
    code, out, err = cli("visualize", "-v", "confidence_thresholding_2thresholds_3d")
    assert code == 2 and not out
    assert err.startswith("plait: error: --visualization confidence_thresholding_2thresholds_3d: Ludwig's")
    assert all(name in err for name in VISUALIZATIONS) and "Traceback" not in err
    assert set(LUDWIG_ONLY).isdisjoint(VISUALIZATIONS)


def mistakes(f: dict) -> list[tuple[list, str]]:
    prob = ["-prob", f["run"] / "predictions.parquet", "-g", f["data"], "-gm", f["model"], "-ofn", "label"]
    return [
        (["-v", "learning_curves", "-trs", "nope.json"], "--training_statistics 'nope.json': no such file"),
        (["-v", "learning_curves", "-trs", f["stats"]], "not training statistics"),
        (["-v", "compare_performance", "-tes", f["run"] / "training_statistics.json"], "holds training statistics"),
        (["-v", "compare_performance", "-tes", f["stats"], "-ofn", "z"], "--output_feature_name 'z': not an output"),
        (["-v", "roc_curves", "-g", f["data"], "-gm", f["model"]], "roc_curves needs --probabilities"),
        (["-v", "roc_curves", "-prob", f["run"] / "predictions.parquet"], "roc_curves needs --ground_truth"),
        ([*prob[:-2], "-v", "roc_curves"], "the model has 2 outputs (label, flag); choose one"),
        ([*prob, "-v", "roc_curves", "-gts", "0"], "rows but the ground truth's 0 split has"),
        ([*prob, "-v", "roc_curves", "-pl", "zulu"], "--positive_label 'zulu': give a class index"),
        (["-v", "confusion_matrix", "-tes", f["run"] / "test_statistics.json", "-ofn", "nope"], "not an output"),
        (["-v", "hyperopt_report", "-hs", f["stats"]], "is not a search's statistics"),
        (["-v", "feature_importance"], "feature_importance needs --explanation_summary"),
        (["-v", "feature_importance", "--explanation_summary", f["stats"]], "is not an explanation summary"),
        (["-v", "learning_curves", "-trs", f["stats"], "--split_file", "x.csv"], "--split_file: plait splits"),
        (["-v", "nonsense"], "--visualization 'nonsense': no such visualization; choose one of"),
    ]


def test_each_mistake_is_one_error_line_naming_the_value(files, cli):
    for args, message in mistakes(files):
        code, out, err = cli("visualize", *args)
        assert code == 2, (args, err)
        assert err.startswith("plait: error: ") and message in err and err.count("\n") == 1, (args, err)


def test_plait_help_does_not_import_matplotlib():
    code = ("import sys; from plait.cli import build_parser; build_parser().format_help(); "
            "sys.exit('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_runs_confusion_matrix_counts_its_predictions_against_the_true_classes(files):
    from plait.visualize.confusion import confusion_counts

    metadata = inputs.model_metadata(files["model"])
    labels = inputs.class_labels(metadata, "label")
    truth = inputs.ground_truth(inputs.GroundTruth(str(files["data"]), str(files["model"]), "test"), "label")
    counts = confusion_counts(truth, inputs.predictions(files["run"], "label", labels), len(labels))
    assert counts.tolist() == inputs.test_statistics(files["run"])["label"]["confusion_matrix"]
