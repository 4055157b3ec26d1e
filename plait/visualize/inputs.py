"""What the visualizations read, loaded once each: a run's statistics files, predictions, the
ground truth and the model's metadata.

Every loader takes the flag that named the file, so that an error says which file, what is
wrong with it and what to give instead (``--test_statistics 'x.json': no such file``). The plots
themselves never see a path: they take what these return.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plait.errors import DataError, UsageError

TRAINING_STATISTICS = "training_statistics.json"
TEST_STATISTICS = "test_statistics.json"
HYPEROPT_STATISTICS = "hyperopt_statistics.json"
EXPLANATION_SUMMARY = "explanation_summary.json"
"""plait.explain.SUMMARY_FILE, spelled here too: importing plait.explain to read a JSON file would
load torch (a test holds the two equal)."""
METADATA = "training_set_metadata.json"
PREDICTIONS = ("predictions.parquet", "predictions.csv")


class Statistics(dict):
    """A statistics file's contents, which remember the file they came from (to name it in an
    error about an entry it lacks)."""

    source = "the statistics given"


def loaded(data: dict, source: str) -> Statistics:
    stats = Statistics(data)
    stats.source = source
    return stats


def source_of(stats: dict, index: int) -> str:
    """How an error names the statistics of model ``index``: their file, when known."""
    return repr(stats.source) if isinstance(stats, Statistics) else f"of model {index + 1}"


def _file(path: str | os.PathLike, flag: str, name: str) -> Path:
    """``path``, or ``name`` inside it when it is a folder (a run directory)."""
    path = Path(path)
    if path.is_dir() and (path / name).is_file():
        return path / name
    if not path.is_file():
        where = f"; a run directory holds it as {name}" if name else ""
        raise DataError(f"{flag} {str(path)!r}: no such file{where}")
    return path


def read_json(path: str | os.PathLike, flag: str, name: str) -> Any:
    path = _file(path, flag, name)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{flag} {str(path)!r} is not a JSON file ({str(exc).splitlines()[0]}); give the {name} a "
                        "run wrote") from None


def training_statistics(path: str | os.PathLike, flag: str = "--training_statistics") -> dict:
    """A ``training_statistics.json`` in Ludwig's layout (from either of plait's layouts)."""
    from plait.evaluation.statistics import read_training_statistics

    try:
        data = read_training_statistics(read_json(path, flag, TRAINING_STATISTICS))
        return loaded(data, str(_file(path, flag, TRAINING_STATISTICS)))
    except ValueError as exc:
        raise DataError(f"{flag} {str(path)!r}: {exc}; give the {TRAINING_STATISTICS} of a run") from None


def test_statistics(path: str | os.PathLike, flag: str = "--test_statistics") -> dict:
    """A ``test_statistics.json`` (or evaluation_statistics.json): ``{output: {metric: value}}``."""
    data = read_json(path, flag, TEST_STATISTICS)
    if isinstance(data, list) or (isinstance(data, dict) and "training" in data and "validation" in data):
        raise DataError(f"{flag} {str(path)!r} holds training statistics; give it to --training_statistics, or "
                        f"give the run's {TEST_STATISTICS} here")
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise DataError(f"{flag} {str(path)!r} is not test statistics ({{output: {{metric: value}}}}); give the "
                        f"{TEST_STATISTICS} of plait experiment or the evaluation_statistics.json of plait evaluate")
    return loaded(data, str(_file(path, flag, TEST_STATISTICS)))


def hyperopt_statistics(path: str | os.PathLike, flag: str = "--hyperopt_stats_path") -> dict:
    """A search's ``hyperopt_statistics.json`` (plait's, or Ludwig's: the same keys)."""
    data = read_json(path, flag, HYPEROPT_STATISTICS)
    if not (isinstance(data, dict) and isinstance(data.get("hyperopt_results"), list)
            and isinstance((data.get("hyperopt_config") or {}).get("parameters"), dict)):
        raise DataError(f"{flag} {str(path)!r} is not a search's statistics (hyperopt_config.parameters and "
                        f"hyperopt_results); give the {HYPEROPT_STATISTICS} of plait hyperopt")
    return loaded(data, str(_file(path, flag, HYPEROPT_STATISTICS)))


