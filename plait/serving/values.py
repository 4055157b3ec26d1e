"""One request value per feature type, checked and put in the form a micro-batch column takes.

A single-row request is checked here, in Python, before it joins a micro-batch: a bad value must
fail its own request only, never the batch it would have joined. Each function takes a value as
it came (a JSON value, a form field's text or a file part's bytes) and returns it in the form
the column of its type holds, with the meaning a CSV cell of that text has for ``plait predict``
(so ``3``, ``3.0`` and ``"3"`` are the same category); it raises :class:`BadValue` saying what
the feature expects. A batch request's columns get the same checks (:func:`check_column`), so
``/predict`` and ``/batch_predict`` take and refuse the same values.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from plait.features.audio_ops import UnreadableAudio, header
from plait.features.image_ops import UnreadableImage
from plait.features.image_ops import header as image_header
from plait.features.binary import FALSE_WORDS, TRUE_WORDS
from plait.features.date import read_dates
from plait.features.h3 import index_problem, invalid_indexes, read_indexes
from plait.features.number import MISSING_WORDS
from plait.serving.files import SENT_FILE, FileAccess, FileRefused


class BadValue(ValueError):
    """A value its feature cannot read; the message says what the feature expects, and ``row``
    which value of a column it was."""

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row


def number(value: Any, _meta: dict) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise BadValue("a number, not true or false")
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = _text(value, "a number")
    if text.strip().lower() in MISSING_WORDS:
        return None
    try:
        parsed = float(text)
    except ValueError:
        raise BadValue(f"a number, got {short(text)}") from None
    return parsed if math.isfinite(parsed) else None


def label(value: Any, _meta: dict) -> str | None:
    """Category, text and set values: a string (numbers and booleans as a CSV cell reads them)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return None if math.isnan(value) else str(int(value)) if value.is_integer() else repr(value)
    return _text(value, "a string")


def binary(value: Any, meta: dict) -> str | None:
    text = label(value, meta)
    if text is None:
        return None
    if text in meta.get("labels", ()) or text.lower() in TRUE_WORDS | FALSE_WORDS:
        return text
    known = ", ".join(meta.get("labels", ())) or "none"
    raise BadValue(f"true or false (or one of the labels it was trained on: {known}), got {short(text)}")


def vector(value: Any, meta: dict) -> str | None:
    """A vector as its space-separated text: a JSON list of numbers or such a string."""
    if value is None:
        return None
    size = meta["vector_size"]
    if isinstance(value, list):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise BadValue(f"a list of {size} numbers")
        numbers = [repr(float(v)) for v in value]
    else:
        numbers = _text(value, f"a list of {size} numbers").split()
        try:
            [float(v) for v in numbers]
        except ValueError:
            raise BadValue(f"{size} numbers, got {short(value)}") from None
    if len(numbers) != size:
        raise BadValue(f"{size} numbers, got {len(numbers)}")
    return " ".join(numbers)


def date(value: Any, meta: dict) -> str | None:
    """A date as text (a JSON number: a Unix timestamp), read as the column's dates are."""
    return dates([value], meta)[0]


def dates(values: list, meta: dict) -> list[str | None]:
    """:func:`date` for a column, its texts read at once (reading them one by one costs 0.3 ms
    each: 30 s for a batch of 100,000)."""
    texts = _each(_date_text, values, meta)
    fmt = meta.get("datetime_format")
    _, _, unread = read_dates(pa.array(texts, pa.string()), fmt, meta.get("day_first"))  # the training rows' order
    if unread.any():
        row = int(np.flatnonzero(unread)[0])
        raise BadValue(f"a date such as 2024-05-01 or 2024-05-01 12:30:00{f' (or in the form {fmt})' if fmt else ''}, "
                       f"got {short(texts[row])}", row)
    return texts


def _date_text(value: Any, meta: dict) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return label(value, meta)
    return None if value is None else _text(value, "a date")


def h3(value: Any, meta: dict) -> int | None:
    """An H3 cell index: a JSON integer, or its decimal or hex string."""
    return h3_indexes([value], meta)[0]


def h3_indexes(values: list, meta: dict) -> list[int | None]:
    """:func:`h3` for a column, its indexes read and checked at once."""
    texts = _each(_h3_text, values, meta)
    indexes, missing, unread = read_indexes(pa.array(texts, pa.string()))
    bad = unread | (~missing & invalid_indexes(indexes))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        problem = "not an integer or a hex string" if unread[row] else index_problem(int(indexes[row]))
        raise BadValue(f"an H3 cell index such as 8a2a1072b59ffff, got {short(values[row])}: {problem}", row)
    return [None if gone else int(index) for index, gone in zip(indexes.tolist(), missing.tolist())]


