"""Binary features: boolean words, 0/1, or any two labels mapped to false/true."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings

TRUE_WORDS = {"true", "t", "yes", "y", "1", "1.0", "on"}
FALSE_WORDS = {"false", "f", "no", "n", "0", "0.0", "off"}


class BinaryProcessor(FeatureProcessor):
    type = "binary"

    def prepare(self, column: pa.Array) -> pa.Array:
        if pa.types.is_boolean(column.type):
            return pc.if_else(column, "true", "false")
        return as_strings(column)

    def partial_stats(self, column: pa.Array):
        return st.value_counts(column)

    def merge_stats(self, a, b):
        return st.merge_counts(a, b)

    def finalize(self, counts) -> dict:
        labels = sorted(str(v) for v in (counts.index if counts is not None else []))
        fallback = self.preprocessing.fallback_true_label
        if all(label.lower() in TRUE_WORDS | FALSE_WORDS for label in labels) and fallback is None:
            true_labels = [label for label in labels if label.lower() in TRUE_WORDS]
        elif len(labels) <= 2:
            true_label = fallback if fallback is not None else (labels[-1] if labels else "true")
            true_labels = [true_label]
        else:
            raise DataError(
                f"binary feature {self.name!r}: column {self.column!r} has {len(labels)} distinct "
                f"values ({', '.join(labels[:5])}{', ...' if len(labels) > 5 else ''}); a binary "
                f"feature needs two. Use a category feature instead."
            )
        strategy = self.preprocessing.missing_value_strategy
        if strategy == "fill_with_mode":
            fill = self.fill_value(counts) in true_labels
        elif strategy == "fill_with_const" and self.preprocessing.fill_value is not None:
            fill = str(self.preprocessing.fill_value).lower() in TRUE_WORDS | {t.lower() for t in true_labels}
        else:
            fill = strategy == "fill_with_true"
        return {"true_labels": true_labels, "labels": labels, "fill_value": bool(fill)}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        # A value is true when it is one of training's true labels, or, when training never had it,
        # when it is a true word: data labelled yes/no scores against a model trained on 1/0 (as
        # in Ludwig). A value that is neither a training label nor a word has no meaning: refused.
        words = pc.utf8_lower(column)
        trained = pc.is_in(column, value_set=pa.array(metadata.get("labels", []), pa.string()))
        true_label = pc.is_in(column, value_set=pa.array(metadata["true_labels"], pa.string()))
        true_word = pc.is_in(words, value_set=pa.array(sorted(TRUE_WORDS), pa.string()))
        flags = pc.or_(true_label, pc.and_(pc.invert(trained), true_word))
        known = pc.or_(pc.or_(trained, true_label), pc.is_in(words, value_set=pa.array(sorted(TRUE_WORDS | FALSE_WORDS))))
        self._refuse_unknown(column, known, metadata)
        flags = pc.if_else(pc.is_valid(column), flags, None)
        return pc.fill_null(flags, metadata["fill_value"])

    def _refuse_unknown(self, column: pa.Array, known: pa.Array, metadata: dict) -> None:
        unknown = pc.filter(column, pc.and_(pc.is_valid(column), pc.invert(known)))
        if len(unknown) == 0:
            return
        values = pc.unique(unknown).to_pylist()
        shown = ", ".join(repr(v) for v in values[:5]) + (f" and {len(values) - 5} more" if len(values) > 5 else "")
        labels = ", ".join(repr(v) for v in metadata.get("labels", [])) or "none"
        raise DataError(
            f"binary feature {self.name!r}: column {self.column!r} has {shown}, which is neither a label of the "
            f"training data ({labels}) nor a boolean word; use those labels or true/false, yes/no, y/n, t/f, 1/0, on/off"
        )
