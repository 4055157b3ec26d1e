"""Applying a trained model to data: the saved preprocessing, the model, the user-facing columns.

:class:`PredictorSpec` is what travels: a small picklable description of a trained model (its
resolved config, preprocessing metadata and either its weights or the folder it was saved in).
Any process rebuilds a :class:`Predictor` from it, a Ray Data actor or a serving replica as well
as this one, without the public API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from plait.errors import DataError, ModelError
from plait.features import hf_tokens
from plait.features.base import check_unique_columns
from plait.features.text_ops import row_lists
from plait.features.llm_labels import category_columns
from plait.models.labels import LABEL_PROBABILITIES
from plait.data.tensors import table_tensors, trim_padding

BATCH_ROWS = 8192
"""Rows per forward pass: large enough to keep the cores busy, small enough for any model."""


@dataclass(frozen=True)
class PredictorSpec:
    """A trained model as data: rebuilt with :meth:`build` wherever it is needed."""

    config: dict
    """The resolved config (``resolved_dict``)."""
    metadata: dict
    """The preprocessing metadata the model was trained with."""
    weights: dict | None = None
    """The weights, for a model not saved yet; else they are read from ``model_dir``."""
    model_dir: str | None = None
    data_directory: str | None = None
    """Where relative file paths (images, audio) in the data are read from: the dataset's folder."""
    key_column: str | None = None
    """A column of the data copied in front of the predictions (the paths of a folder of images)."""

    def build(self, device: str = "cpu", cached: bool = False) -> "Predictor":
        from plait.config import load_config
        from plait.models import build_model
        from plait.models.saved import WEIGHTS, load_weights_into

        config = load_config(self.config)
        module = build_model(config, self.metadata)
        if self.weights is not None:
            load_weights_into(module, self.weights, "the model's weights")
        else:
            load_weights_into(module, self._saved_weights(), f"the weights ({WEIGHTS}) of the model at {self.model_dir!r}")
        return Predictor(config, self.metadata, module, device=device, cached=cached,
                         data_directory=self.data_directory, key_column=self.key_column)

    def _saved_weights(self) -> dict:
        from plait.models.saved import read_model

        if self.model_dir is None:
            raise ModelError("a predictor needs the model's weights or the folder it was saved in")
        return read_model(self.model_dir)[2]


def predicting_processors(config, data_directory: str | None = None) -> list:
    """The processors of the features a predictor reads (not those read only to train)."""
    from plait.features import processors_for

    return [p for p in processors_for(config, data_directory) if not p.training_only]


