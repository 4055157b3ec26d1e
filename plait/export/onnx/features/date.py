"""Date features: ISO-8601 text without zone or fraction (``YYYY-MM-DD``, with `` HH:MM`` or
`` HH:MM:SS``, T or a space between; whitespace around it), read in the graph as plait reads it
(its strict cast, which refuses 2024-02-30), then the nine numbers of plait.features.date with
integer arithmetic: days since 1970 by the proleptic Gregorian calendar, weekday (Monday 0), day
of the year, second of the day.

plait reads more forms (slash dates, month names, zones, fractions, Unix timestamps); the graph
cannot parse them with standard ONNX ops, and reads any value not in the form above, like a
missing value, as the fill date, where plait would read it or refuse it. plait_onnx.py writes a
Python or pandas datetime as its text (``str``), which is this form unless it has a zone. A
model whose ``preprocessing.datetime_format`` is not one of the ISO forms is refused at export.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input
from plait.export.onnx.graph import GraphBuilder

ISO = r"\s*\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d)?)?\s*"
"""plait.features.date's plain ISO form, whitespace around it trimmed as plait trims it."""
ISO_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M")
"""datetime_format values whose reading is the ISO form's."""


def refuse_format(meta: dict, feature) -> list[str]:
    fmt = meta.get("datetime_format")
    if fmt is None or fmt in ISO_FORMATS:
        return []
    return [f"datetime_format {fmt!r} has no ONNX form: the graph reads ISO dates only ({', '.join(ISO_FORMATS)})"]


@exports_input("date", "string", refuse=refuse_format)
def date_input(g: GraphBuilder, raw: str, meta: dict, feature) -> str:
    iso = g.op("RegexFullMatch", raw, pattern=ISO)
    # Only the values of the ISO form are split and cast: Cast fails on text that is not a number.
    raw = g.op("Where", iso, raw, g.constant("1970-01-01"))
    words = _pieces(g, raw, None, 2)  # "2024-05-01" and "12:30:00", or "2024-05-01T12:30:00" and ""
    day_and_time = _pieces(g, words[0], "T", 2)
    time = g.op("Where", g.op("Equal", words[1], g.constant("")), day_and_time[1], words[1])
    year, month, day = (_number(g, p) for p in _pieces(g, day_and_time[0], "-", 3))
    hour, minute, second = (_number(g, p) for p in _pieces(g, time, ":", 3))
    days = _days_from_civil(g, year, month, day)
    read = g.op("And", iso, _valid(g, year, month, day, hour, minute, second))
    i64 = lambda v: g.constant(v, np.int64)  # noqa: E731
    weekday = g.op("Mod", g.op("Add", days, i64(3)), i64(7))  # 1970-01-01 was a Thursday
    yearday = g.op("Add", g.op("Sub", days, _days_from_civil(g, year, i64(1), i64(1))), i64(1))
    second_of_day = g.op("Add", g.op("Add", g.op("Mul", hour, i64(3600)), g.op("Mul", minute, i64(60))), second)
    parts = [g.op("Unsqueeze", p, g.constant([1]))
             for p in (year, month, day, weekday, yearday, hour, minute, second, second_of_day)]
    return g.op("Where", g.op("Unsqueeze", read, g.constant([1])), g.op("Concat", *parts, axis=1),
                g.constant(meta["fill_value"], np.int64))


def _pieces(g: GraphBuilder, strings: str, delimiter: str | None, n: int) -> list[str]:
    """The first ``n`` pieces of each string split at ``delimiter`` (None: whitespace), the last
    holding the rest; "" where a string has fewer."""
    # On whitespace, all of it is split (a last piece would keep its trailing spaces); the ISO
    # form has at most two words.
    attributes = {} if delimiter is None else {"delimiter": delimiter, "maxsplit": n - 1}
    split, _ = g.op("StringSplit", strings, outputs=2, **attributes)
    padding = g.op("Expand", g.constant([[""]]), g.op("Concat", g.op("Shape", strings), g.constant([n]), axis=0))
    split = g.op("Concat", split, padding, axis=1)
    return [g.op("Gather", split, g.constant(i, np.int64), axis=1) for i in range(n)]


def _number(g: GraphBuilder, digits: str) -> str:
    """int64 of a string of digits, 0 of an empty one."""
    text = g.op("Where", g.op("Equal", digits, g.constant("")), g.constant("0"), digits)
    return g.op("Cast", text, to=TensorProto.INT64)


def _days_from_civil(g: GraphBuilder, year: str, month: str, day: str) -> str:
    """Days since 1970-01-01 (H. Hinnant's days_from_civil; years from 0 on, where integer
    division of the non-negative values below is floor division)."""
    i64 = lambda v: g.constant(v, np.int64)  # noqa: E731
    early = g.op("LessOrEqual", month, i64(2))
    y = g.op("Sub", year, g.op("Cast", early, to=TensorProto.INT64))  # the year starts in March
    y = g.op("Add", y, i64(400))  # keeps year 0's January and February non-negative; 400 years shift no date
    era = g.op("Div", y, i64(400))
    year_of_era = g.op("Sub", y, g.op("Mul", era, i64(400)))
    shifted_month = g.op("Where", early, g.op("Add", month, i64(9)), g.op("Sub", month, i64(3)))
    day_of_year = g.op("Add", g.op("Div", g.op("Add", g.op("Mul", shifted_month, i64(153)), i64(2)), i64(5)),
                       g.op("Sub", day, i64(1)))
    day_of_era = g.op("Add", g.op("Add", g.op("Mul", year_of_era, i64(365)), g.op("Div", year_of_era, i64(4))),
                      g.op("Sub", day_of_year, g.op("Div", year_of_era, i64(100))))
    return g.op("Sub", g.op("Add", g.op("Mul", era, i64(146097)), day_of_era), i64(719468 + 146097))


def _valid(g: GraphBuilder, year: str, month: str, day: str, hour: str, minute: str, second: str) -> str:
    """A real date and time: month 1 to 12, day within the month, hour, minute and second in range."""
    i64 = lambda v: g.constant(v, np.int64)  # noqa: E731
    leap = g.op("Or", g.op("And", g.op("Equal", g.op("Mod", year, i64(4)), i64(0)),
                           g.op("Not", g.op("Equal", g.op("Mod", year, i64(100)), i64(0)))),
                g.op("Equal", g.op("Mod", year, i64(400)), i64(0)))
    month_index = g.op("Clip", g.op("Sub", month, i64(1)), i64(0), i64(11))
    length = g.op("Add", g.op("Gather", i64([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]), month_index),
                  g.op("Cast", g.op("And", leap, g.op("Equal", month, i64(2))), to=TensorProto.INT64))
    checks = [g.op("GreaterOrEqual", month, i64(1)), g.op("LessOrEqual", month, i64(12)),
              g.op("GreaterOrEqual", day, i64(1)), g.op("LessOrEqual", day, length),
              g.op("Less", hour, i64(24)), g.op("Less", minute, i64(60)), g.op("Less", second, i64(60))]
    valid = checks[0]
    for check in checks[1:]:
        valid = g.op("And", valid, check)
    return valid
