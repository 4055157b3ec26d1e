"""Category features: the vocabulary lookup of plait.features.category (an unseen or missing
value is <UNK>, index 0), and the label and probabilities of a category output."""

from __future__ import annotations

from plait.export.onnx.features import exports_input, exports_output
from plait.export.onnx.graph import GraphBuilder

MISSING = ""
"""A missing string: the runner writes None and NaN cells as the empty string (a string tensor
has no null)."""
PROBABILITY_COLUMNS_UP_TO = 100
"""plait predict writes one probability column per class up to this many classes."""


def filled_strings(g: GraphBuilder, raw: str, fill) -> str:
    """``raw`` with missing values replaced by ``fill`` (None: left missing)."""
    if fill is None:
        return raw
    return g.op("Where", g.op("Equal", raw, g.constant(MISSING)), g.constant(str(fill)), raw)


@exports_input("category", "string")
def category_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    if feature.preprocessing.lowercase:
        raw = g.lowercase(raw)
    values = filled_strings(g, raw, meta["fill_value"])
    vocabulary = meta["vocabulary"]
    return g.label_encoder(values, list(vocabulary), list(range(len(vocabulary))), 0)


@exports_output("category")
def category_output(g: GraphBuilder, predicted: dict[str, str], meta: dict, feature) -> dict[str, str]:
    name, vocabulary = feature.name, [str(v) for v in meta["vocabulary"]]
    columns = {f"{name}_predictions": g.label_encoder(predicted["prediction"], list(range(len(vocabulary))),
                                                      vocabulary, ""),
               f"{name}_probability": predicted["probability"]}
    if len(vocabulary) <= PROBABILITY_COLUMNS_UP_TO:
        columns.update(probability_columns(g, predicted["probabilities"], name, vocabulary))
    return columns


def probability_columns(g: GraphBuilder, probabilities: str, name: str, labels: list[str]) -> dict[str, str]:
    """One column per label: the label's column of the [rows, labels] matrix."""
    return {f"{name}_probabilities_{label}": g.op("Gather", probabilities, g.constant(i), axis=1)
            for i, label in enumerate(labels)}
