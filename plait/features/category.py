"""Category features: a vocabulary of the most common values and an unknown token (inputs)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings

UNKNOWN = "<UNK>"


class CategoryProcessor(FeatureProcessor):
    type = "category"

    def prepare(self, column: pa.Array) -> pa.Array:
        strings = as_strings(column)
        return pc.utf8_lower(strings) if self.preprocessing.lowercase else strings

    def partial_stats(self, column: pa.Array):
        return st.value_counts(column)

    def merge_stats(self, a, b):
        return st.merge_counts(a, b)

    def finalize(self, counts) -> dict:
        limit = self.preprocessing.most_common
        if self.is_output:
            vocab = [str(v) for v in st.most_common(counts, limit)]
        else:
            vocab = [UNKNOWN] + [str(v) for v in st.most_common(counts, limit) if v != UNKNOWN]
        frequencies = {str(k): int(v) for k, v in counts.items()} if counts is not None else {}
        return {
            "vocabulary": vocab,
            "frequencies": [frequencies.get(v, 0) for v in vocab],
            "fill_value": self.fill_value(counts),
        }

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        column = self.fill(column, metadata["fill_value"])
        index = pc.index_in(column, value_set=pa.array(metadata["vocabulary"], pa.string()))
        # Inputs map unseen values to <UNK> (index 0); outputs mark them -1 (ignored by the loss).
        return pc.fill_null(index, -1 if self.is_output else 0).cast(pa.int32())
