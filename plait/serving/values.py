"""One request value per feature type, checked and put in the form a micro-batch column takes.

A single-row request is checked here, in Python, before it joins a micro-batch: a bad value must
fail its own request only, never the batch it would have joined. Each function takes a value as
it came (a JSON value, a form field's text or a file part's bytes) and returns it in the form
the column of its type holds, with the meaning a CSV cell of that text has for ``plait predict``
(so ``3``, ``3.0`` and ``"3"`` are the same category); it raises :class:`BadValue` saying what
the feature expects. A batch request skips this: its columns go to the feature processors whole,
which check them the same way (``plait.features``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

import pyarrow as pa

from plait.features.audio_ops import UnreadableAudio, header
from plait.features.image_ops import UnreadableImage
from plait.features.image_ops import header as image_header
from plait.features.binary import FALSE_WORDS, TRUE_WORDS
from plait.features.date import read_dates
from plait.features.h3 import index_problem, read_indexes
from plait.features.number import MISSING_WORDS
from plait.serving.files import SENT_FILE, FileAccess, FileRefused


class BadValue(ValueError):
    """A value its feature cannot read; the message says what the feature expects."""


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
        raise BadValue(f"a number, got {_short(text)}") from None
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
    raise BadValue(f"true or false (or one of the labels it was trained on: {known}), got {_short(text)}")


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
            raise BadValue(f"{size} numbers, got {_short(value)}") from None
    if len(numbers) != size:
        raise BadValue(f"{size} numbers, got {len(numbers)}")
    return " ".join(numbers)


def date(value: Any, meta: dict) -> str | None:
    """A date as text (a JSON number: a Unix timestamp), read as the column's dates are."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = label(value, meta)
    else:
        text = None if value is None else _text(value, "a date")
    if text is None:
        return None
    _, _, unread = read_dates(pa.array([text]), meta.get("datetime_format"))
    if unread[0]:
        fmt = meta.get("datetime_format")
        raise BadValue(f"a date such as 2024-05-01 or 2024-05-01 12:30:00{f' (or in the form {fmt})' if fmt else ''}, "
                       f"got {_short(text)}")
    return text


def h3(value: Any, _meta: dict) -> int | None:
    """An H3 cell index: a JSON integer, or its decimal or hex string."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str, bytes)):
        raise BadValue(f"an H3 index (an integer or a hex string), got a JSON {_json_kind(value)}")
    text = str(value) if isinstance(value, int) else _text(value, "an H3 index")
    values, missing, unread = read_indexes(pa.array([text]))
    if missing[0]:
        return None
    problem = "not an integer or a hex string" if unread[0] else index_problem(int(values[0]))
    if problem:
        raise BadValue(f"an H3 cell index such as 8a2a1072b59ffff, got {_short(value)}: {problem}")
    return int(values[0])


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
        raise BadValue(f"numbers split by spaces or commas, got {_short(text)}") from None


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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "...'"


COERCERS: dict[str, Callable[[Any, dict], Any]] = {
    "number": number, "binary": binary, "category": label, "text": label, "set": label, "vector": vector,
    "date": date, "h3": h3, "bag": label, "timeseries": timeseries, "sequence": label,
}
"""The check of one value, by feature type. A feature type the server is to take adds its own."""

FILE_COERCERS: dict[str, Callable[[Any, dict, FileAccess], bytes | None]] = {"audio": audio, "image": image}
"""The check of one value of a file-valued type, which also takes what the server may read for a
client (``plait.serving.files``)."""

ARROW_TYPES: dict[str, pa.DataType] = {"number": pa.float64(), "h3": pa.int64(),
                                      "timeseries": pa.list_(pa.float64()), "audio": pa.binary(), "image": pa.binary()}
"""The Arrow type of a micro-batch column of checked values, by feature type (default: string)."""
