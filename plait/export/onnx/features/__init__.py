"""What each feature type becomes in an exported ONNX graph: one module per type.

An input type registers an :class:`InputExport`: the raw column the graph takes (its element
type and the dimensions after the row's) and ``build``, the ONNX nodes that give from it exactly
the tensor plait's preprocessing gives (``plait.features.<type>`` then ``plait.data.tensors``).
An output type registers a function from the head's predicted tensors (``predict``'s keys) to
the columns ``plait predict`` writes, named as it names them. A type with no entry here is
refused by name before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from onnx import TensorProto

from plait.export.onnx.graph import GraphBuilder

RAW_TYPES = {"double": TensorProto.DOUBLE, "string": TensorProto.STRING, "int64": TensorProto.INT64,
             "uint8": TensorProto.UINT8}
"""The element types of raw columns, by the name export.json gives them."""


@dataclass(frozen=True)
class InputExport:
    raw_type: str
    """A key of RAW_TYPES: the element type the graph takes this feature's column in."""
    build: Callable[[GraphBuilder, str, dict, object], str]
    """(graph, raw column's tensor name, feature metadata, feature config) -> the model-ready tensor's name."""
    raw_dimensions: tuple[str, ...] = ()
    """Symbolic dimensions after the row's (an image's height, width and channels)."""
    refuse: Callable[[dict, object], list[str]] | None = None
    """(feature metadata, feature config) -> why the graph cannot hold this feature (none: it can)."""
    reader: Callable[[dict, object], dict] | None = None
    """(feature metadata, feature config) -> what the runner needs to write the column, beyond its
    element type (its ``reader`` in ``plait_onnx.READERS`` and that reader's settings), which
    export.json carries; none: the element type's plain coercion."""


OutputBuild = Callable[[GraphBuilder, dict[str, str], dict, object], dict[str, str]]
"""(graph, predicted tensor name per ``predict`` key, feature metadata, feature config) ->
{column name: tensor name}, the columns of ``plait predict`` in its order."""

INPUTS: dict[str, InputExport] = {}
OUTPUTS: dict[str, OutputBuild] = {}


def exports_input(feature_type: str, raw_type: str, raw_dimensions: tuple[str, ...] = (), refuse=None, reader=None):
    def register(build):
        INPUTS[feature_type] = InputExport(raw_type, build, raw_dimensions, refuse, reader)
        return build
    return register


def exports_output(feature_type: str):
    def register(build):
        OUTPUTS[feature_type] = build
        return build
    return register


from plait.export.onnx.features import bag, binary, category, date, h3, image, number, set, text, vector  # noqa: E402,F401  (they register)
