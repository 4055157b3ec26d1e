"""Number features: plait.features.number's fill, training range, outliers and normalization, in
double precision as there, then narrowed to float as the model reads it."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input, exports_output
from plait.export.onnx.graph import GraphBuilder


@exports_input("number", "double")
def number_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    fill = meta["fill_value"]
    present = raw
    if "clip" in meta:
        low, high = (g.constant(bound, np.float64) for bound in meta["clip"])
        present = g.op("Min", g.op("Max", raw, low), high)
    values = g.op("Where", g.missing_numbers(raw), g.constant(fill, np.float64), present)
    outliers = meta.get("outliers")
    if outliers and outliers["strategy"] != "drop_row":  # drop_row drops training rows; prediction keeps them
        spread = meta["std"] if meta["std"] > 0 else 1.0
        far = g.op("Greater", g.op("Abs", g.op("Sub", values, g.constant(meta["mean"], np.float64))),
                   g.constant(outliers["threshold"] * spread, np.float64))
        values = g.op("Where", far, g.constant(outliers["fill_value"], np.float64), values)
    if meta["normalization"] == "log1p":
        # log(1 + x): plait's numpy log1p agrees to the last bit or two, not exactly, for tiny x.
        values = g.op("Log", g.op("Add", values, g.constant(1.0, np.float64)))
        fill = math.log1p(fill) if fill > -1 else 0.0
    if meta["normalization"] == "quantile":
        values = _quantile_scores(g, values, meta["quantile_values"], meta["quantile_scores"])
        fill = float(np.interp(fill, meta["quantile_values"], meta["quantile_scores"]))
    shift, scale = g.constant(meta["shift"], np.float64), g.constant(meta["scale"], np.float64)
    values = g.op("Cast", g.op("Div", g.op("Sub", values, shift), scale), to=TensorProto.FLOAT)
    # A value finite in double but not in float is missing, as in plait.features.number.
    narrowed_fill = np.float32((fill - meta["shift"]) / meta["scale"])
    narrowed_fill = narrowed_fill if np.isfinite(narrowed_fill) else np.float32(0.0)
    return g.op("Where", g.missing_numbers(values), g.constant(narrowed_fill, np.float32), values)


def _quantile_scores(g: GraphBuilder, values: str, knots: list[float], scores: list[float]) -> str:
    """np.interp(values, knots, scores) as ONNX ops: the first score plus, for each segment between
    two knots, its slope times how far into the segment the value lies (none before it, all of it
    after), so the values below the first knot or above the last get the end scores."""
    if len(knots) == 1:
        return g.op("Add", g.op("Mul", values, g.constant(0.0, np.float64)), g.constant(scores[0], np.float64))
    knots_, scores_ = np.asarray(knots, np.float64), np.asarray(scores, np.float64)
    widths = np.diff(knots_)
    column = g.op("Unsqueeze", values, g.constant([-1], np.int64))
    into = g.op("Sub", column, g.constant(knots_[:-1], np.float64))
    covered = g.op("Min", g.op("Max", into, g.constant(0.0, np.float64)), g.constant(widths, np.float64))
    rise = g.op("MatMul", covered, g.constant(np.diff(scores_) / widths, np.float64))
    return g.op("Add", rise, g.constant(scores_[0], np.float64))


@exports_output("number")
def number_output(g: GraphBuilder, predicted: dict[str, str], meta: dict, feature) -> dict[str, str]:
    return {f"{feature.name}_predictions": predicted["prediction"]}
