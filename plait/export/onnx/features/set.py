"""Set features. An input is the multi-hot row over its vocabulary (``plait.data.tensors``),
from the runner's tokens (``tokens.py``: the feature's tokenizer runs in plait_onnx.py).

An output's ``<name>_predictions`` is a string matrix [rows, labels] in the graph: the label
where its probability reaches the threshold, "" elsewhere (no label is empty), in vocabulary
order; export.json lists it under ``lists`` and plait_onnx.py returns each row as the list of its
labels, as ``plait predict`` does. ``<name>_probabilities_<label>`` follow, one per label up to
100 labels, as there.
"""

from __future__ import annotations

from plait.export.onnx.features import exports_input, exports_output
from plait.export.onnx.features.category import PROBABILITY_COLUMNS_UP_TO, probability_columns
from plait.export.onnx.features.tokens import token_ids, token_reader, unsupported_tokenizer, vocabulary_counts
from plait.export.onnx.graph import GraphBuilder


@exports_input("set", "string", ("tokens",), refuse=unsupported_tokenizer, reader=token_reader)
def set_input(g: GraphBuilder, tokens: str, meta: dict, feature) -> str:
    vocabulary = meta["vocabulary"]
    ids = token_ids(g, tokens, vocabulary, unknown=0, pad=-1)
    return vocabulary_counts(g, ids, max(1, len(vocabulary)), "ReduceMax")


@exports_output("set")
def set_output(g: GraphBuilder, predicted: dict[str, str], meta: dict, feature) -> dict[str, str]:
    name, vocabulary = feature.name, [str(v) for v in meta["vocabulary"]]
    labels = g.op("Where", predicted["prediction"], g.constant(vocabulary), g.constant(""))
    columns = {f"{name}_predictions": labels}
    if len(vocabulary) <= PROBABILITY_COLUMNS_UP_TO:
        columns.update(probability_columns(g, predicted["probabilities"], name, vocabulary))
    return columns
