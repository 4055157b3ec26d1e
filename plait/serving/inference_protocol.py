"""The Open Inference Protocol (KServe v2), beside Ludwig's endpoints, so that KServe's and
Triton's clients can call a plait server as they call theirs.

A model is one named model (the model folder's name). A request's ``inputs`` are the model's
input columns as tensors: ``{"name": column, "shape": [rows] or [rows, n], "datatype": ...,
"data": [...]}``, the data row-major and flat or nested, as the protocol allows. Each row of the
tensors goes through the same checks as a ``/batch_predict`` row, and the answer's ``outputs`` are
the prediction columns ``/batch_predict`` gives (``<output>_predictions``, probabilities, ...), as
tensors: numbers as ``FP32``/``FP64``/``INT64``, flags as ``BOOL``, labels and text as ``BYTES``
(strings), a column of equal-length number lists as a ``[rows, n]`` tensor. ``outputs`` in the
request picks some of them. JSON only: the binary-data extension is not offered (a request that
uses it is refused, with the fix).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait.serving.payloads import Batch, ClientError, parse_json
from plait.serving.values import listed

INPUT_DATATYPES = {"number": "FP32", "binary": "BOOL", "vector": "FP32", "timeseries": "FP32", "h3": "INT64"}
"""The datatype a model's metadata gives an input of each feature type (default ``BYTES``: labels,
text, dates, and files as base64)."""

NUMERIC = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
           "BF16"}


def server_metadata(version: str) -> dict:
    return {"name": "plait", "version": version, "extensions": []}


def model_metadata(name: str, info: dict, output_datatypes: dict[str, tuple[str, list[int]]]) -> dict:
    """``GET /v2/models/{name}``: the model's inputs (its input columns) and outputs (its
    prediction columns), with their datatypes and shapes (-1: any number of rows)."""
    inputs = {}
    for feature in info["input_features"]:  # several features may read one column: it is one input
        inputs.setdefault(feature["column"], INPUT_DATATYPES.get(feature["type"], "BYTES"))
    return {"name": name, "versions": ["1"], "platform": "plait",
            "inputs": [{"name": column, "datatype": kind, "shape": [-1]} for column, kind in inputs.items()],
            "outputs": [{"name": column, "datatype": kind, "shape": shape}
                        for column, (kind, shape) in output_datatypes.items()]}


def parse_infer(body: bytes, content_type: str, max_rows: int) -> tuple[Batch, str | None, list[str] | None]:
    """A ``/v2/models/{name}/infer`` body as a batch of rows, the request's id, and the outputs
    it asks for (None: all)."""
    if content_type.startswith("application/octet-stream") or content_type.startswith("application/vnd"):
        raise ClientError(400, "this server takes the inference protocol's JSON body only (not the binary-data "
                               "extension): send the tensors' data as JSON lists")
    request = parse_json(body, content_type)
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list) or not request["inputs"]:
        raise ClientError(400, "an inference request is a JSON object with 'inputs': a list of tensors, each "
                               "{\"name\", \"shape\", \"datatype\", \"data\"}")
    columns: dict[str, list] = {}
    rows = None
    for i, tensor in enumerate(request["inputs"]):
        name, values = _input_rows(tensor, i)
        if name in columns:
            raise ClientError(400, f"the request has input {listed([name])} more than once")
        if rows is not None and len(values) != rows:
            raise ClientError(400, f"input {listed([name])} has {len(values)} rows and the inputs before it {rows}: "
                                   f"every input tensor's first dimension is the number of rows")
        columns[name], rows = values, len(values)
    if not rows:
        raise ClientError(400, "the request has no rows (every input's first dimension is 0)")
    if rows > max_rows:
        raise ClientError(413, f"the request has {rows} rows; this server takes at most {max_rows} per request "
                               f"(serve.max_batch_rows): split it")
    return Batch(columns, rows, None, records=True), _request_id(request), _requested_outputs(request)


def _input_rows(tensor: Any, i: int) -> tuple[str, list]:
    """One input tensor as a column of row values: a scalar per row, or a list per row for a
    ``[rows, n]`` tensor (a vector or a series)."""
    if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
        raise ClientError(400, f"inputs[{i}] must be an object with a 'name', a 'shape', a 'datatype' and 'data'")
    name, shape, datatype = tensor["name"], tensor.get("shape"), tensor.get("datatype")
    where = f"input {listed([name])}"
    if not isinstance(shape, list) or not shape or not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 2:
        raise ClientError(400, f"{where}: 'shape' must be [rows] or [rows, n] (non-negative integers), got {shape!r}")
    if not isinstance(datatype, str) or (datatype != "BYTES" and datatype not in NUMERIC):
        raise ClientError(400, f"{where}: 'datatype' {datatype!r} is not one of the protocol's (BYTES, BOOL, INT64, "
                               f"FP32, ...)")
    if "data" not in tensor:
        raise ClientError(400, f"{where} has no 'data'")
    flat = _flattened(tensor["data"])
    if len(flat) != math.prod(shape):
        raise ClientError(400, f"{where}: shape {shape} holds {math.prod(shape)} values, its data {len(flat)}")
    if len(shape) == 2 and shape[1] != 1:
        width = shape[1]
        return name, [flat[r * width:(r + 1) * width] for r in range(shape[0])]
    return name, flat


def _flattened(data: Any) -> list:
    """The protocol lets data be flat or nested as its shape: row-major, flat."""
    if not isinstance(data, list):
        raise ClientError(400, "a tensor's 'data' must be a JSON list")
    if not any(isinstance(v, list) for v in data):
        return data
    flat: list = []
    for value in data:
        flat.extend(_flattened(value) if isinstance(value, list) else [value])
    return flat


def _request_id(request: dict) -> str | None:
    value = request.get("id")
    return value if isinstance(value, str) else None


def _requested_outputs(request: dict) -> list[str] | None:
    outputs = request.get("outputs")
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs):
        raise ClientError(400, "'outputs' must be a list of objects with a 'name'")
    return [o["name"] for o in outputs]


def infer_response(model_name: str, request_id: str | None, predicted: dict[str, Any],
                   wanted: list[str] | None) -> dict:
    """The prediction columns as the protocol's output tensors."""
    unknown = [name for name in wanted or [] if name not in predicted]
    if unknown:
        raise ClientError(400, f"the model has no output(s) {listed(unknown)}; its outputs are {listed(list(predicted))}")
    names = wanted if wanted is not None else list(predicted)
    response = {"model_name": model_name, "model_version": "1",
                "outputs": [output_tensor(name, predicted[name]) for name in names]}
    if request_id is not None:
        response["id"] = request_id
    return response