class Predictor:
    """Applies saved preprocessing and a model to chunks of raw data (or, ``cached``, to rows of
    the preprocessing cache: features already transformed, columns named after the features)."""

    def __init__(self, config, metadata: dict, module: torch.nn.Module, device: str = "cpu", cached: bool = False,
                 batch_size: int = BATCH_ROWS, data_directory: str | None = None, key_column: str | None = None):
        """``data_directory`` and ``key_column``: see :class:`PredictorSpec`."""
        self.config, self.cached, self.device = config, cached, device
        self.features = metadata["features"]
        self.processors = predicting_processors(config, data_directory)
        self.inputs = [p for p in self.processors if not p.is_output]
        self.outputs = [p for p in self.processors if p.is_output]
        self.module = module.to(device).eval()
        self.batch_size = module.prediction_batch_rows or batch_size  # an LLM generates in smaller batches
        self.key_column = key_column

    def column(self, processor) -> str:
        """Where a feature is in the tables: its raw column, or, in cached rows, its name."""
        return processor.name if self.cached else processor.column

    def check_columns(self, columns: list[str], with_outputs: bool) -> None:
        wanted = self.processors if with_outputs else self.inputs
        if not self.cached:
            check_unique_columns(columns, wanted, "the data")
        # dict: once each, in order (two features may read one column).
        missing = list(dict.fromkeys(column for p in wanted for column in ([p.name] if self.cached else p.columns)
                                     if column not in columns))
        if missing:
            self.missing_columns_error(missing, columns, with_outputs)

    @staticmethod
    def missing_columns_error(missing: list[str], columns: list[str], with_outputs: bool):
        raise DataError(
            f"the data lacks column(s) {', '.join(repr(m) for m in missing)} that this model needs "
            f"({'input and output' if with_outputs else 'input'} features). Its columns are: {', '.join(columns)}"
        )

    def tensors(self, table: pa.Table, processors) -> dict[str, torch.Tensor]:
        """The features of ``processors`` as model tensors (transformed unless already cached)."""
        if self.cached:
            return table_tensors(table, self.features, [p.name for p in processors])
        columns = {}
        for p in processors:
            columns[p.name] = p.transform(p.prepare_raw(p.read(table)), self.features[p.name])
        return table_tensors(pa.table(columns), self.features, list(columns))

    @torch.no_grad()
    def logits(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model's outputs for ``inputs``, in batches, back on the CPU."""
        rows = len(next(iter(inputs.values())))
        if rows == 0:
            return {name: value.cpu() for name, value in self.module.no_rows_outputs(self.device).items()}
        parts = []
        for start in range(0, rows, self.batch_size):
            batch = trim_padding({k: v[start:start + self.batch_size] for k, v in inputs.items()},
                                 [n for n in self.module.batch_padded if n in inputs])
            batch = {k: v.to(self.device) for k, v in batch.items()}
            parts.append({k: v.cpu() for k, v in self.module(batch).items()})
        return {name: torch.cat([p[name] for p in parts]) for name in parts[0]} if parts else {}

    def predict_chunk(self, table: pa.Table) -> pa.Table:
        """Predictions for each row of a chunk, as user-facing columns."""
        return pa.table(self.predict_columns(table))

    def predict_columns(self, table: pa.Table) -> dict[str, Any]:
        """The same predictions as ``predict_chunk``, as NumPy arrays (Arrow list arrays for sets)."""
        logits = self.logits(self.tensors(table, self.inputs))
        columns: dict[str, Any] = {self.key_column: table[self.key_column]} if self.key_column else {}
        for p in self.outputs:
            out = self.module.head(p.name).predict(logits[p.name])
            if LABEL_PROBABILITIES in logits:  # an LLM's category output, scored per label
                out["label_probabilities"] = logits[LABEL_PROBABILITIES]
            columns.update(postprocess(p, out, self.features[p.name]))
        return columns


def postprocess(processor, out: dict, meta: dict) -> dict:
    """Model outputs as user-facing columns: labels, probabilities per class, numbers."""
    name, kind = processor.name, processor.type
    if kind == "number":
        return {f"{name}_predictions": out["prediction"].numpy()}
    if kind in ("vector", "timeseries"):
        return {f"{name}_predictions": _lists(out["prediction"].numpy(), pa.float32())}
    if kind in ("sequence", "text"):
        columns = _sequence_columns(name, kind, out, meta)
        if "labels" in meta:  # an LLM's category output: its text matched to a label
            return category_columns(name, columns, processor.config, out.get("label_probabilities"))
        return columns
    if kind == "image":
        masks = out["prediction"].to(torch.uint8).numpy()
        return {f"{name}_predictions": _masks(masks.reshape(len(masks), meta["height"], meta["width"])),
                f"{name}_probability": out["probability"].reshape(len(masks), -1).mean(1).numpy()}
    if kind == "binary":
        p = out["probability"].numpy()
        return {f"{name}_predictions": out["prediction"].numpy(), f"{name}_probability": np.maximum(p, 1 - p),
                f"{name}_probabilities_False": 1 - p, f"{name}_probabilities_True": p}
    vocab = np.asarray(meta["vocabulary"], dtype=object)
    probabilities = out["probabilities"].numpy()
    if kind in ("category", "category_distribution"):
        columns = {f"{name}_predictions": vocab[out["prediction"].numpy()].astype(str), f"{name}_probability": out["probability"].numpy()}
    else:  # set: the labels above the threshold
        chosen = out["prediction"].numpy()
        # Typed: a chunk where every set is empty would otherwise be list<null>, and the chunks or
        # part files of one output must share one schema.
        columns = {f"{name}_predictions": pa.array([list(vocab[row]) for row in chosen], type=pa.list_(pa.string()))}
    if len(vocab) <= 100:
        columns.update({f"{name}_probabilities_{label}": probabilities[:, i] for i, label in enumerate(vocab)})
    return columns


def _masks(masks: np.ndarray) -> pa.Array:
    """Predicted masks [rows, height, width] as a column of height lists of width class ids."""
    rows, height, width = masks.shape
    pixel_rows = pa.FixedSizeListArray.from_arrays(pa.array(masks.reshape(-1), pa.uint8()), width)
    return pa.FixedSizeListArray.from_arrays(pixel_rows, height)


def _lists(matrix: np.ndarray, value_type: pa.DataType) -> pa.Array:
    """The rows of a matrix as an Arrow list column."""
    return row_lists(matrix.reshape(-1), np.full(len(matrix), matrix.shape[1]), value_type)


def _sequence_columns(name: str, kind: str, out: dict, meta: dict) -> dict:
    """A sequence's predicted tokens (a text's joined by spaces), each token's probability, and the
    sequence's (their product)."""
    tokens, probabilities, lengths = (out[k].numpy() for k in ("prediction", "probabilities", "length"))
    keep = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
    if "hf_tokenizer" in meta:  # subwords: the tokenizer puts the text back together
        text = pa.array(hf_tokens.decode([row[:n].tolist() for row, n in zip(tokens, lengths)], meta["hf_tokenizer"]),
                        pa.string())
    else:
        words = row_lists(np.asarray(meta["vocabulary"], dtype=object)[tokens[keep]], lengths, pa.string())
        text = pc.binary_join(words, " ") if kind == "text" else words
    return {f"{name}_predictions": text,
            f"{name}_probabilities": row_lists(probabilities[keep], lengths, pa.float32()),
            f"{name}_probability": np.where(keep, probabilities, 1.0).prod(axis=1)}
