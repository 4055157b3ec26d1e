"""H3 features: the 64-bit index as int64 (the runner reads hex strings too; a missing index is
-1, whose reserved bit no index sets) and its nineteen parts, each a BitShift and a BitwiseAnd
of the bits (plait.features.h3's bit layout). A missing index is the fill index. plait refuses
a value that is no valid H3 index; the graph takes its bits as they are."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input
from plait.export.onnx.graph import GraphBuilder
from plait.features.h3 import _FIELDS


@exports_input("h3", "int64")
def h3_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    missing = g.op("Less", raw, g.constant(0, np.int64))
    index = g.op("Where", missing, g.constant(meta["fill_value"], np.int64), raw)
    bits = g.op("Cast", g.op("Unsqueeze", index, g.constant([1])), to=TensorProto.UINT64)  # BitShift takes unsigned
    shifts, masks = zip(*_FIELDS)
    parts = g.op("BitwiseAnd", g.op("BitShift", bits, g.constant(shifts, np.uint64), direction="RIGHT"),
                 g.constant(masks, np.uint64))
    return g.op("Cast", parts, to=TensorProto.INT64)
