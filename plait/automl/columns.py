"""What each column of a dataset holds, and the feature type that follows: Ludwig 0.17's AutoML
rules, with the reason for every choice in words a person can check.

``profile`` reads a column once into a :class:`ColumnProfile` (distinct values, missing share,
words per value, whether its values read as numbers, dates, files or vectors); ``infer_type``
and ``exclusion`` apply the rules to it. The rules, in Ludwig's order: a date column is a date;
one value is a category; two values that are conventional booleans (yes/no, true/false, 1/0,
...) with none missing are binary; paths to three or more images or audio files are image or
audio; five or more words per value on average is text; fewer distinct values than half the rows
is a category unless they are numbers that are not one unbroken run of integers; numbers are
numbers; anything else is text. Left out: a column of one value, a column of unique values named
like an id, and (in a table of over three columns) text of under five words per value (unless its
words recur, below).

Where plait goes beyond Ludwig (each named in the reason it writes): text whose every value is
the same count of numbers is a vector (Ludwig would read 64 pixel values as text); a first
column that counts the rows (0, 1, 2, ... as a CSV index writes it) is left out; and short text
whose words recur across rows is kept (car names, whose first word is the maker: Ludwig's rule
left them out of benchmarks/model_quality.py's cars_origin, and the origin with them, 0.73
against 0.98).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

SAMPLE = 10_000
"""Values read for the words, dates, files and vectors checks (every value for the counts)."""
CATEGORY_SHARE = 0.5
"""A column with fewer distinct values than this share of the rows may be a category (Ludwig's)."""
RECURRING_WORDS = 0.5
"""Short text whose distinct words are under this share of all its words (each word used twice
or more, on average) is kept: plait's rule."""
TEXT_WORDS = 5
"""Words per value from which a column is text (Ludwig's)."""
TRUE_WORDS = frozenset({"true", "t", "yes", "y", "1", "1.0", "on"})
FALSE_WORDS = frozenset({"false", "f", "no", "n", "0", "0.0", "off"})
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg")
_DATE_SHAPE = re.compile(r"^\s*(\d{1,4}[-/.]\d{1,2}([-/.]\d{1,4})?|\d{1,2}\s+[A-Za-z]{3,9}\s+\d{2,4}|[A-Za-z]{3,9}\s+\d{1,2},?\s+\d{2,4})")


@dataclass(frozen=True)
class ColumnProfile:
    name: str
    position: int
    rows: int
    distinct: int
    """Distinct values, missing ones not counted."""
    missing: float
    """Share of rows with no value."""
    examples: tuple[str, ...]
    """Up to ten distinct values, as text."""
    numbers: bool
    """Every value is a number (stored as one, or as its text)."""
    integer_run: bool
    """The distinct values are every integer from the smallest to the largest."""
    row_counter: bool
    """The values are 0, 1, 2, ... (or 1, 2, 3, ...) in row order."""
    words: float | None
    """Words per value on average (text columns only)."""
    word_share: float | None
    """Distinct words over all words (text columns only): low when words recur across rows."""
    dates: bool
    """Stored as dates or times, or text that every sampled value of reads as one."""
    files: str | None
    """image or audio: three or more values name such files."""
    vector_length: int | None
    """Every sampled value is this many numbers (two or more) separated by spaces."""


def profile(table: pa.Table) -> list[ColumnProfile]:
    return [_profile(table.column(i).to_pandas(), name, i) for i, name in enumerate(table.column_names)]


def _profile(values, name: str, position: int) -> ColumnProfile:
    import pandas as pd

    present = values.dropna()
    distinct = present.unique()
    stored_as_text = pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)
    text = [str(v) for v in present.iloc[:SAMPLE]] if stored_as_text else []  # the checks of text columns
    numbers = _numeric(values, distinct, stored_as_text)
    tokens = [t.split() for t in text]
    count = sum(map(len, tokens))
    return ColumnProfile(
        name=name, position=position, rows=len(values), distinct=len(distinct),
        missing=float(values.isna().mean()) if len(values) else 0.0,
        examples=tuple(str(v) for v in distinct[:10]),
        numbers=numbers,
        integer_run=numbers and _integer_run(distinct),
        row_counter=numbers and _counts_rows(values),
        words=count / len(text) if text else None,
        word_share=len({w for words in tokens for w in words}) / count if count else None,
        dates=pd.api.types.is_datetime64_any_dtype(values) or (stored_as_text and not numbers and _dates(text)),
        files=_files(text) if stored_as_text else None,
        vector_length=_vector_length(text) if stored_as_text and not numbers else None,
    )


