"""The model as a server holds it: loaded once, with what checking a request needs at hand.

:class:`ServedModel` reads the model folder once (a damaged or incomplete folder fails here, before
the server listens), keeps its predictor, and answers two questions in the shapes the server
sends back: predictions for a micro-batch of checked single rows, and for a batch's columns. A
plait model folder's go through the same :class:`~plait.inference.Predictor` as ``plait
predict``; an ONNX export's through onnxruntime (``plait.serving.predictors``). The checks are the
same for both.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.errors import DataError
from plait.serving.files import FileAccess
from plait.serving.payloads import ClientError
from plait.serving.predictors import ModelFolder, open_folder
from plait.serving.predictors.plait_model import serve_settings, with_serve_settings  # noqa: F401 (plait.serving.model's API)
from plait.serving.values import COERCERS, FILE_COERCERS, BadValue, check_column, short


@dataclass(frozen=True)
class ServedInput:
    """An input feature as requests name it (its column) and how one value of it is checked."""

    column: str
    name: str
    type: str
    check: Callable[[Any, dict], Any]
    metadata: dict
    reads_files: bool = False
    """Its values are files (an image, audio): a request's string may make the server read one."""

    def refusal(self, exc: BadValue, row: int | None = None) -> ClientError:
        """The answer to a value this feature refused: ``row``, which row of a batch it was in."""
        column = f", column {self.column!r}" if self.name != self.column else ""
        where = f"row {row} of the batch: " if row is not None else ""
        return ClientError(400, f"{where}input feature {self.name!r} ({self.type}{column}) expects {exc}")


