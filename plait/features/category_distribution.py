"""Category distribution outputs: each row a probability distribution over the same classes (soft
labels), given as a list of numbers or a string of space-separated ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features.text_ops import fixed_size_list
from plait.features.vector import VectorProcessor


class CategoryDistributionProcessor(VectorProcessor):
    type = "category_distribution"

    def partial_stats(self, column: pa.Array) -> dict:
        valid = pc.drop_null(column)
        return {"sizes": set(np.unique(pc.list_value_length(valid).to_numpy()).tolist()), "count": len(valid), "sums": None}

    def finalize(self, stats: dict) -> dict:
        sizes = sorted(stats["sizes"])
        vocabulary = self.preprocessing.vocab
        if len(sizes) > 1 or (vocabulary is not None and sizes and sizes != [len(vocabulary)]):
            expected = f"{len(vocabulary)} (one per class of preprocessing.vocab)" if vocabulary else "one length"
            raise DataError(f"category_distribution feature {self.name!r}: the distributions in column {self.column!r} "
                            f"have {', '.join(map(str, sizes[:5]))} values, expected {expected}")
        size = sizes[0] if sizes else len(vocabulary or [None])
        return {"vector_size": size, "vocabulary": list(vocabulary) if vocabulary else [str(i) for i in range(size)],
                "fill_value": [1.0 / size] * size}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        """The rows as distributions: each divided by its sum, so that counts or unnormalized
        scores are read as the distribution they stand for."""
        matrix = np.asarray(pc.list_flatten(super().transform(column, metadata)).to_numpy()).reshape(len(column), metadata["vector_size"])
        totals = matrix.sum(axis=1, keepdims=True)
        bad = np.flatnonzero((matrix < 0).any(axis=1) | ~np.isfinite(totals[:, 0]) | (totals[:, 0] <= 0))
        if bad.size:
            raise DataError(f"category_distribution feature {self.name!r}: {bad.size} row(s) of column {self.column!r} "
                            f"are not distributions (a negative value, or nothing above 0), such as "
                            f"{matrix[bad[0]].tolist()}; give non-negative numbers with a positive sum")
        return fixed_size_list((matrix / totals).astype(np.float32), pa.float32())