def output_tensor(name: str, column: Any) -> dict:
    datatype, shape, data = _tensor_of(column)
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def output_datatype(column: Any) -> tuple[str, list[int]]:
    """The datatype and shape (-1 rows) of a prediction column, for the model's metadata."""
    datatype, shape, _ = _tensor_of(column)
    return datatype, [-1, *shape[1:]]


def _tensor_of(column: Any) -> tuple[str, list[int], list]:
    values = column if isinstance(column, np.ndarray) else np.asarray(column, dtype=object)
    rows = len(values)
    if values.dtype.kind == "b":
        return "BOOL", [rows], values.tolist()
    if values.dtype.kind in "iu":
        return "INT64", [rows], values.tolist()
    if values.dtype.kind == "f":
        return ("FP32" if values.dtype == np.float32 else "FP64"), [rows], values.tolist()
    items = values.tolist()
    for datatype, kinds in (("BOOL", (bool,)), ("INT64", (int,)), ("FP64", (int, float))):
        if items and all(isinstance(v, kinds) and (datatype == "BOOL" or not isinstance(v, bool)) for v in items):
            return datatype, [rows], items
    widths = {len(v) for v in items if isinstance(v, list)}
    if items and len(widths) == 1 and all(isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)
                                          for v in items):
        return "FP32", [rows, widths.pop()], [x for v in items for x in v]
    return "BYTES", [rows], [v if isinstance(v, str) or v is None else str(v) for v in items]
