"""The network as the exporters see it: tensors in, each output's predictions out.

:class:`ExportedNetwork` wraps a trained ECD module so that it takes one tensor per input
feature, positionally (ONNX and ``torch.export`` have no dict inputs), and returns what each
output head's ``predict`` gives (labels, probabilities, numbers), flattened in ``outputs`` order.
:func:`example_tensors` makes the inputs an export traces with: zeros in each feature's tensor
layout (``plait.data.tensors``), two rows, the row dimension left dynamic.
"""

from __future__ import annotations

import torch
from torch import nn

from plait.data.tensors import PARTS

EXAMPLE_ROWS = 2
"""Rows of the traced example: more than one, so that no exporter specializes the row count to 1."""


class ExportedNetwork(nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        self.inputs = list(module.input_names)
        no_rows = module.no_rows_outputs("cpu")  # each head's predict keys, found by running it on no rows
        self.outputs = [(name, key) for name in module.output_names
                        for key in sorted(module.head(name).predict(no_rows[name]))]
        """(output feature, key of its head's ``predict``) for each tensor ``forward`` returns."""
        self.eval()  # what prediction runs: no dropout, running statistics

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = self.module(dict(zip(self.inputs, tensors)))
        predicted = {name: self.module.head(name).predict(logits[name]) for name in self.module.output_names}
        return tuple(predicted[name][key] for name, key in self.outputs)


def example_tensors(module: nn.Module, features: dict) -> tuple[torch.Tensor, ...]:
    """Zeros in the tensor layout of each input of ``module`` (``features``: the preprocessing
    metadata per feature), in the order :class:`ExportedNetwork` takes them."""
    return tuple(example_tensor(features[name]) for name in module.input_names)


def example_tensor(meta: dict) -> torch.Tensor:
    kind, rows = meta["type"], EXAMPLE_ROWS
    if kind in ("number", "binary"):
        return torch.zeros(rows)
    if kind == "category":
        return torch.zeros(rows, dtype=torch.int64)
    if kind in PARTS:
        return torch.zeros(rows, PARTS[kind], dtype=torch.int64)
    if kind == "vector":
        return torch.zeros(rows, meta["vector_size"])
    if kind in ("set", "bag"):
        return torch.zeros(rows, max(1, len(meta["vocabulary"])))
    if kind == "text":
        return torch.zeros(rows, meta["sequence_length"], dtype=torch.int64)
    if kind == "image":
        return torch.zeros(rows, meta["num_channels"], meta["height"], meta["width"], dtype=torch.uint8)
    raise ValueError(f"no example tensor for feature type {kind!r}")
