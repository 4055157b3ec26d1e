"""Date features: each value as Ludwig's nine numbers, year, month, day, weekday (Monday 0), day of
the year, hour, minute, second and second of the day, from dates, timestamps or their text.

Text is parsed with Arrow's strptime, one format after another over the values still unread, so
each value's reading depends on that value alone, never on the partition it sits in; a value
that fits no format is an error (Ludwig logs it and uses the time of preprocessing instead).
One thing is decided for the whole column rather than per value: whether its slash dates
(03/05/2024) are month-first or day-first. ``prepare`` reads them both ways, the training rows
decide (``finalize``: day-first when some date can only be day-first, such as 13/05/2024), and
the metadata keeps the decision, so ``transform`` reads every value, at prediction too, one way.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.config.date_encoders import DATE_COMPONENTS
from plait.errors import DataError
from plait.features.base import FeatureProcessor
from plait.features.number import MISSING_WORDS
from plait.features.text_ops import _bytes, as_strings, fixed_size_list

log = logging.getLogger("plait")

INFERRED_FORMATS = (
    "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
    "%Y/%m/%d", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M",
    "%d.%m.%Y", "%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%Y%m%d", "%Y%m%dT%H%M%S",
    "%d %b %Y", "%d %B %Y", "%b %d %Y", "%B %d %Y", "%b %d, %Y", "%B %d, %Y", "%a, %d %b %Y %H:%M:%S",
)
"""The forms tried, in order, on a value when no datetime_format is given (ISO-8601 first), then
Unix timestamps, then the slash forms of the column's order."""
MONTH_FIRST_FORMATS = ("%m/%d/%Y", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")
DAY_FIRST_FORMATS = ("%d/%m/%Y", "%d/%m/%Y %H:%M:%S", "%d/%m/%Y %H:%M")
READINGS = ("month_first", "day_first")
"""The fields of a prepared column: each value read with slash dates month-first, and day-first
(the same time for any other value; null where a reading does not fit, 13/05/2024 month-first)."""
UNREAD = np.iinfo(np.int64).min
"""The seconds of a value that a reading does not fit."""

_ZONE = r"(\d:\d\d)\s*(?:Z|UTC|GMT|[+-]\d\d(?::?\d\d)?)$"
"""A time zone after a time: the time is read in UTC, as Arrow's CSV reader reads it, so that a
dataset gives the same numbers from any file format (Ludwig keeps the time as written)."""
_ZONE_PARTS = r"\d:\d\d\s*(?:Z|UTC|GMT|(?P<sign>[+-])(?P<hours>\d\d):?(?P<minutes>\d\d)?)$"
_FRACTION = r"(:\d\d)[.,]\d+"
"""Fractional seconds, dropped: dates are read to the second."""

_PLAIN_ISO = r"^\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d)?)?$"
"""ISO-8601 without zone or fraction, which Arrow's cast reads fast (and strictly)."""

_FIRST_SECOND, _LAST_SECOND = -62135596800, 253402300799
"""0001-01-01 00:00:00 and 9999-12-31 23:59:59: the range of a numeric timestamp."""
_SECONDS_DIGITS = 9
"""Ludwig scales a numeric timestamp of more digits than a timestamp in seconds has today down to
seconds (milliseconds and the like); fixed here, so the reading does not change in 2286."""


class DateProcessor(FeatureProcessor):
    type = "date"

    def prepare(self, column: pa.Array) -> pa.StructArray:
        """Both readings (READINGS) as timestamp[s]; a null struct marks a missing value."""
        month_first, day_first, missing = read_both(column, self.preprocessing.datetime_format)
        unread = ~missing & (month_first == UNREAD) & (day_first == UNREAD)
        if unread.any():
            raise DataError(self._unread_message(column, unread))
        return pa.StructArray.from_arrays([_timestamps(month_first), _timestamps(day_first)], names=READINGS,
                                          mask=pa.array(missing))

    def _unread_message(self, column: pa.Array, unread: np.ndarray) -> str:
        first = column[int(np.flatnonzero(unread)[0])].as_py()
        fmt = self.preprocessing.datetime_format
        fix = (f"their format does not match datetime_format {fmt!r}: correct it" if fmt else
               "set preprocessing.datetime_format to their strptime format (such as %d/%m/%Y %H:%M)")
        return (f"date feature {self.name!r}: {int(unread.sum())} value(s) of column {self.column!r} are not dates "
                f"plait can read, such as {first!r}; {fix}, or clean the column")

    def partial_stats(self, column: pa.Array) -> dict:
        """The year's range, and of the slash dates: how many read only month-first, only
        day-first, or both ways (differently), each with its earliest (month-first) time."""
        month_first, day_first = (_seconds(pc.struct_field(column, [i])) for i in range(2))
        read = np.where(month_first != UNREAD, month_first, day_first)
        years = pc.year(pa.array(read[read != UNREAD], pa.timestamp("s"))).to_numpy(zero_copy_only=False)
        both = (month_first != UNREAD) & (day_first != UNREAD)
        kinds = {"month_first_only": (month_first != UNREAD) & ~both, "day_first_only": (day_first != UNREAD) & ~both,
                 "either_way": both & (month_first != day_first)}
        return {"min": int(years.min()) if years.size else None, "max": int(years.max()) if years.size else None,
                **{kind: [int(rows.sum()), int(read[rows].min()) if rows.any() else None] for kind, rows in kinds.items()}}

    def merge_stats(self, a: dict, b: dict) -> dict:
        def least(*values):
            return min((v for v in values if v is not None), default=None)

        return {"min": least(a["min"], b["min"]), "max": max((y for y in (a["max"], b["max"]) if y is not None), default=None),
                **{kind: [a[kind][0] + b[kind][0], least(a[kind][1], b[kind][1])] for kind in _ORDER_KINDS}}

    def finalize(self, stats: dict) -> dict:
        day_first = self._day_first(stats)
        fill = components(pa.array([self._fill_seconds(day_first)], pa.timestamp("s")))[0].tolist()
        fill_year = fill[0]
        return {
            "fill_value": fill,
            "datetime_format": self.preprocessing.datetime_format,
            "day_first": day_first,
            # The year's range over training, which the encoders scale the year by.
            "year_range": [stats["min"] if stats["min"] is not None else fill_year,
                           stats["max"] if stats["max"] is not None else fill_year],
        }

    def _day_first(self, stats: dict) -> bool:
        """The column's order of slash dates, from its training rows: the one that reads them all,
        month-first when both do (as Ludwig's dateutil reads them), with a warning when some
        read both ways."""
        (month_only, month_example), (day_only, day_example), (either, either_example) = (
            stats[kind] for kind in _ORDER_KINDS)
        where = f"date feature {self.name!r}: column {self.column!r}"
        fix = "set preprocessing.datetime_format to their form (such as %d/%m/%Y or %m/%d/%Y)"
        if month_only and day_only:
            raise DataError(
                f"{where} mixes month-first dates ({month_only}, such as {_written(month_example, False)}) and "
                f"day-first dates ({day_only}, such as {_written(day_example, True)}); write them all one way, "
                f"or {fix} so that the others are refused")
        if month_only or day_only:
            return bool(day_only)
        if either:
            log.warning("%s: %d date(s) such as %s read both month-first and day-first, and none tells which; they "
                        "are read month-first (as in Ludwig). If they are day-first, %s.", where, either,
                        _written(either_example, False), fix)
        return False

    def _fill_seconds(self, day_first: bool) -> int:
        text = self.preprocessing.fill_value
        if not text.strip():
            return 0  # 1970-01-01 00:00:00: deterministic, where Ludwig takes the time of preprocessing
        seconds, missing, unread = read_dates(pa.array([text]), self.preprocessing.datetime_format, day_first)
        if unread[0] or missing[0]:
            raise DataError(f"date feature {self.name!r}: preprocessing.fill_value {text!r} is not a date plait can "
                            f"read; write it as the column's dates are (such as 2024-05-01), or leave it empty")
        return int(seconds[0])

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        times = self._read_in_order(column, metadata.get("day_first"))
        matrix = components(times)
        missing = pc.is_null(times).to_numpy(zero_copy_only=False)
        matrix[missing] = np.asarray(metadata["fill_value"], dtype=np.int32)
        return fixed_size_list(matrix, pa.int32())

    def _read_in_order(self, column: pa.Array, day_first: bool | None) -> pa.Array:
        """The reading of the column's order; a slash date only the other order reads is an error.
        Metadata from before the order was kept (``day_first`` None): month-first where a value
        reads so, as those models were trained."""
        month_first, day_first_times = (pc.struct_field(column, [i]) for i in range(2))
        if day_first is None:
            return pc.coalesce(month_first, day_first_times)
        chosen, other = (day_first_times, month_first) if day_first else (month_first, day_first_times)
        wrong = pc.and_(pc.is_null(chosen), pc.is_valid(other)).to_numpy(zero_copy_only=False)
        if wrong.any():
            example = _written(int(other.filter(pa.array(wrong))[0].cast(pa.int64()).as_py()), not day_first)
            order, wrong_order = ("day-first", "month-first") if day_first else ("month-first", "day-first")
            raise DataError(
                f"date feature {self.name!r}: {int(wrong.sum())} value(s) of column {self.column!r} are {wrong_order} "
                f"dates, such as {example}, but this column's dates are read {order}, as its training data decided; "
                f"write them {order}, or set preprocessing.datetime_format and train again")
        return chosen


_ORDER_KINDS = ("month_first_only", "day_first_only", "either_way")


def _written(seconds: int, day_first: bool) -> str:
    """A date as a slash date of that order (03/05/2024), for messages."""
    return pc.strftime(pa.array([seconds], pa.timestamp("s")), format="%d/%m/%Y" if day_first else "%m/%d/%Y")[0].as_py()


def _timestamps(seconds: np.ndarray) -> pa.Array:
    unread = seconds == UNREAD
    return pa.array(np.where(unread, 0, seconds), pa.timestamp("s"), mask=unread)


def _seconds(times) -> np.ndarray:
    """timestamp[s] as int64 seconds, UNREAD for nulls."""
    return pc.fill_null(pc.cast(times, pa.int64()), UNREAD).to_numpy(zero_copy_only=False)


def components(times: pa.Array) -> np.ndarray:
    """[rows, 9] int32: the nine numbers of each timestamp (zeros for nulls)."""
    times = pc.fill_null(times, pa.scalar(0, times.type))
    parts = [pc.year(times), pc.month(times), pc.day(times), pc.day_of_week(times), pc.day_of_year(times),
             pc.hour(times), pc.minute(times), pc.second(times)]
    matrix = np.empty((len(times), len(DATE_COMPONENTS)), dtype=np.int32)
    for i, part in enumerate(parts):
        matrix[:, i] = part.to_numpy(zero_copy_only=False)
    matrix[:, 8] = matrix[:, 5] * 3600 + matrix[:, 6] * 60 + matrix[:, 7]
    return matrix


def read_dates(column: pa.Array, datetime_format: str | None,
               day_first: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds since 1970 of each value, missing mask, unreadable mask), slash dates read in the
    order ``day_first`` says (None: month-first where a value reads so, else day-first); a time
    with a zone is read in UTC."""
    month_first, day_first_seconds, missing = read_both(column, datetime_format)
    if day_first is None:
        seconds = np.where(month_first != UNREAD, month_first, day_first_seconds)
    else:
        seconds = day_first_seconds if day_first else month_first
    unread = ~missing & (seconds == UNREAD)
    return np.where(missing | unread, 0, seconds), missing, unread


def read_both(column: pa.Array, datetime_format: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds with slash dates read month-first, the same day-first, missing mask); UNREAD where
    a reading does not fit (and for missing values). Only slash dates differ between the two."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    kind = column.type
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        seconds, missing, unread = _from_temporal(column)
    elif (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and datetime_format is None:
        seconds, missing, unread = _from_numbers(column.cast(pa.float64()).to_numpy(zero_copy_only=False))
    else:
        return _from_text(as_strings(column), datetime_format)
    seconds = np.where(missing | unread, UNREAD, seconds)
    return seconds, seconds, missing


def _from_temporal(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if pa.types.is_timestamp(column.type) and column.type.tz is not None:
        column = column.cast(pa.timestamp(column.type.unit))  # the time in UTC, as for text with a zone
    if pa.types.is_date(column.type):
        column = column.cast(pa.timestamp("s"))
    seconds = pc.cast(pc.floor_temporal(column, unit="second"), pa.timestamp("s"), safe=False)
    missing = pc.is_null(seconds).to_numpy(zero_copy_only=False)
    values = pc.fill_null(seconds.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return values, missing, np.zeros(len(column), dtype=bool)


def _from_numbers(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unix timestamps; a positive value of more than ten digits is scaled down to seconds, as
    Ludwig does."""
    missing = np.isnan(numbers)
    with np.errstate(divide="ignore", invalid="ignore"):
        digits = np.floor(np.log10(numbers))
    excess = np.where(np.isfinite(digits) & (digits > _SECONDS_DIGITS), digits - _SECONDS_DIGITS, 0)
    seconds = np.floor(numbers / 10.0**excess)
    unread = ~missing & ~((seconds >= _FIRST_SECOND) & (seconds <= _LAST_SECOND))
    return np.where(missing | unread, 0, seconds).astype(np.int64), missing, unread


def _from_text(strings: pa.Array, datetime_format: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    trimmed = pc.utf8_trim_whitespace(strings)
    missing = (pc.is_null(trimmed).to_numpy(zero_copy_only=False)
               | pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(MISSING_WORDS)).to_numpy(zero_copy_only=False))
    seconds = np.zeros(len(strings), dtype=np.int64)
    read = missing.copy()
    if datetime_format is not None:
        _read_with(datetime_format, trimmed, seconds, read)  # with %z, strptime gives UTC
    _read_plain_iso(trimmed, seconds, read)
    seconds[~read] = UNREAD
    month_first, day_first = seconds, seconds.copy()
    if not read.all():
        todo = np.flatnonzero(~read)
        month_first[todo], day_first[todo] = _infer(trimmed.take(todo))
    month_first[missing] = day_first[missing] = UNREAD
    return month_first, day_first, missing


def _read_plain_iso(strings: pa.Array, seconds: np.ndarray, read: np.ndarray) -> None:
    """The fast path: ISO dates and times without zone or fraction, by Arrow's strict cast (which
    refuses 2024-02-30, as the formats below do)."""
    todo = np.flatnonzero(~read)
    subset = strings.take(todo)
    if _all_plain_iso(subset):
        iso = np.ones(len(todo), dtype=bool)
    else:
        iso = pc.match_substring_regex(subset, _PLAIN_ISO).to_numpy(zero_copy_only=False)
    if not iso.any():
        return
    try:
        parsed = pc.cast(subset if iso.all() else subset.filter(iso), pa.timestamp("s"))
    except pa.ArrowInvalid:
        return  # an impossible date among them: the formats read the others value by value
    seconds[todo[iso]] = parsed.cast(pa.int64()).to_numpy(zero_copy_only=False)
    read[todo[iso]] = True


_ISO_TEMPLATE = np.frombuffer(b"0000-00-00T00:00:00", dtype=np.uint8)
"""The longest form _PLAIN_ISO takes, byte by byte: 0 a digit, T also a space."""


def _all_plain_iso(strings: pa.Array) -> bool:
    """Whether every value fits _PLAIN_ISO, checked on the bytes when all have one length of its
    forms (10, 16 or 19: a column written by one program), as a [rows, length] matrix: six times
    faster than the regex. False also where that does not apply; the regex decides then."""
    if len(strings) == 0 or strings.null_count or not pa.types.is_string(strings.type):
        return False
    offsets, data = _bytes(strings)
    width = int(offsets[1])
    if width not in (10, 16, 19) or not (np.diff(offsets) == width).all():
        return False
    chars = data.reshape(len(strings), width)
    for position, expected in enumerate(_ISO_TEMPLATE[:width].tolist()):
        # One position of every value at a time: numpy is slow over short rows of a matrix.
        column = chars[:, position]
        if expected == ord("0"):
            fits = (column - np.uint8(ord("0"))) <= np.uint8(9)
        else:
            fits = (column == expected) | ((column == ord(" ")) if expected == ord("T") else False)
        if not fits.all():
            return False
    return True


def _infer(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(seconds with slash dates month-first, the same day-first) of values in any of the
    inferred forms, or Unix timestamps written as text; UNREAD where none fits."""
    plain = pc.replace_substring_regex(strings, _FRACTION, r"\1")
    offsets = _zone_offsets(plain)
    plain = pc.replace_substring_regex(pc.replace_substring_regex(plain, _ZONE, r"\1"), r"\s+", " ")
    seconds, read = np.zeros(len(strings), dtype=np.int64), np.zeros(len(strings), dtype=bool)
    _read_with_each(INFERRED_FORMATS, plain, seconds, read)
    seconds -= offsets
    todo = np.flatnonzero(~read)
    numeric = pc.match_substring_regex(plain.take(todo), r"^[+-]?\d+(\.\d*)?$").to_numpy(zero_copy_only=False)
    if numeric.any():
        rows = todo[numeric]
        values, _, unread = _from_numbers(plain.take(rows).cast(pa.float64()).to_numpy(zero_copy_only=False))
        seconds[rows[~unread]] = values[~unread]
        read[rows[~unread]] = True
    readings = []
    for formats in (MONTH_FIRST_FORMATS, DAY_FIRST_FORMATS):
        order_seconds, order_read = seconds.copy(), read.copy()
        if not read.all():
            _read_with_each(formats, plain, order_seconds, order_read)
            order_seconds[order_read & ~read] -= offsets[order_read & ~read]
        readings.append(np.where(order_read, order_seconds, UNREAD))
    return readings[0], readings[1]


def _read_with_each(formats: tuple[str, ...], strings: pa.Array, seconds: np.ndarray, read: np.ndarray) -> None:
    for fmt in formats:
        if read.all():
            break
        _read_with(fmt, strings, seconds, read)


def _zone_offsets(strings: pa.Array) -> np.ndarray:
    """Seconds east of UTC of each value's zone (0 without one)."""
    zones = pc.extract_regex(strings, _ZONE_PARTS)
    if zones.null_count == len(zones):
        return np.zeros(len(strings), dtype=np.int64)
    zones = pc.fill_null(zones, {"sign": "", "hours": "", "minutes": ""}) if zones.null_count else zones
    hours, minutes = (pc.if_else(pc.equal(zones.field(f), ""), "0", zones.field(f)).cast(pa.int64()).to_numpy()
                      for f in ("hours", "minutes"))
    sign = np.where(pc.equal(zones.field("sign"), "-").to_numpy(zero_copy_only=False), -1, 1)
    return sign * (hours * 3600 + minutes * 60)


def _read_with(fmt: str, strings: pa.Array, seconds: np.ndarray, read: np.ndarray) -> None:
    """Parse the values not read yet with ``fmt``; fill ``seconds`` and mark ``read`` where it fits."""
    todo = np.flatnonzero(~read)
    subset = strings.take(todo)
    parsed = pc.strptime(subset, format=fmt, unit="s", error_is_null=True)
    fits = pc.is_valid(parsed).to_numpy(zero_copy_only=False)
    if not fits.any():
        return
    rows, parsed = todo[fits], parsed.filter(fits)
    if "%z" not in fmt and "%Z" not in fmt:
        # strptime rolls 2024-02-30 over to March 1; writing the result back out tells such a value
        # from a real date (numbers compared without leading zeros, names without case).
        same = pc.equal(_canonical(pc.strftime(parsed, format=fmt)), _canonical(subset.filter(fits)))
        same = same.to_numpy(zero_copy_only=False)
        rows, parsed = rows[same], parsed.filter(same)
    seconds[rows] = parsed.cast(pa.int64()).to_numpy(zero_copy_only=False)
    read[rows] = True


def _canonical(strings: pa.Array) -> pa.Array:
    strings = pc.utf8_lower(pc.replace_substring_regex(strings, r"\s+", " "))
    return pc.replace_substring_regex(strings, r"(^|\D)0+(\d)", r"\1\2")
