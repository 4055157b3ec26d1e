"""Reading requests: the body within its limits, then one row or a batch, in Ludwig's shapes.

Every problem a client can fix is a :class:`ClientError` with the HTTP status it gets: a body too
large (413) or too slow to arrive (408), JSON that does not parse, a batch without rows (400).
Which features a row must have is the model's business (``plait.serving.model``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, TypeVar

import orjson

from plait.serving.values import listed


class ClientError(Exception):
    """A request the client must change: answered with ``status`` and ``message``, never a 500."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


T = TypeVar("T")

OFF_LOOP_BYTES = 64 << 10
"""A request body at least this large is parsed, checked and answered on a worker thread: that
work grows with its size, and on the event loop it would hold up every other client (reading a
10 MB batch takes about a second). A smaller one is done at once, cheaper than a thread's hop."""


async def off_loop(size: int, work: Callable[..., T], *args, blocks: bool = False) -> T:
    """``work(*args)``, on a worker thread when it is about a body of ``size`` bytes or more, or
    when it ``blocks`` whatever the size (it reads files: decodes base64, reads a path or fetches
    a URL the operator allows)."""
    return work(*args) if size < OFF_LOOP_BYTES and not blocks else await asyncio.to_thread(work, *args)


async def read_body(chunks: AsyncIterator[bytes], declared_length: str | None, limit: int, timeout_s: float) -> bytes:
    """The whole body, refused as soon as it is known to exceed ``limit`` bytes (413), or when
    the client has not sent it all within ``timeout_s`` seconds (408)."""
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > limit:
        raise _too_large(declared_length, limit)

    async def collect() -> bytes:
        parts, size = [], 0
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:  # the rest is not read: the size is a lower bound
                raise _too_large(f"more than {limit}", limit)
            parts.append(chunk)
        return b"".join(parts)

    try:
        return await asyncio.wait_for(collect(), timeout_s)
    except asyncio.TimeoutError:
        raise ClientError(408, f"the request body did not arrive within {timeout_s:g} s; send it at once") from None


def _too_large(size: str, limit: int) -> ClientError:
    return ClientError(413, f"the request body has {size} bytes; this server takes at most {limit} "
                            f"(serve.max_request_bytes): send fewer rows per request")


def parse_json(body: bytes, kind: str = "application/json") -> Any:
    """JSON, whatever the content type (``kind``) said: a client that names none, or text/plain
    to spare a browser's CORS preflight, is still understood."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        said = "" if kind in ("", "application/json") else f" (and its content-type is {kind}; this server reads " \
                                                           f"application/json, or a form)"
        raise ClientError(400, f"the body is not valid JSON{said}: {exc}") from None


async def parse_form(content_type: str, headers, body: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A form's fields: text as ``str`` (an empty field is a missing value, as an empty CSV cell
    is), file parts as their ``bytes``; and the file parts by their file name (a batch's cells
    name them, as in Ludwig's batch form)."""
    from starlette.datastructures import UploadFile
    from starlette.formparsers import FormParser, MultiPartException, MultiPartParser

    async def once():
        yield body
        yield b""

    if content_type == "application/x-www-form-urlencoded" and body.lstrip()[:1] in (b"{", b"["):
        raise ClientError(400, "the body is JSON, but its content-type says a form (application/x-www-form-urlencoded, "
                               "what curl -d sends): send it with the header content-type: application/json")
    parser_class = MultiPartParser if content_type == "multipart/form-data" else FormParser
    try:
        form = await parser_class(headers, once(), max_part_size=len(body) + 1).parse()
    except MultiPartException as exc:
        raise ClientError(400, f"the form does not parse: {exc.message}") from None
    fields: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    for name, value in form.multi_items():
        fields[name] = await value.read() if isinstance(value, UploadFile) else (value or None)
        if isinstance(value, UploadFile) and value.filename:
            files[value.filename] = fields[name]
    await form.close()
    return fields, files


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


