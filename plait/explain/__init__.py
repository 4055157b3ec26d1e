"""Why a model predicted what it did: attributions per row and per input feature.

Two methods. ``ig``: integrated gradients at the encoders' outputs (``integrated_gradients.py``,
each type's baseline in ``baselines.py``), per row, for the predicted class or every class; its
global figure is each feature's mean absolute attribution; inside each text or sequence input,
each token's attribution, and inside each image input, a heat map of its pixels' (``parts.py``,
on by default: one more integral per such input). ``permutation``: on labelled rows, how
much the output's validation metric worsens when one input column is shuffled (a feature the
model ignores costs nothing). The work is a batch function the backend maps over the data
(``rows.py``), as prediction is: in this process, or as a Ray Data job on Ray.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from plait.errors import UsageError
from plait.explain.baselines import BASELINES
from plait.explain.integrated_gradients import DEFAULT_STEPS
from plait.explain.parts import described
from plait.explain.rows import ChunkExplanations, check_output, explained_classes

METHODS = ("ig", "permutation")
ROWS_FILE = "explanations.parquet"
SUMMARY_FILE = "explanation_summary.json"


@dataclass
class Explanation:
    summary: dict
    """Method, output, explained class, baselines, each input's global importance and their
    ranking (the most important first)."""
    rows: Any = None
    """Integrated gradients: a pandas DataFrame, a row per (input row, class); None for permutation."""
    paths: dict = field(default_factory=dict)

    def write(self, output_directory: str | os.PathLike) -> dict:
        """``explanations.parquet`` (ig) and ``explanation_summary.json`` in ``output_directory``,
        each written whole or not at all; returns their paths."""
        import pyarrow.parquet as pq

        from plait.utils.fs import atomic_open, ensure_dir, resolve, write_json

        fs, folder = resolve(os.fspath(output_directory))
        ensure_dir(fs, folder)
        if self.rows is not None:
            self.paths["rows"] = f"{folder}/{ROWS_FILE}"
            with atomic_open(fs, self.paths["rows"]) as handle:
                pq.write_table(pa.Table.from_pandas(self.rows, preserve_index=False), handle)
        self.paths["summary"] = f"{folder}/{SUMMARY_FILE}"
        write_json(self.paths["summary"], self.summary, fs)
        return self.paths


def explain(backend, spec, dataset: Any, output_feature_name: str | None = None, method: str = "ig",
            every_class: bool = False, steps: int = DEFAULT_STEPS, random_seed: int = 42,
            parts: bool = True) -> Explanation:
    """Explain ``spec``'s model (a PredictorSpec) on ``dataset`` with ``method`` (see the module).
    ``parts`` (ig): also each text or sequence input's tokens and each image input's heat map
    (``parts.py``), at the cost of one more integral per such input."""
    if method not in METHODS:
        raise UsageError(f"--method {method!r}: give {' or '.join(METHODS)}")
    if not isinstance(steps, int) or steps < 1:
        raise UsageError(f"steps {steps!r}: give a whole number of integration steps, 1 or more "
                         f"(default {DEFAULT_STEPS})")
    if method != "permutation" and spec.config.get("model_type") == "gbm":
        raise UsageError(f"--method {method}: a GBM's trees have no gradients to integrate; give --method permutation")
    output = check_output(spec.config, output_feature_name)
    inputs = {f["name"]: f["type"] for f in spec.config["input_features"]}
    summary = {"method": method, "output_feature": output, "inputs": list(inputs)}
    if method == "permutation":
        return Explanation({**summary, **permutation_importance(backend, spec, dataset, output, random_seed)})
    rows = _attributions(backend, spec, dataset, output, steps, every_class, parts)
    importance = {name: float(np.abs(rows[f"{name}_attribution"]).mean()) if len(rows) else 0.0 for name in inputs}
    summary.update(explained="every class" if every_class else "the predicted class", steps=steps,
                   baselines={name: BASELINES[kind] for name, kind in inputs.items()},
                   importance=importance, ranking=sorted(importance, key=lambda name: -importance[name]),
                   rows=int(rows["row"].nunique()) if len(rows) else 0,
                   max_abs_delta=float(np.abs(rows["delta"]).max()) if len(rows) else 0.0)
    if parts and len(rows):
        summary["parts"] = described(inputs, rows.columns)
    return Explanation(summary, rows)


def _attributions(backend, spec, dataset, output: str, steps: int, every_class: bool, parts: bool):
    """Each chunk's explanation rows, in the data's order, numbered by the row's place in the data.

    The numbers come from the position: every input row gives ``per_row`` rows, together. A
    chunk's own numbers cannot be offset instead: on Ray, one table streamed back may hold the
    rows of several batches."""
    from plait.inference import reading_from

    spec = reading_from(spec, dataset)
    make = partial(_make_explainer, spec, output, steps, every_class, parts)
    per_row = len(explained_classes(spec.metadata["features"], output, every_class) or [None])
    tables = list(backend.map_batches(dataset, make, ordered=True, what="explanation"))
    if not tables:
        return pa.table({"row": pa.array([], pa.int64())}).to_pandas()
    table = pa.concat_tables(tables)
    return table.set_column(0, "row", pa.array(np.arange(len(table), dtype=np.int64) // per_row)).to_pandas()


def _make_explainer(spec, output: str, steps: int, every_class: bool, parts: bool, device: str) -> ChunkExplanations:
    return ChunkExplanations(spec, False, device, output, steps, every_class, parts)


from plait.explain.permutation import permutation_importance  # noqa: E402
