"""A trained model as the plain function SHAP's model-agnostic explainers wrap: rows in, each
row's probability (or number) out.

plait does not depend on shap (its test does): this module only shapes the model to what shap
expects, so that ``shap.KernelExplainer(function, background)``, ``shap.PermutationExplainer`` or
``shap.Explainer`` (exact or permutation: the function is a black box to shap) explain plait's
predictions. The predictor is built once, in this process: shap calls the function once or twice
per explained row with hundreds of masked rows, too small and too many for a backend's job each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from plait.errors import UsageError
from plait.explain.rows import check_output

if TYPE_CHECKING:
    import pandas as pd

NUMBER_TYPES = ("number",)
"""Input types whose column is made numeric when it arrives as objects (shap's arrays of a mixed
table); other inputs' columns keep their values as they are."""


def probability_function(model, output_feature_name: str | None = None, class_label: str | None = None,
                         encoded_categories: bool = False) -> Callable[["pd.DataFrame | np.ndarray"], np.ndarray]:
    """``model``'s (a trained :class:`plait.Model`) scores of ``output_feature_name`` (default:
    the first output) for a DataFrame or a 2-D array of raw rows, as a numpy array:

    - binary output: the probability of True, one per row (``class_label="False"`` for the other);
    - category output: a row of every class's probability, in the vocabulary's order, or the
      probability of ``class_label`` alone;
    - number output: the prediction.

    A numpy array's columns are the model's input columns, in the config's order (the order of
    ``input_columns(model)``); shap passes arrays of the background's dtype, object for mixed tables.

    shap's tabular maskers (behind ``shap.Explainer`` and ``PermutationExplainer`` given a
    background table) compare values numerically, so a category's labels cannot reach them as
    strings: give them ``encode_categories(model, rows)`` and set ``encoded_categories``, and the
    function reads each category input's number as its index in the model's vocabulary.
    ``KernelExplainer`` needs the same.
    """
    model.require_trained()
    spec = model.predictor_spec()
    output = check_output(spec.config, output_feature_name)
    predictor = spec.build(device="cpu")
    columns = _columns(spec.config)
    kinds = {predictor.column(p): p.type for p in predictor.inputs}
    pick = _score(predictor.features[output], output, class_label)
    vocabularies = _vocabularies(predictor) if encoded_categories else {}

    def scores(rows) -> np.ndarray:
        frame = _frame(rows, columns, kinds)
        if vocabularies:
            frame = frame.assign(**{column: _decoded(frame[column], column, vocabulary)
                                    for column, vocabulary in vocabularies.items() if column in frame})
        predictor.check_columns(list(frame.columns), with_outputs=False)
        logits = predictor.logits(predictor.tensors(pa.Table.from_pandas(frame, preserve_index=False),
                                                    predictor.inputs))
        found = predictor.module.head(output).predict(logits[output])
        return pick(found)

    return scores


def input_columns(model) -> list[str]:
    """The raw columns the model reads, in its config's order: the columns of a numpy row."""
    return _columns(model.predictor_spec().config)


def encode_categories(model, rows: "pd.DataFrame") -> "pd.DataFrame":
    """``rows`` with each category input's labels replaced by their index in the model's
    vocabulary, as floats (a label the model never saw: 0, its unknown value <UNK>): a table
    shap's maskers can mix, for a function made with ``encoded_categories=True``."""
    predictor = model.predictor_spec().build(device="cpu")
    encoded = {}
    for column, vocabulary in _vocabularies(predictor).items():
        if column in rows:
            index = {label: i for i, label in enumerate(vocabulary)}
            encoded[column] = rows[column].map(lambda value: float(index.get(str(value), 0)))
    return rows.assign(**encoded)


def _vocabularies(predictor) -> dict[str, np.ndarray]:
    """{raw column: its vocabulary} of the category inputs."""
    return {predictor.column(p): np.asarray(predictor.features[p.name]["vocabulary"], dtype=object)
            for p in predictor.inputs if p.type == "category"}


def _decoded(values, column: str, vocabulary: np.ndarray):
    codes = np.asarray(values, dtype=np.float64)
    index = np.rint(codes).astype(np.int64)
    if not np.allclose(codes, index) or index.min(initial=0) < 0 or index.max(initial=0) >= len(vocabulary):
        raise UsageError(f"column {column!r}: encoded_categories reads a category input as its index in the "
                         f"model's vocabulary (0 to {len(vocabulary) - 1}); encode the rows with encode_categories")
    return vocabulary[index]


def _columns(config: dict) -> list[str]:
    return list(dict.fromkeys(f.get("column") or f["name"] for f in config["input_features"]))


def _score(meta: dict, output: str, class_label: str | None) -> Callable[[dict], np.ndarray]:
    """From the output head's prediction to the array returned (see probability_function)."""
    kind = meta["type"]
    if kind == "number":
        if class_label is not None:
            raise UsageError(f"class_label {class_label!r}: output {output!r} is a number; it has no classes")
        return lambda found: found["prediction"].numpy().astype(np.float64)
    labels = ["False", "True"] if kind == "binary" else [str(v) for v in meta["vocabulary"]]
    if class_label is not None and str(class_label) not in labels:
        raise UsageError(f"class_label {class_label!r}: not a class of output {output!r}; its classes are "
                         f"{', '.join(labels)}")
    if kind == "binary":
        true = class_label is None or str(class_label) == "True"
        return lambda found: (lambda p: p if true else 1.0 - p)(found["probability"].numpy().astype(np.float64))
    index = None if class_label is None else labels.index(str(class_label))
    return lambda found: found["probabilities"].numpy().astype(np.float64)[:, slice(None) if index is None else index]


def _frame(rows, columns: list[str], kinds: dict[str, str]):
    """``rows`` as a DataFrame of the model's input columns: a numpy array gets their names; a
    number column that arrived as objects (shap's arrays of a mixed table) becomes floats."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        frame = rows
    else:
        values = np.asarray(rows)
        if values.ndim == 1:
            values = values[None, :]
        if values.ndim != 2 or values.shape[1] != len(columns):
            raise UsageError(f"rows of shape {values.shape}: give a DataFrame, or a 2-D array of {len(columns)} "
                             f"columns in this order: {', '.join(columns)}")
        frame = pd.DataFrame(values, columns=columns)
    converted = {column: pd.to_numeric(frame[column]) for column in frame.columns
                 if kinds.get(column) in NUMBER_TYPES and frame[column].dtype == object}
    return frame.assign(**converted) if converted else frame