async def parse_row(content_type: str | None, headers, body: bytes) -> dict[str, Any]:
    """``/predict``'s row: a JSON object, or form fields (Ludwig's clients send a form)."""
    kind = media_type(content_type)
    if kind in FORM_TYPES:
        row = (await parse_form(kind, headers, body))[0]
    else:
        row = await off_loop(len(body), parse_json, body, kind)
    if not isinstance(row, dict):
        raise ClientError(400, f"/predict takes one row: a JSON object of feature values (or form fields), not a JSON "
                               f"{type(row).__name__}; send several rows to /batch_predict")
    return row


@dataclass
class Batch:
    """A batch request's rows, by column, and how the answer is to be shaped."""

    columns: dict[str, list]
    rows: int
    index: list | None
    records: bool
    """The request was a list of records, so the answer is one too (else pandas "split" JSON)."""
    files: dict[str, bytes] = field(default_factory=dict)
    """A form's file parts by file name: a file-valued cell holding one of the names gets its bytes."""


async def parse_batch(content_type: str | None, headers, body: bytes, max_rows: int) -> Batch:
    """``/batch_predict``'s rows: a form field ``dataset`` holding pandas "split" JSON (Ludwig's
    shape), or a JSON body that is such an object or a list of records."""
    kind = media_type(content_type)
    files: dict[str, bytes] = {}
    if kind in FORM_TYPES:
        form, files = await parse_form(kind, headers, body)
        if "dataset" not in form:
            raise ClientError(400, "the form has no 'dataset' field: put the rows there as pandas \"split\" JSON "
                                   "(DataFrame.to_json(orient='split'))")
        body, kind = form["dataset"] or b"", "application/json"  # text, a file part's bytes, or None when empty
    batch = await off_loop(len(body), _batch_of, body, kind, max_rows)
    batch.files = files
    return batch


def _batch_of(body: bytes | str, kind: str, max_rows: int) -> Batch:
    return batch_of_payload(parse_json(body, kind), max_rows)


def batch_of_payload(payload: Any, max_rows: int) -> Batch:
    """A batch of parsed JSON: a list of records, or pandas "split" JSON."""
    batch = _records(payload) if isinstance(payload, list) else _split(payload)
    if batch.rows == 0:
        raise ClientError(400, "the batch has no rows")
    if batch.rows > max_rows:
        raise ClientError(413, f"the batch has {batch.rows} rows; this server takes at most {max_rows} per request "
                               f"(serve.max_batch_rows): split it")
    return batch


def _split(payload: Any) -> Batch:
    if not isinstance(payload, dict) or "columns" not in payload or "data" not in payload:
        raise ClientError(400, "a batch is pandas \"split\" JSON, an object with 'columns' and 'data' "
                               "(DataFrame.to_json(orient='split')), or a JSON list of records")
    columns, data = payload["columns"], payload["data"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ClientError(400, "the batch's 'columns' must be a list of column names")
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        raise ClientError(400, "the batch's 'data' must be a list of rows, each a list of values")
    if len(set(columns)) != len(columns):
        twice = sorted(column for column, times in Counter(columns).items() if times > 1)
        raise ClientError(400, f"the batch names column(s) {listed(twice)} more than once")
    width = len(columns)
    short = next((i for i, row in enumerate(data) if len(row) != width), None)
    if short is not None:
        raise ClientError(400, f"row {short} of the batch has {len(data[short])} values for {width} columns")
    by_column = [list(values) for values in zip(*data)] if data else [[] for _ in columns]
    index = payload.get("index")
    if index is not None and (not isinstance(index, list) or len(index) != len(data)):
        raise ClientError(400, f"the batch's 'index' must list one label per row ({len(data)})")
    return Batch(dict(zip(columns, by_column)), len(data), index, records=False)


def _records(payload: list) -> Batch:
    if not all(isinstance(record, dict) for record in payload):
        raise ClientError(400, "a list of records must hold JSON objects, one per row")
    if not payload:
        return Batch({}, 0, None, records=True)
    names = list(payload[0])
    for i, record in enumerate(payload):
        if len(record) != len(names) or any(name not in record for name in names):
            raise ClientError(400, f"record {i} of the batch has other keys than record 0 "
                                   f"({listed(sorted(record))} against {listed(sorted(names))}): give every "
                                   f"record the same keys")
    return Batch({name: [record[name] for record in payload] for name in names}, len(payload), None, records=True)
