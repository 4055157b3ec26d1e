"""``torch_export``: the network as a ``torch.export`` program (``model.pt2``), loadable with
``torch.export.load`` and run without plait's code. It takes the preprocessed tensors (one per
input feature, in ``export.json``'s order, the layouts of ``plait.data.tensors``) and returns
what each output head predicts; the preprocessing metadata is saved beside it."""

from __future__ import annotations

import json
from pathlib import Path

import plait
from plait.export.network import ExportedNetwork, example_tensors
from plait.models.saved import METADATA

PROGRAM_FILE = "model.pt2"


def refusals(model) -> list[str]:
    if model.config.model_type != "ecd":
        return [f"model_type {model.config.model_type!r}: torch_export writes ECD networks (model_type: ecd)"]
    return []


def write(model, folder: Path) -> None:
    import torch

    network = ExportedNetwork(model.module)
    examples = example_tensors(model.module, model.metadata["features"])
    rows = torch.export.Dim("rows", min=1)
    program = torch.export.export(network, examples, dynamic_shapes=(tuple({0: rows} for _ in examples),))
    torch.export.save(program, str(folder / PROGRAM_FILE))
    (folder / METADATA).write_text(json.dumps(model.metadata, indent=2))
    inputs = [{"feature": name, "dtype": str(t.dtype).removeprefix("torch."), "shape": ["rows", *t.shape[1:]]}
              for name, t in zip(network.inputs, examples)]
    outputs = [{"feature": name, "predicted": key} for name, key in network.outputs]
    description = {"format": "torch_export", "plait_version": plait.__version__, "program": PROGRAM_FILE,
                   "metadata": METADATA, "inputs": inputs, "outputs": outputs}
    (folder / "export.json").write_text(json.dumps(description, indent=2))