class ServedModel:
    def __init__(self, model_dir: str, device: str | None = None, settings: dict | None = None,
                 folder: ModelFolder | None = None):
        """``model_dir``: a plait model folder or an ONNX export (``plait.serving.predictors``
        tells them apart). ``settings``: keys of the ``serve`` section that override the model's
        own (checked as the config is: a bad one is a ConfigError naming ``serve.<key>``).
        ``folder``: ``model_dir`` opened already, when the caller has (with these settings)."""
        folder = folder if folder is not None else open_folder(model_dir, settings)
        self.model_dir = model_dir
        self.settings = folder.settings
        self.files = FileAccess.of(self.settings)
        self.predictor = folder.predictor(device)
        refused = sorted({p.type for p in self.predictor.inputs if p.type not in COERCERS | FILE_COERCERS})
        if refused:
            raise DataError(f"the server cannot read requests for feature type(s) {', '.join(refused)} yet")
        self.inputs = [ServedInput(p.column, p.name, p.type, self._check(p.type), p.metadata,
                                   reads_files=p.type in FILE_COERCERS)
                       for p in self.predictor.inputs]
        # Several features may read one column (a number twice, normalized two ways): a request
        # holds it once, and the micro-batch column takes the value as the first of them reads it.
        self.columns: dict[str, ServedInput] = {}
        for i in self.inputs:
            self.columns.setdefault(i.column, i)
        self.output_columns = {p.column for p in self.predictor.outputs}
        self._known = {i.column for i in self.inputs} | self.output_columns
        self.reads_files = any(i.reads_files for i in self.columns.values())
        """Checking a request may read files (decode base64, read a path or fetch a URL the
        operator allows): the app does it off the event loop."""

    def _check(self, kind: str) -> Callable[[Any, dict], Any]:
        if kind in FILE_COERCERS:
            return functools.partial(FILE_COERCERS[kind], files=self.files)
        return COERCERS[kind]

    # ---- what the model takes and gives -------------------------------------------------------------

    def info(self) -> dict:
        outputs = self._predict([[None]] * len(self.columns))
        return {
            "model_path": self.model_dir,
            "input_features": [{"name": i.name, "column": i.column, "type": i.type} for i in self.inputs],
            "output_features": [{"name": p.name, "column": p.column, "type": p.type,
                                 "prediction_columns": [c for c in outputs if c.startswith(f"{p.name}_")]}
                                for p in self.predictor.outputs],
        }

    @property
    def name(self) -> str:
        """The model's name in the Open Inference Protocol: its folder's name."""
        return self.model_dir.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1] or "model"

    def output_datatypes(self) -> dict[str, tuple[str, list[int]]]:
        """Each prediction column's datatype and shape in the Open Inference Protocol."""
        from plait.serving.inference_protocol import output_datatype

        predicted = self._predict([[None]] * len(self.columns))
        return {column: output_datatype(_values(values)) for column, values in predicted.items()}

    def check_names(self, names, what: str) -> None:
        """Every input feature given, and nothing the model does not know (its output columns
        may come along: labelled rows are welcome and the labels are ignored). ``names``: a
        row's dict or a batch's list of columns, which may be long: linear in it, and the names
        listed in a message are a few."""
        given = names if isinstance(names, dict) else set(names)
        missing = [column for column in self.columns if column not in given]
        unknown = [n for n in names if n not in self._known]
        problems = []
        if missing:
            problems.append(f"missing input feature(s) {', '.join(map(repr, missing))}")
        if unknown:
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            problems.append(f"unknown feature(s) {', '.join(self._with_suggestion(n) for n in unknown[:10])}{more}")
        if problems:
            inputs = ", ".join(f"{column} ({first.type})" for column, first in self.columns.items())
            raise ClientError(400, f"{what}: {'; '.join(problems)}. This model's input columns are: {inputs}")

    def _with_suggestion(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.columns), n=1)
        return f"{short(name)} (did you mean {close[0]!r}?)" if close else short(name)

    # ---- single rows ------------------------------------------------------------------------------------

    def check_row(self, row: dict) -> tuple:
        """A request's row as checked values, one per input feature, ready to join a micro-batch."""
        self.check_names(row, "the row")
        checked = {}
        for i in self.inputs:
            try:
                value = i.check(row[i.column], i.metadata)
            except BadValue as exc:
                raise i.refusal(exc) from None
            checked.setdefault(i.column, value)
        return tuple(checked[column] for column in self.columns)

    def predict_rows(self, rows: list[tuple]) -> list[dict | ClientError]:
        """Predictions for a micro-batch of checked rows, one flat dict each. A row the features
        still refuse gets its error, and the others their answers."""
        try:
            return self._rows_of(self._predict([list(c) for c in zip(*rows)]))
        except DataError as exc:
            if len(rows) == 1:
                return [ClientError(400, str(exc))]
        return [self.predict_rows([row])[0] for row in rows]

    def _predict(self, columns: list[list]) -> dict[str, Any]:
        """The predictor's columns for checked values, one list per input column."""
        return self.predictor.predict(dict(zip(self.columns, columns)))

    @staticmethod
    def _rows_of(columns: dict[str, Any]) -> list[dict]:
        names = list(columns)
        values = [_values(columns[n]) for n in names]
        return [dict(zip(names, row)) for row in zip(*values)]

    # ---- batches ----------------------------------------------------------------------------------------

    def check_batch(self, columns: dict[str, list], sent: dict[str, bytes] | None = None) -> list[list]:
        """A batch's columns as checked values, one list per input column: each value checked
        as :meth:`check_row` checks it. ``sent``: a form's file parts by file name; a
        file-valued cell holding one of the names is that file (Ludwig's batch form)."""
        self.check_names(list(columns), "the batch")
        checked = {}
        for i in self.inputs:
            values = columns[i.column]
            if i.reads_files and sent:
                values = [sent.get(v, v) if isinstance(v, str) else v for v in values]
            try:
                values = check_column(i.type, values, i.metadata, i.check)
            except BadValue as exc:
                raise i.refusal(exc, exc.row) from None
            checked.setdefault(i.column, values)
        return [checked[column] for column in self.columns]

    # ---- an LLM's generation ----------------------------------------------------------------------------

    @functools.cached_property
    def generator(self):
        """An LLM's :class:`~plait.inference.generate.Generator` (None for other models, and
        for an ONNX export, whose predictor has none)."""
        make = getattr(self.predictor, "generator", None)
        return make() if make is not None else None

    def generate_rows(self, items: list) -> list:
        """Generated text for a micro-batch of :class:`~plait.serving.openai_api.GenerationItem`:
        the items that share their settings are generated as one batch. A batch the model
        refuses gets a ClientError for each of its items, and the others their answers."""
        from plait.errors import PlaitError

        answers: list = [None] * len(items)
        groups: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            groups.setdefault(item.settings.model_dump_json(), []).append(index)
        for indices in groups.values():
            group = [items[i] for i in indices]
            streamed = {row: item.on_piece for row, item in enumerate(group) if item.on_piece is not None}

            def on_piece(row: int, piece: str, streamed=streamed) -> None:
                if row in streamed:
                    streamed[row](piece)

            try:
                done = self.generator.generate([item.prompt for item in group], group[0].settings,
                                               on_piece if streamed else None)
            except PlaitError as exc:
                done = [ClientError(400, str(exc))] * len(group)
            for i, answer in zip(indices, done):
                answers[i] = answer
        return answers

    # ---- explanations -----------------------------------------------------------------------------------

    @property
    def explains(self) -> bool:
        """Its predictor has gradients to explain with (a plait model folder's; an ONNX export's not)."""
        return hasattr(self.predictor, "explain")

    def explain_batch(self, columns: list[list], output: str, steps: int, every_class: bool):
        """Integrated gradients for checked columns (a whole request, or a piece of one), as an
        Arrow table (``plait.explain.rows.explain_table``)."""
        try:
            return self.predictor.explain(dict(zip(self.columns, columns)), output, steps, every_class)
        except DataError as exc:
            raise ClientError(400, str(exc)) from None

    def predict_batch(self, columns: list[list]) -> dict[str, Any]:
        """Predictions for checked columns (:meth:`check_batch`: a whole request, or a piece of
        one), by prediction column."""
        try:
            predicted = self._predict(columns)
        except DataError as exc:
            raise ClientError(400, str(exc)) from None
        return {name: _values(column) for name, column in predicted.items()}


def _values(column: Any) -> Any:
    """A prediction column in a form that pickles and that orjson writes as the CSV does: NumPy
    arrays as they are (float32 with its shortest digits), Arrow lists as Python lists."""
    if isinstance(column, np.ndarray):
        return column.tolist() if column.dtype == object else column
    return column.to_pylist()
