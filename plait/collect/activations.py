"""collect_activations: what named layers of a trained model output on a dataset's rows.

The layers are hooked in the model that predicts, so the work runs where the backend maps
batches (here, or as a Ray Data job on Ray, one model per actor) and each batch comes back as a
table of one flattened row per data row and layer; the driver stacks them into one array per
layer, in the dataset's order.
"""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from plait.collect.weights import unknown_names
from plait.errors import ModelError, UsageError
from plait.inference import ChunkFunction, reading_from
from plait.inference.predictor import PredictorSpec

SHAPES = "__plait_activation_shapes__"
"""The column of each layer's output shape per row (JSON; the same on every row of a table): a
column, not schema metadata, which Ray Data's blocks need not keep."""


def collect_activations(model, layers: list[str], dataset: Any, split: str = "full",
                        batch_size: int | None = None, random_seed: int | None = None) -> list[tuple[str, np.ndarray]]:
    """``(layer, array)`` for each layer: its output for every row of ``dataset`` (``[rows,
    ...]``, float32). ``split`` (training, validation, test) keeps the rows the model's split
    put there with ``random_seed`` (default: the seed it trained with), as ``evaluate`` does.
    A layer's output is its first tensor (of a tuple or a model output) on its first call in
    each forward pass (an LLM's: the pass over the prompt, before any token is generated)."""
    model.require_trained()
    known = [name for name, _ in model.module.named_modules() if name]
    unknown = [name for name in layers if name not in known]
    if unknown:
        raise UsageError(f"--layers: {unknown_names(unknown, known)}; plait collect_summary -m MODEL lists every "
                         f"layer's name")
    backend, source, cached = model.rows_of_split(dataset, split, random_seed)
    spec = reading_from(model.predictor_spec(), dataset)
    make = partial(_make, spec, cached, tuple(layers), batch_size)
    tables = list(backend.map_batches(source, make, ordered=True, what="activation collection"))
    return [(name, _stacked(tables, name)) for name in layers]


def _make(spec: PredictorSpec, cached: bool, layers: tuple[str, ...], batch_size: int | None,
          device: str) -> ChunkActivations:
    return ChunkActivations(spec, cached, device, layers, batch_size)


class ChunkActivations(ChunkFunction):
    """One chunk in, each layer's output per row out (one fixed-size list column per layer)."""

    def __init__(self, spec: PredictorSpec, cached: bool, device: str, layers: tuple[str, ...],
                 batch_size: int | None):
        super().__init__(spec, cached, device)
        self.layers, self.batch_size = layers, batch_size or self.predictor.batch_size
        self.outputs: dict[str, list[torch.Tensor]] = {}
        self.called: set[str] = set()
        modules = dict(self.predictor.module.named_modules())
        for name in layers:
            modules[name].register_forward_hook(partial(self._keep, name))

    def _keep(self, name: str, module, inputs, output) -> None:
        if name in self.called:  # a later call in the same pass (a generation step)
            return
        self.called.add(name)
        self.outputs[name].append(_first_tensor(output, name).detach().float().cpu())

    @torch.no_grad()
    def __call__(self, chunk: pa.Table) -> pa.Table:
        predictor = self.predictor
        predictor.check_columns(chunk.column_names, with_outputs=False)
        # Whole padded widths, not trimmed to each batch's longest row: every row's output has
        # one shape, so batches stack.
        inputs = predictor.tensors(chunk, predictor.inputs)
        self.outputs = {name: [] for name in self.layers}
        for start in range(0, chunk.num_rows, self.batch_size):
            self.called = set()
            predictor.module({k: v[start:start + self.batch_size].to(predictor.device) for k, v in inputs.items()})
        columns, shapes = {}, {}
        for name in self.layers:
            parts = self.outputs[name]
            values = torch.cat(parts) if parts else torch.zeros(0)
            shapes[name] = list(values.shape[1:])
            flat = pa.array(values.reshape(len(values), -1).numpy().ravel(), pa.float32())
            columns[name] = pa.FixedSizeListArray.from_arrays(flat, max(1, math.prod(shapes[name])))
        columns[SHAPES] = pa.array([json.dumps(shapes)] * chunk.num_rows, pa.string())
        return pa.table(columns)


def _first_tensor(output: Any, name: str) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
    raise ModelError(f"--layers: layer {name!r} outputs no tensor ({type(output).__name__}); pick a layer inside it")


def _stacked(tables: list[pa.Table], name: str) -> np.ndarray:
    shapes = {tuple(json.loads(t[SHAPES][0].as_py())[name]) for t in tables if t.num_rows}
    if len(shapes) > 1:
        raise ModelError(f"--layers: layer {name!r} outputs different shapes for different rows "
                         f"({', '.join(str(list(s)) for s in sorted(shapes))}); collect a layer whose output has one "
                         f"shape per row")
    shape = shapes.pop() if shapes else ()
    parts = [t[name].combine_chunks().flatten().to_numpy() for t in tables if t.num_rows]
    flat = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return flat.reshape(-1, *shape).astype(np.float32, copy=False)
