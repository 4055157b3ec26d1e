"""Binary features: plait.features.binary's reading of labels and boolean words, and a binary
output's prediction and probabilities."""

from __future__ import annotations

import numpy as np

from plait.export.onnx.features import exports_input, exports_output
from plait.export.onnx.features.category import MISSING
from plait.export.onnx.graph import GraphBuilder
from plait.features.binary import FALSE_WORDS, TRUE_WORDS

UNKNOWN = -1.0


@exports_input("binary", "string")
def binary_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    """A training label is true when it is one of the true labels; any other value when it is a
    true word (lowercased). plait refuses a value that is neither a label nor a word; the graph
    cannot, and reads it, like a missing value, as the fill value."""
    true_labels = list(meta["true_labels"])
    labels = list(dict.fromkeys([*meta.get("labels", []), *true_labels]))
    by_label = g.label_encoder(raw, labels, [1.0 if label in true_labels else 0.0 for label in labels], UNKNOWN)
    words = sorted(TRUE_WORDS | FALSE_WORDS)
    by_word = g.label_encoder(g.lowercase(raw), words,
                              [1.0 if word in TRUE_WORDS else 0.0 for word in words], UNKNOWN)
    unknown = g.constant(UNKNOWN, np.float32)
    fill = g.constant(1.0 if meta["fill_value"] else 0.0, np.float32)
    value = g.op("Where", g.op("Equal", by_label, unknown), by_word, by_label)
    value = g.op("Where", g.op("Equal", value, unknown), fill, value)
    return g.op("Where", g.op("Equal", raw, g.constant(MISSING)), fill, value)


@exports_output("binary")
def binary_output(g: GraphBuilder, predicted: dict[str, str], meta: dict, feature) -> dict[str, str]:
    name, p = feature.name, predicted["probability"]
    not_p = g.op("Sub", g.constant(1.0, np.float32), p)
    return {f"{name}_predictions": predicted["prediction"], f"{name}_probability": g.op("Max", p, not_p),
            f"{name}_probabilities_False": not_p, f"{name}_probabilities_True": p}
