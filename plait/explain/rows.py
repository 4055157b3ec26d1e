"""Explaining chunks of rows: the batch function a backend maps over the data (in this process,
or as a Ray Data job), as prediction's are (``plait.inference``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from plait.errors import UsageError
from plait.explain.integrated_gradients import integrated_gradients
from plait.explain.parts import part_attributions, part_columns
from plait.inference import ChunkFunction, PredictorSpec

EXPLAINED_OUTPUT_TYPES = ("binary", "category", "number")


def check_output(spec_config: dict, output_feature_name: str | None) -> str:
    """The output to explain: the one named, else the first; an output whose score is not one
    number per row is refused with the ones that can be explained."""
    outputs = {f["name"]: f["type"] for f in spec_config["output_features"]}
    name = output_feature_name or next(iter(outputs))
    if name not in outputs:
        raise UsageError(f"--output_feature_name {name!r} is not an output of this model; its outputs are "
                         f"{', '.join(outputs)}")
    if outputs[name] not in EXPLAINED_OUTPUT_TYPES:
        raise UsageError(f"output feature {name!r} is of type {outputs[name]}; explanations cover "
                         f"{', '.join(EXPLAINED_OUTPUT_TYPES)} outputs")
    return name


class ChunkExplanations(ChunkFunction):
    """One chunk in; out, a row per (input row, explained class): the row's number in the chunk,
    the class, the score and the baseline's, the quadrature's delta and each input's attribution;
    with ``parts``, each text or sequence input's tokens and image input's heat map (``parts.py``)."""

    def __init__(self, spec: PredictorSpec, cached: bool, device: str, output: str, steps: int, every_class: bool,
                 parts: bool = True):
        super().__init__(spec, cached, device)
        self.output, self.steps, self.every_class, self.parts = output, steps, every_class, parts
        self.types = {p.name: p.type for p in self.predictor.inputs}
        self.labels = self.predictor.features[output].get("vocabulary")
        if self.predictor.features[output]["type"] == "binary":
            self.labels = ["False", "True"]

    def __call__(self, chunk: pa.Table) -> pa.Table:
        self.predictor.check_columns(chunk.column_names, with_outputs=False)
        tensors = self.predictor.tensors(chunk, self.predictor.inputs)
        inputs = {name: tensor.to(self.predictor.device) for name, tensor in tensors.items()}
        if not self.every_class or self.labels is None:
            return self._explained(inputs, None)
        rows = len(chunk)
        return pa.concat_tables([self._explained(inputs, torch.full((rows,), c, dtype=torch.int64,
                                                                     device=self.predictor.device))
                                 for c in range(len(self.labels))])

    def _explained(self, inputs: dict[str, torch.Tensor], classes: torch.Tensor | None) -> pa.Table:
        module = self.predictor.module
        found = integrated_gradients(module, inputs, self.types, self.output, classes, self.steps)
        table = self._table(found)
        if self.parts:
            for name, result in part_attributions(module, inputs, self.types, self.output, found, self.steps).items():
                columns = part_columns(name, self.types[name], result, inputs[name],
                                       self.predictor.features[name].get("vocabulary"))
                for column, values in columns.items():
                    table = table.append_column(column, values)
        return table

    def _table(self, found: dict) -> pa.Table:
        rows = len(found["score"])
        classes = found["classes"]
        columns = {"row": np.arange(rows, dtype=np.int64),
                   "class": (np.asarray(self.labels, dtype=object)[classes.cpu().numpy()].astype(str)
                             if classes is not None else np.full(rows, "prediction")),
                   "score": found["score"].cpu().numpy(), "baseline_score": found["baseline_score"].cpu().numpy(),
                   "delta": found["delta"].cpu().numpy(), "steps": found["steps"].cpu().numpy().astype(np.int32)}
        columns.update({f"{name}_attribution": found["attributions"][name].detach().cpu().numpy()
                        for name in self.types})
        return pa.table(columns)