def explanation_summary(path: str | os.PathLike, flag: str = "--explanation_summary") -> dict:
    """An ``explanation_summary.json`` of plait explain (either method): its ``importance`` is
    ``{input: value}``."""
    data = read_json(path, flag, EXPLANATION_SUMMARY)
    importance = data.get("importance") if isinstance(data, dict) else None
    if not (isinstance(importance, dict) and importance
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in importance.values())):
        raise DataError(f"{flag} {str(path)!r} is not an explanation summary (no importance: {{input: number}}); "
                        f"give the {EXPLANATION_SUMMARY} plait explain wrote")
    return loaded(data, str(_file(path, flag, EXPLANATION_SUMMARY)))


def model_metadata(path: str | os.PathLike, flag: str = "--ground_truth_metadata") -> dict:
    """The model's preprocessing metadata: its ``training_set_metadata.json``, or the model
    folder or run directory that holds one."""
    path = Path(path)
    if path.is_dir() and (path / "model" / METADATA).is_file():
        path = path / "model"
    data = read_json(path, flag, METADATA)
    if not isinstance(data, dict) or not isinstance(data.get("features"), dict):
        raise DataError(f"{flag} {str(path)!r} is not a model's metadata (no 'features'); give the model's "
                        f"model/{METADATA}")
    return data


def output_names(statistics: list[dict], wanted: str | None, flag: str) -> list[str]:
    """The outputs to plot: ``wanted``, which every statistics file must have, else those every
    file has (``combined`` is the sum of the losses, not an output)."""
    if wanted is None:  # the outputs every model has
        shared = [name for name in (statistics[0] if statistics else {})
                  if name != "combined" and all(name in stats for stats in statistics)]
        if not shared:
            raise DataError(f"the {flag} files given share no output; compare models of the same outputs, or give "
                            "one file")
        return shared
    for stats in statistics:
        if wanted not in stats:
            names = ", ".join(name for name in stats if name != "combined") or "none"
            raise UsageError(f"--output_feature_name {wanted!r}: not an output of the {flag} given (its outputs: "
                             f"{names})")
    return [wanted]


def entry(stats: dict, index: int, output: str, key: str, fix: str):
    """``stats[output][key]``, or an error naming the file, the output and the entry it lacks."""
    value = (stats.get(output) or {}).get(key)
    if value is None:
        raise DataError(f"the test statistics {source_of(stats, index)} have no {key!r} for output {output!r}; {fix}")
    return value


def class_labels(metadata: dict, output: str) -> list[str]:
    """The output's classes in the model's order: a category's vocabulary, a binary's
    False, True."""
    feature = _feature(metadata, output)
    if feature.get("type") == "binary":
        return ["False", "True"]
    if "vocabulary" in feature:
        return [str(label) for label in feature["vocabulary"]]
    raise UsageError(f"output {output!r} is a {feature.get('type')} feature; this plot needs a category or binary "
                     "output (one with classes)")


def class_frequencies(metadata: dict, output: str) -> np.ndarray:
    """How often each class appeared in the training data, in class order."""
    feature = _feature(metadata, output)
    if "frequencies" not in feature:
        raise DataError(f"the metadata of output {output!r} has no class frequencies (a {feature.get('type')} "
                        "feature); frequency_vs_f1 plots category outputs")
    return np.asarray(feature["frequencies"], dtype=np.int64)


def _feature(metadata: dict, output: str) -> dict:
    features = metadata.get("features", metadata)
    if output not in features:
        outputs = [name for name, f in features.items() if isinstance(f, dict) and f.get("output")]
        raise UsageError(f"--output_feature_name {output!r}: not an output of the model (its outputs: "
                         f"{', '.join(outputs) or 'none'})")
    return features[output]


def only_output(metadata: dict, wanted: str | None) -> str:
    """The output to plot from predictions: ``wanted``, or the model's only output."""
    if wanted is not None:
        _feature(metadata, wanted)
        return wanted
    outputs = [name for name, f in metadata["features"].items() if f.get("output")]
    if len(outputs) != 1:
        raise UsageError(f"the model has {len(outputs)} outputs ({', '.join(outputs)}); choose one with "
                         "--output_feature_name")
    return outputs[0]


# ---- predictions -----------------------------------------------------------------------------------

def _predictions_frame(path: str | os.PathLike, flag: str):
    from plait.data.io import read_table

    path = Path(path)
    if path.is_dir():
        found = [path / name for name in PREDICTIONS if (path / name).exists()]
        path = found[0] if found else path
    if not path.exists():
        raise DataError(f"{flag} {str(path)!r}: no such file; give the predictions.parquet a run or plait predict "
                        "wrote")
    return read_table(str(path)).to_pandas()


