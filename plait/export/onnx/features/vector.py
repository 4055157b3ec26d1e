"""Vector features: the space-separated numbers plait reads (the runner writes a list or an
array so), split by StringSplit and read by Cast as double, then float, as plait reads them. A
missing cell, one of another length (which plait refuses), or one holding a number that is not
finite in float is the fill vector. A vector output's predictions are a float matrix [rows,
size] (plait predict: a list per row)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input, exports_output
from plait.export.onnx.graph import GraphBuilder

FLOAT32_MAX = float(np.finfo(np.float32).max)


def vector_reader(meta: dict, feature) -> dict:
    return {"reader": "vector"}


@exports_input("vector", "string", reader=vector_reader)
def vector_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    size = meta["vector_size"]
    pieces, counts = g.op("StringSplit", raw, outputs=2)  # on whitespace, leading and trailing ignored
    # At least ``size`` columns: a batch of short or missing vectors gives fewer.
    padding = g.op("Expand", g.constant([[""]]), g.op("Concat", g.op("Shape", raw), g.constant([size]), axis=0))
    pieces = g.op("Slice", g.op("Concat", pieces, padding, axis=1), g.constant([0]), g.constant([size]),
                  g.constant([1]))
    numbers = g.op("Cast", g.op("Where", g.op("Equal", pieces, g.constant("")), g.constant("0"), pieces),
                   to=TensorProto.DOUBLE)
    with_bad = g.op("Not", g.op("LessOrEqual", g.op("Abs", numbers), g.constant(FLOAT32_MAX, np.float64)))  # NaN too
    bad_rows = g.op("ReduceMax", g.op("Cast", with_bad, to=TensorProto.INT64), g.constant([1]), keepdims=0)
    usable = g.op("And", g.op("Equal", counts, g.constant(size, np.int64)),
                  g.op("Equal", bad_rows, g.constant(0, np.int64)))
    return g.op("Where", g.op("Unsqueeze", usable, g.constant([1])), g.op("Cast", numbers, to=TensorProto.FLOAT),
                g.constant(np.asarray(meta["fill_value"], np.float32)))


@exports_output("vector")
def vector_output(g: GraphBuilder, predicted: dict[str, str], meta: dict, feature) -> dict[str, str]:
    return {f"{feature.name}_predictions": predicted["prediction"]}
