"""Vector features: fixed-size numeric vectors, given as lists or space-separated strings."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import fixed_size_list


class VectorProcessor(FeatureProcessor):
    type = "vector"
    reads_nested = True  # lists of numbers; prepare refuses structs and the like itself

    def prepare(self, column: pa.Array) -> pa.Array:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(column))
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or pa.types.is_fixed_size_list(column.type)):
            raise DataError(
                f"vector feature {self.name!r}: column {self.column!r} has type {column.type}; "
                f"vectors must be lists of numbers or strings of space-separated numbers"
            )
        try:
            vectors = column.cast(pa.list_(pa.float64()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(f"vector feature {self.name!r}: column {self.column!r} holds non-numbers: {exc}") from None
        return _missing_unless_finite(vectors)

    def partial_stats(self, column: pa.Array) -> dict:
        valid = pc.drop_null(column)
        lengths = pc.list_value_length(valid).to_numpy()
        sizes = set(np.unique(lengths).tolist())
        sums = None
        if self.preprocessing.missing_value_strategy == "fill_with_mean" and len(sizes) == 1:
            matrix = pc.list_flatten(valid).to_numpy().reshape(len(valid), -1)
            sums = [st.exact_sum(matrix[:, i]) for i in range(matrix.shape[1])]
        return {"sizes": sizes, "count": len(valid), "sums": sums}

    def merge_stats(self, a: dict, b: dict) -> dict:
        sums = None
        if a["sums"] is not None and b["sums"] is not None and len(a["sums"]) == len(b["sums"]):
            sums = [x + y for x, y in zip(a["sums"], b["sums"])]
        else:
            sums = a["sums"] if b["count"] == 0 else b["sums"] if a["count"] == 0 else None
        return {"sizes": a["sizes"] | b["sizes"], "count": a["count"] + b["count"], "sums": sums}

    def finalize(self, stats: dict) -> dict:
        expected = self.preprocessing.vector_size
        sizes = sorted(stats["sizes"])
        if expected is None and len(sizes) > 1:
            raise DataError(
                f"vector feature {self.name!r}: vectors in column {self.column!r} have different "
                f"lengths ({', '.join(map(str, sizes[:5]))}); set preprocessing.vector_size"
            )
        size = expected or (sizes[0] if sizes else 1)
        if self.preprocessing.missing_value_strategy == "fill_with_mean" and stats["sums"]:
            fill = [float(s / stats["count"]) for s in stats["sums"]]
        else:
            fill = self.preprocessing.fill_vector(size)
        if len(fill) != size:
            raise DataError(
                f"vector feature {self.name!r}: preprocessing.fill_value {self.preprocessing.fill_value!r} has "
                f"{len(fill)} numbers, but the vectors have {size}; give {size} numbers or one number"
            )
        return {"vector_size": size, "fill_value": fill}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        size = metadata["vector_size"]
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        if np.any(valid & (lengths != size)):
            bad = int(np.flatnonzero(valid & (lengths != size))[0])
            raise DataError(
                f"vector feature {self.name!r}: a vector in column {self.column!r} has "
                f"{int(lengths[bad])} values, expected {size}"
            )
        matrix = np.tile(np.asarray(metadata["fill_value"], dtype=np.float32), (len(column), 1))
        if valid.any():
            matrix[valid] = pc.list_flatten(pc.drop_null(column)).to_numpy().reshape(-1, size)
        return fixed_size_list(matrix, pa.float32())


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _missing_unless_finite(vectors: pa.Array) -> pa.Array:
    """A vector holding NaN, an infinity, a null or a number beyond float32 (the model reads
    float32: 1e300 would reach it as inf) is a missing value, as such a number is for a number
    feature, so that the feature's missing_value_strategy applies to it. Given to the model, one
    such value makes every probability NaN beside a confident-looking label."""
    values = pc.list_flatten(vectors).to_numpy(zero_copy_only=False)  # nulls read as NaN
    with np.errstate(invalid="ignore"):
        bad_values = ~(np.abs(values) <= FLOAT32_MAX)
    if not bad_values.any():
        return vectors
    bad_rows = np.zeros(len(vectors), dtype=bool)
    bad_rows[pc.list_parent_indices(vectors).to_numpy(zero_copy_only=False)[bad_values]] = True
    return pc.if_else(pa.array(bad_rows), pa.scalar(None, vectors.type), vectors)
