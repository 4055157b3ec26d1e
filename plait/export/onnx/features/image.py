"""Image inputs: the raw input is the decoded pixels, uint8 [rows, height, width, channels] (the
caller decodes the files: numpy alone cannot), with the model's channels. The graph lays them
out as ``plait.data.tensors`` does, uint8 [rows, channels, height, width]; standardization
(``standardize_image``) is the model's first step, so it is inside the network already.

Images of the model's size are exact. Another size is brought to it as plait's
``resize_method`` says: ``interpolate`` by ONNX Resize (linear, half-pixel centres, antialiased
when shrinking, rounded), which is close to Pillow's bilinear resize plait uses but not equal to
it: measured on 3-channel images brought to 16 x 16, enlarged ones within 1 level of 255, shrunk
smooth ones within 5 (64 x 64, a quarter), shrunk noise up to 13 (Pillow filters in two passes
of 8-bit fixed point, ONNX in one of floats); ``crop_or_pad`` by the centre crop and edge padding of
``plait.features.image_ops.crop_or_pad``, exactly; with no resize method a batch of another size
is refused by onnxruntime (plait refuses such images too). A batch holds images of one size.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input
from plait.export.onnx.graph import GraphBuilder


@exports_input("image", "uint8", ("height", "width", "channels"))
def image_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    height, width = meta["height"], meta["width"]
    if meta.get("resize_method") == "interpolate":
        raw = _interpolated(g, raw, height, width)
    elif meta.get("resize_method") == "crop_or_pad":
        raw = _cropped_or_padded(g, raw, height, width)
    return g.op("Transpose", raw, perm=[0, 3, 1, 2])


def _interpolated(g: GraphBuilder, pixels: str, height: int, width: int) -> str:
    shape = g.op("Shape", pixels)
    sizes = g.op("Concat", g.op("Slice", shape, g.constant([0]), g.constant([1])), g.constant([height, width], np.int64),
                 g.op("Slice", shape, g.constant([3]), g.constant([4])), axis=0)
    resized = g.op("Resize", g.op("Cast", pixels, to=TensorProto.FLOAT), "", "", sizes, mode="linear",
                   coordinate_transformation_mode="half_pixel", antialias=1)
    return g.op("Cast", g.op("Clip", g.op("Round", resized), g.constant(0.0, np.float32), g.constant(255.0, np.float32)),
                to=TensorProto.UINT8)


def _cropped_or_padded(g: GraphBuilder, pixels: str, height: int, width: int) -> str:
    """The centre ``height`` x ``width``, edge pixels repeated where an image is smaller."""
    i64 = lambda v: g.constant(v, np.int64)  # noqa: E731
    size = g.op("Slice", g.op("Shape", pixels), i64([1]), i64([3]))  # [height, width] of the batch
    target = i64([height, width])
    start = g.op("Div", g.op("Max", g.op("Sub", size, target), i64([0, 0])), i64(2))
    cropped = g.op("Slice", pixels, start, g.op("Add", start, target), i64([1, 2]))
    short = g.op("Max", g.op("Sub", target, size), i64([0, 0]))
    before = g.op("Div", short, i64(2))
    after = g.op("Sub", short, before)
    zero = i64([0])
    pads = g.op("Concat", zero, before, zero, zero, after, zero, axis=0)
    return g.op("Pad", cropped, pads, mode="edge")