def probabilities(path: str | os.PathLike, output: str, labels: list[str], flag: str = "--probabilities") -> np.ndarray:
    """Each row's probability of each class (rows x classes, in the order of ``labels``), from
    the ``<output>_probabilities_<label>`` columns plait writes (or Ludwig's one list column,
    ``<output>_probabilities``)."""
    frame = _predictions_frame(path, flag)
    columns = [f"{output}_probabilities_{label}" for label in labels]
    if all(column in frame for column in columns):
        return frame[columns].to_numpy(dtype=np.float64)
    if f"{output}_probabilities" in frame:  # Ludwig's layout: one list per row
        values = np.stack([np.asarray(v, dtype=np.float64) for v in frame[f"{output}_probabilities"]])
        if values.shape[1] == len(labels):
            return values
    found = [c for c in frame.columns if c.startswith(f"{output}_probabilities")]
    raise DataError(f"{flag} {str(path)!r} has no probabilities of {output!r} for its classes ({', '.join(labels)}): "
                    f"its columns are {', '.join(found or frame.columns)}; give predictions of the same model")


def predictions(path: str | os.PathLike, output: str, labels: list[str], flag: str = "--predictions") -> np.ndarray:
    """Each row's predicted class, as its index in ``labels`` (-1 for a value not among them)."""
    frame = _predictions_frame(path, flag)
    column = f"{output}_predictions"
    if column not in frame:
        raise DataError(f"{flag} {str(path)!r} has no column {column!r} (its columns: {', '.join(frame.columns)}); "
                        "give predictions of the model whose metadata you gave")
    index = {label: i for i, label in enumerate(labels)}
    return np.array([index.get(str(value), -1) for value in frame[column]], dtype=np.int64)


# ---- ground truth ----------------------------------------------------------------------------------

SPLITS = {"0": "training", "1": "validation", "2": "test", "training": "training", "validation": "validation",
          "test": "test", "full": "full"}
"""--ground_truth_split: Ludwig's numbers, the split names, or full (every row)."""


@dataclass(frozen=True)
class GroundTruth:
    """Where the true classes are read from: a dataset, the model (its config splits the rows
    and its metadata encodes the classes) and the split."""

    dataset: str
    model: str
    split: str = "test"


def ground_truth(source: GroundTruth, output: str) -> np.ndarray:
    """The true class of each row of ``source.split`` as an index into :func:`class_labels`
    (-1 for a class the model never saw)."""
    classes = true_classes(source)
    if output not in classes:
        raise UsageError(f"--output_feature_name {output!r}: not a category or binary output of the model in "
                         f"{source.model!r} (its outputs: {', '.join(classes) or 'none'})")
    return classes[output]


def true_classes(source: GroundTruth) -> dict[str, np.ndarray]:
    """{output: the true class of each row} for every category and binary output, encoded by
    the output's own preprocessing, with the rows chosen by the model's config and seed as plait
    evaluate --split chooses them."""
    from plait.config import load_config
    from plait.data.preprocess import transform_split
    from plait.models.saved import read_description

    if not Path(source.dataset).exists() and "://" not in source.dataset:
        raise DataError(f"--ground_truth {source.dataset!r}: no such file; give the dataset the model was trained on")
    split = SPLITS.get(str(source.split))
    if split is None:
        raise UsageError(f"--ground_truth_split {source.split!r}: give 0 (training), 1 (validation), 2 (test) or full")
    config, metadata = read_description(_model_folder(source.model))
    table = transform_split(load_config(config), metadata["features"], source.dataset, metadata.get("seed", 42), split)
    return {name: table[name].to_numpy(zero_copy_only=False).astype(np.int64)
            for name, feature in metadata["features"].items()
            if feature.get("output") and feature.get("type") in ("category", "binary") and name in table.column_names}


def _model_folder(path: str) -> Path:
    """The model folder of --ground_truth_metadata (its metadata file, the folder, or the run)."""
    path = Path(path)
    if path.is_file():
        path = path.parent
    return path / "model" if (path / "model" / METADATA).is_file() else path


def check_rows(truth: np.ndarray, values: np.ndarray, flag: str, path: str, split: str) -> None:
    """Predictions and ground truth must be the same rows."""
    if len(truth) != len(values):
        raise DataError(f"{flag} {path!r} has {len(values)} rows but the ground truth's {split} split has "
                        f"{len(truth)}; give the predictions of that split (an experiment predicts its test split: "
                        "--ground_truth_split 2) or --ground_truth_split full for predictions of every row")
