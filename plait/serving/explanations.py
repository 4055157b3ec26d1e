"""``/explain``: integrated gradients for the rows of a request, as ``plait explain`` computes them.

A request has ``/predict``'s shape (one row: a JSON object or form fields) or ``/batch_predict``'s
(a JSON list of records, pandas "split" JSON, or a form whose ``dataset`` field holds it), and
goes through the same checks. Its options are query parameters (or, in a form, fields that name
no column of the model): ``output_feature_name``, ``every_class`` and ``steps``, at most
:data:`MAX_STEPS` so that one request cannot hold the model for long. The work runs where a
batch's predictions run (``runners.py``); an ONNX export has no gradients, and answers 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from plait.explain.integrated_gradients import DEFAULT_STEPS
from plait.serving.payloads import (FORM_TYPES, Batch, ClientError, batch_of_payload, media_type, off_loop, parse_form,
                                    parse_json)

MAX_STEPS = 1000
"""The most integration steps a request may ask for: a row costs a forward and a backward pass
per step (and rows whose completeness error is too large are integrated again with 4x the steps)."""
OPTIONS = ("output_feature_name", "every_class", "steps")
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


@dataclass(frozen=True)
class ExplainOptions:
    """What a request asks to be explained, checked."""

    output: str
    """The output feature explained."""
    every_class: bool
    steps: int


@dataclass
class ExplainRequest:
    """A request's rows: one row's fields (``row``) or a batch; and options sent as form fields."""

    row: dict | None = None
    batch: Batch | None = None
    options: dict[str, Any] | None = None


async def parse_request(content_type: str | None, headers, body: bytes, columns: set[str], max_rows: int
                        ) -> ExplainRequest:
    """One row or a batch, told apart by shape: a JSON list, an object of 'columns' and 'data',
    or a form with a 'dataset' field is a batch (unless the model has a column of that name)."""
    kind = media_type(content_type)
    if kind in FORM_TYPES:
        fields, files = await parse_form(kind, headers, body)
        options = {name: fields.pop(name) for name in OPTIONS if name in fields and name not in columns}
        if "dataset" not in fields or "dataset" in columns:
            return ExplainRequest(row=fields, options=options)
        batch = await off_loop(len(body), _batch_of, fields["dataset"] or b"", max_rows)
        batch.files = files
        return ExplainRequest(batch=batch, options=options)
    payload = await off_loop(len(body), parse_json, body, kind)
    if isinstance(payload, list) or (isinstance(payload, dict) and {"columns", "data"} <= set(payload)
                                     and not {"columns", "data"} & columns):
        return ExplainRequest(batch=await off_loop(len(body), batch_of_payload, payload, max_rows))
    if not isinstance(payload, dict):
        raise ClientError(400, f"/explain takes one row (a JSON object of feature values, or form fields) or a "
                               f"batch (a JSON list of records, or pandas \"split\" JSON), not a JSON "
                               f"{type(payload).__name__}")
    return ExplainRequest(row=payload)


def _batch_of(text: str | bytes, max_rows: int) -> Batch:
    return batch_of_payload(parse_json(text), max_rows)


def explain_options(query: Mapping[str, str], fields: Mapping[str, Any] | None, outputs: dict[str, str]
                    ) -> ExplainOptions:
    """The options of a request (query parameters, then form fields), checked: a 400 says which
    is wrong and what it takes. ``outputs``: the model's output features and their types."""
    from plait.errors import UsageError
    from plait.explain.rows import check_output

    given = {**{k: v for k, v in query.items() if k in OPTIONS}, **(fields or {})}
    unknown = sorted(set(query) - set(OPTIONS))
    if unknown:
        raise ClientError(400, f"/explain takes the query parameters {', '.join(OPTIONS)}; "
                               f"not {', '.join(map(repr, unknown))}")
    given = {k: v.decode() if isinstance(v, bytes) else v for k, v in given.items() if v is not None}
    try:
        output = check_output({"output_features": [{"name": n, "type": t} for n, t in outputs.items()]},
                              given.get("output_feature_name") or None)
    except UsageError as exc:
        raise ClientError(400, str(exc).replace("--output_feature_name", "output_feature_name")) from None
    every_class = str(given.get("every_class", "false")).strip().lower()
    if every_class not in TRUE + FALSE:
        raise ClientError(400, f"every_class {short_value(every_class)}: give true or false")
    steps = str(given.get("steps", DEFAULT_STEPS)).strip()
    if not steps.isdigit() or not 1 <= int(steps) <= MAX_STEPS:
        raise ClientError(400, f"steps {short_value(steps)}: give a whole number of integration steps from 1 to "
                               f"{MAX_STEPS} (default {DEFAULT_STEPS}); this server takes no more per request")
    return ExplainOptions(output, every_class in TRUE, int(steps))


def short_value(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


def row_answer(table: pa.Table, options: ExplainOptions) -> Any:
    """One row's explanation: an object of its class, scores, delta, steps and each input's
    attribution; with ``every_class``, a list of them, one per class."""
    records = table.drop_columns(["row"]).to_pylist()
    return records if options.every_class and records[0]["class"] != "prediction" else records[0]


def batch_answer(batch: Batch, table: pa.Table) -> Any:
    """A batch's explanations in the shape it came in: records, or pandas "split" JSON whose
    index holds each row's label in the request (its number, without one)."""
    if batch.records:
        return table.to_pylist()
    rows = table["row"].to_numpy()
    index = rows.tolist() if batch.index is None else [batch.index[r] for r in rows]
    columns = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
    data = list(zip(*(column.tolist() if column.dtype == object else column for column in columns.values())))
    return {"index": index, "columns": list(columns), "data": data}


def numbered(parts: list[pa.Table], starts: list[int]) -> pa.Table:
    """Consecutive pieces' explanations as those of the whole: each piece's row numbers moved
    by its first row's place in the batch."""
    tables = [t.set_column(0, "row", pa.array(t["row"].to_numpy() + start)) for t, start in zip(parts, starts)]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


