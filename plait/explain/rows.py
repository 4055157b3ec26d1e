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


def explained_classes(features: dict, output: str, every_class: bool) -> list[str] | None:
    """The classes each row is explained for when ``every_class`` (the output's vocabulary, or
    False and True for a binary output); None when each row is explained once (for its
    predicted class, or a number output's prediction)."""
    if not every_class or features[output]["type"] not in ("binary", "category"):
        return None
    return ["False", "True"] if features[output]["type"] == "binary" else list(features[output]["vocabulary"])


def explain_table(predictor, chunk: pa.Table, output: str, steps: int, every_class: bool, parts: bool = True
                  ) -> pa.Table:
    """A chunk's explanations by ``predictor`` (a built :class:`~plait.inference.Predictor`): a
    row per (input row, explained class), row by row (each row's classes together, in the
    vocabulary's order): the row's number in the chunk, the class, the score and the baseline's,
    the quadrature's delta, the steps and each input's attribution; with ``parts``, each text or
    sequence input's tokens and each image input's heat map (``parts.py``). Every input row gives
    the same number of rows, so numbers across chunks follow from the position alone."""
    predictor.check_columns(chunk.column_names, with_outputs=False)
    tensors = predictor.tensors(chunk, predictor.inputs)
    inputs = {name: tensor.to(predictor.device) for name, tensor in tensors.items()}
    classes = explained_classes(predictor.features, output, every_class)
    if classes is None:
        return _explained(predictor, inputs, output, None, steps, parts)
    rows = len(chunk)
    tables = [_explained(predictor, inputs, output, torch.full((rows,), c, dtype=torch.int64, device=predictor.device),
                         steps, parts) for c in range(len(classes))]
    by_row = np.arange(rows * len(classes)).reshape(len(classes), rows).T.ravel()
    return pa.concat_tables(tables).take(pa.array(by_row))


def _explained(predictor, inputs: dict[str, torch.Tensor], output: str, classes: torch.Tensor | None, steps: int,
               parts: bool) -> pa.Table:
    """One pass of integrated gradients over a chunk's rows, for ``classes`` (None: the predicted)."""
    types = {p.name: p.type for p in predictor.inputs}
    found = integrated_gradients(predictor.module, inputs, types, output, classes, steps)
    table = _table(found, explained_classes(predictor.features, output, True), types)
    if parts:
        for name, result in part_attributions(predictor.module, inputs, types, output, found, steps).items():
            columns = part_columns(name, types[name], result, inputs[name], predictor.features[name].get("vocabulary"))
            for column, values in columns.items():
                table = table.append_column(column, values)
    return table


class ChunkExplanations(ChunkFunction):
    """One chunk in, its explanations out (:func:`explain_table`)."""

    def __init__(self, spec: PredictorSpec, cached: bool, device: str, output: str, steps: int, every_class: bool,
                 parts: bool = True):
        super().__init__(spec, cached, device)
        self.output, self.steps, self.every_class, self.parts = output, steps, every_class, parts

    def __call__(self, chunk: pa.Table) -> pa.Table:
        return explain_table(self.predictor, chunk, self.output, self.steps, self.every_class, self.parts)


def _table(found: dict, labels: list[str] | None, types: dict[str, str]) -> pa.Table:
    rows = len(found["score"])
    classes = found["classes"]
    columns = {"row": np.arange(rows, dtype=np.int64),
               "class": (np.asarray(labels, dtype=object)[classes.cpu().numpy()].astype(str)
                         if classes is not None else np.full(rows, "prediction")),
               "score": found["score"].cpu().numpy(), "baseline_score": found["baseline_score"].cpu().numpy(),
               "delta": found["delta"].cpu().numpy(), "steps": found["steps"].cpu().numpy().astype(np.int32)}
    columns.update({f"{name}_attribution": found["attributions"][name].detach().cpu().numpy() for name in types})
    return pa.table(columns)