def _h3_text(value: Any, _meta: dict) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str, bytes)):
        raise BadValue(f"an H3 index (an integer or a hex string), got a JSON {_json_kind(value)}")
    return str(value) if isinstance(value, int) else _text(value, "an H3 index")


def timeseries(value: Any, _meta: dict) -> list[float] | None:
    """A series: a JSON list of numbers, or a string of numbers split by spaces or commas."""
    if value is None:
        return None
    if isinstance(value, list):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise BadValue("a list of numbers")
        return [float(v) for v in value]
    text = _text(value, "a list of numbers, or a string of them")
    try:
        return [float(v) for v in re.split(r"[\s,]+", text.strip()) if v]
    except ValueError:
        raise BadValue(f"numbers split by spaces or commas, got {short(text)}") from None


def audio(value: Any, _meta: dict, files: FileAccess) -> bytes | None:
    """A WAV or FLAC file's bytes (see :func:`file_bytes`)."""
    return file_bytes(value, "a WAV or FLAC file", header, UnreadableAudio, files)


def image(value: Any, _meta: dict, files: FileAccess) -> bytes | None:
    """An image file's bytes (see :func:`file_bytes`)."""
    return file_bytes(value, "an image file", image_header, UnreadableImage, files)


def file_bytes(value: Any, expected: str, read_header: Callable[[bytes], Any], unreadable: type[Exception],
               files: FileAccess) -> bytes | None:
    """A file's bytes: sent as a file part, or as a string that ``files`` reads (a data URL, or a
    path or URL where the server allows them); checked by reading its header (a decompression
    bomb is refused there). A blank string is a missing value, as an empty CSV cell is."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, (str, bytes)):
        raise BadValue(f"{expected}: {SENT_FILE}; got a JSON {_json_kind(value)}")
    try:
        content = value if isinstance(value, bytes) else files.content(value)
    except FileRefused as exc:
        raise BadValue(f"{expected}: {exc}") from None
    try:
        read_header(content)
    except unreadable as exc:
        sent = isinstance(value, bytes) or value[:5].lower() == "data:"
        raise BadValue(f"{expected}; the file {'sent' if sent else 'it names'} cannot be read: {exc}") from None
    return content


def check_column(kind: str, values: list, meta: dict, check: Callable[[Any, dict], Any] | None = None) -> list:
    """A column of values of a feature of type ``kind``, each checked as ``check`` checks one
    value (by default its :data:`COERCERS` entry; a server passes the file types' check bound to
    what it may read, :data:`FILE_COERCERS`); types whose check reads a whole column at once
    have their own. A :class:`BadValue` says which row."""
    whole = COLUMN_CHECKS.get(kind)
    return whole(values, meta) if whole is not None else _each(check or COERCERS[kind], values, meta)


def _each(check: Callable[[Any, dict], Any], values: list, meta: dict) -> list:
    checked = []
    for row, value in enumerate(values):
        try:
            checked.append(check(value, meta))
        except BadValue as exc:
            exc.row = row
            raise
    return checked


def _text(value: Any, expected: str) -> str:
    """A form field's text, or a file part's bytes read as UTF-8; anything else is refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadValue(f"{expected}; the file sent is not UTF-8 text") from None
    raise BadValue(f"{expected}, got a JSON {_json_kind(value)}")


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", bool: "boolean", int: "number", float: "number"}.get(type(value), "value")


def short(value: Any) -> str:
    """``repr(value)`` for a message, cut to about 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "...'"


def listed(names: list, most: int = 10) -> str:
    """Names for a message, at most ``most`` of them and each cut short: a request may name
    60,000 unknown columns, or one column of a megabyte."""
    shown = ", ".join(short(n) for n in names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


COERCERS: dict[str, Callable[[Any, dict], Any]] = {
    "number": number, "binary": binary, "category": label, "text": label, "set": label, "vector": vector,
    "date": date, "h3": h3, "bag": label, "timeseries": timeseries, "sequence": label,
}
"""The check of one value, by feature type. A feature type the server is to take adds its own."""

FILE_COERCERS: dict[str, Callable[[Any, dict, FileAccess], bytes | None]] = {"audio": audio, "image": image}
"""The check of one value of a file-valued type, which also takes what the server may read for a
client (``plait.serving.files``)."""

COLUMN_CHECKS: dict[str, Callable[[list, dict], list]] = {"date": dates, "h3": h3_indexes}
"""The types whose check of a column reads it at once, in one Arrow call: the same check as their
COERCERS entry, which is this one on a column of one value."""

ARROW_TYPES: dict[str, pa.DataType] = {"number": pa.float64(), "h3": pa.int64(),
                                      "timeseries": pa.list_(pa.float64()), "audio": pa.binary(), "image": pa.binary()}
"""The Arrow type of a micro-batch column of checked values, by feature type (default: string)."""