def _numeric(values, distinct, stored_as_text: bool) -> bool:
    import pandas as pd

    if pd.api.types.is_bool_dtype(values):
        return False
    if not stored_as_text:
        return pd.api.types.is_numeric_dtype(values)
    return len(distinct) > 0 and bool(pd.to_numeric(pd.Series(distinct, dtype=object), errors="coerce").notna().all())


def _integer_run(distinct) -> bool:
    """Whether the distinct numbers are every integer from the smallest to the largest."""
    import numpy as np

    as_numbers = np.asarray([float(v) for v in distinct], dtype=float)
    finite = as_numbers[np.isfinite(as_numbers)]
    if not len(finite) or not np.all(finite == np.round(finite)):
        return False
    return int(finite.max() - finite.min()) + 1 == len(finite)


def _counts_rows(values) -> bool:
    import numpy as np

    if values.isna().any() or len(values) < 2:
        return False
    as_numbers = np.asarray(values.astype(float))
    start = as_numbers[0]
    return start in (0.0, 1.0) and bool(np.array_equal(as_numbers, np.arange(start, start + len(values))))


def _dates(text: list[str]) -> bool:
    import pandas as pd

    sample = text[:200]
    if not sample or not all(_DATE_SHAPE.match(t) for t in sample):
        return False
    return bool(pd.to_datetime(pd.Series(sample), errors="coerce", format="mixed").notna().all())


def _files(text: list[str]) -> str | None:
    lowered = [t.lower() for t in text[:1000]]
    for kind, suffixes in (("image", IMAGE_SUFFIXES), ("audio", AUDIO_SUFFIXES)):
        if sum(t.endswith(suffixes) for t in lowered) >= 3:
            return kind
    return None


def _vector_length(text: list[str]) -> int | None:
    lengths = set()
    for t in text[:1000]:
        parts = t.split()
        try:
            [float(p) for p in parts]
        except ValueError:
            return None
        lengths.add(len(parts))
        if len(lengths) > 1:
            return None
    length = next(iter(lengths), 0)
    return length if length >= 2 else None


def is_conventional_boolean(examples: tuple[str, ...]) -> bool:
    lowered = {e.strip().lower() for e in examples}
    return len(lowered) == 2 and len(lowered & TRUE_WORDS) == 1 and len(lowered & FALSE_WORDS) == 1


def infer_type(column: ColumnProfile) -> tuple[str, str]:
    """The column's feature type and why."""
    share = f"{column.distinct:,} distinct values in {column.rows:,} rows"
    if column.dates:
        return "date", "its values are dates"
    if column.distinct <= 1:
        return "category", "a single value"
    if column.distinct == 2 and column.missing == 0 and is_conventional_boolean(column.examples):
        return "binary", f"two values that read as true and false ({', '.join(sorted(column.examples))})"
    if column.files:
        return column.files, f"its values are paths to {column.files} files"
    if column.vector_length:
        return "vector", (f"every value is {column.vector_length} numbers separated by spaces (plait's rule: "
                          "Ludwig would read them as text)")
    if column.words is not None and column.words >= TEXT_WORDS:
        return "text", f"{column.words:.1f} words per value on average (text from {TEXT_WORDS})"
    if column.distinct < column.rows * CATEGORY_SHARE:
        if not column.numbers:
            return "category", f"{share}: under half as many values as rows"
        if column.integer_run:
            return "category", f"{share}, every integer from the smallest to the largest: labels more than amounts"
    if column.numbers:
        return "number", f"numbers, {share}"
    reason = f"{share}, not numbers: too many values for a category"
    if (column.words or 0) < TEXT_WORDS and recurring_words(column):
        reason += (f"; {column.words:.1f} words per value, but its words recur ({column.word_share:.0%} distinct), so "
                   "kept (plait's rule: Ludwig leaves text of under five words out of a table of over three columns)")
    return "text", reason


def recurring_words(column: ColumnProfile) -> bool:
    """Whether the column's words are shared across rows (a maker's name in car names)."""
    return column.word_share is not None and column.word_share < RECURRING_WORDS


def exclusion(column: ColumnProfile, kind: str, columns: int) -> str | None:
    """Why the column is left out of the inputs, or None to keep it."""
    if column.distinct <= 1:
        return "a single value: nothing to learn from"
    if column.distinct == column.rows:
        upper = column.name.upper()
        if upper.startswith("ID") or upper.endswith("ID") or (column.position == 0 and "INDEX" in upper and kind == "number"):
            return "every value differs and the name says it is an identifier"
        if column.position == 0 and column.row_counter:
            return "the first column counts the rows (0, 1, 2, ...): a saved index (plait's rule)"
    if columns > 3 and kind == "text" and (column.words or 0) < TEXT_WORDS and not recurring_words(column):
        return (f"text of {column.words or 0:.1f} words per value, each word mostly its own: more likely names or "
                "codes than text worth an encoder")
    return None
