"""A small builder of ONNX graph pieces: named nodes and constants, with names that cannot clash
with the network's (every name it makes starts with ``plait/``)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ML_DOMAIN = "ai.onnx.ml"
"""LabelEncoder (vocabulary lookups) lives in ONNX's ML domain."""
LOCALE = "C.UTF-8"
"""StringNormalizer's locale: onnxruntime's default, en_US.UTF-8, is missing from many machines
and containers (onnxruntime then refuses to load the graph); glibc always has C.UTF-8."""


class GraphBuilder:
    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"plait/{hint}/{self._count}"

    def constant(self, value, dtype=None, hint: str = "const") -> str:
        """An initializer holding ``value`` (a scalar or an array; strings become a string tensor)."""
        array = np.asarray(value, dtype=dtype)
        if array.dtype.kind in "OU":
            tensor = helper.make_tensor(self.name(hint), TensorProto.STRING, array.shape,
                                        [str(v).encode("utf-8") for v in array.reshape(-1)])
        else:
            tensor = numpy_helper.from_array(array, self.name(hint))
        self.initializers.append(tensor)
        return tensor.name

    def op(self, op_type: str, *inputs: str, domain: str = "", outputs: int = 1, name: str | None = None,
           **attributes) -> str | list[str]:
        """One node; returns its output's name (a list of names when ``outputs`` > 1). ``name``
        gives the (single) output a chosen name: a graph output's."""
        names = [name] if name else [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, domain=domain, **attributes))
        return names[0] if outputs == 1 else names

    def label_encoder(self, value: str, keys: list, values: list, default) -> str:
        """A lookup: each element of ``value`` found in ``keys`` becomes the matching ``values``
        entry, any other ``default``. Key and value types are strings, int64 or floats."""
        return self.op("LabelEncoder", value, domain=ML_DOMAIN, **{
            f"keys_{_kind(keys)}": keys, f"values_{_kind(values)}": values,
            f"default_{_kind([default])[:-1]}": default})

    def lowercase(self, value: str) -> str:
        return self.op("StringNormalizer", value, case_change_action="LOWER", locale=LOCALE)

    def missing_numbers(self, value: str) -> str:
        """True where a double or float is NaN or infinite (what plait reads as missing)."""
        return self.op("Or", self.op("IsNaN", value), self.op("IsInf", value))


def _kind(values: list) -> str:
    """LabelEncoder's attribute suffix for a list of these values."""
    if all(isinstance(v, str) for v in values):
        return "strings"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return "int64s"
    return "floats"
