"""The feature-processor interface: preprocessing as a map-reduce, written once.

For every partition an engine (pandas, Dask, Modin, Ray Data) calls, in order:

1. ``prepare(column)``: cast the raw column to this feature's type, missing values kept as nulls;
2. ``partial_stats(column)`` on training partitions, ``merge_stats`` to combine two partial
   results (associative and commutative), ``finalize`` once to get JSON metadata;
3. ``transform(column, metadata)``: the model-ready column.

The functions are pure and work on Arrow arrays, so any engine can run them unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import stats as st


class FeatureProcessor(ABC):
    """Preprocessing of one feature. Subclasses declare ``type`` and the four steps."""

    type: str
    # Most features read one scalar per cell; a nested column (a Parquet list or struct) would fail
    # deep inside a cast, so it is refused up front by ``prepare_raw``. Vector features read lists.
    reads_nested: bool = False
    # ``partial_stats`` of a feature that setting this also gets each row's number (``rows=``): the
    # image feature's sample is the first training images in row order, whatever the partitions.
    stats_read_row_numbers: bool = False
    decodes_files: bool = False
    """Each row is a file to decode (images, audio): costly rows, worth many partitions."""
    training_only: bool = False
    """Read only to train (a preference trainer's rejected completions): preprocessed into the
    cache and batched, but never predicted, evaluated or asked of the data to predict."""
    data_directory: str | None = None
    """Where relative file paths in the data are read from: the dataset's folder, set by whoever
    reads the dataset (None: the working directory). File-valued features read it through
    ``plait.features.files``, the one place the rule is written."""

    def __init__(self, config, is_output: bool = False):
        self.config = config
        self.name: str = config.name
        self.column: str = config.source_column
        self.preprocessing = config.preprocessing
        self.is_output = is_output

    @property
    def described(self) -> str:
        """What this feature is to the user, for messages: ``input feature 'x'``."""
        return f"{'output' if self.is_output else 'input'} feature {self.name!r}"

    @property
    def drops_missing_rows(self) -> bool:
        return self.preprocessing.missing_value_strategy == "drop_row"

    @abstractmethod
    def prepare(self, column: pa.Array) -> pa.Array:
        """The raw column cast to this feature's canonical Arrow type; nulls mark missing values."""

    @abstractmethod
    def partial_stats(self, column: pa.Array) -> Any:
        """Statistics of one partition of the (prepared) training column."""

    @abstractmethod
    def merge_stats(self, a: Any, b: Any) -> Any:
        """Combine two partial statistics."""

    @abstractmethod
    def finalize(self, stats: Any) -> dict:
        """JSON-serializable metadata that ``transform`` needs."""

    @abstractmethod
    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        """The model-ready column for one partition."""

    def dropped_after_fit(self, column: pa.Array, metadata: dict):
        """A boolean mask of the rows (of a prepared column) to drop once the metadata is known,
        as outliers are; None when there are none. Prediction keeps every row."""
        return None

    def cache_inputs(self) -> dict:
        """What besides the config changes this feature's output (a vocabulary file's content):
        it goes into the cache key."""
        return {}

    @property
    def columns(self) -> list[str]:
        """The data columns this feature reads (a prompt may read several)."""
        return [self.column]

    def read(self, table: pa.Table) -> pa.Array:
        """This feature's raw values out of a table of the user's data, as one array."""
        return table_column(table, self.column)

    def prepare_raw(self, column: pa.Array) -> pa.Array:
        """``prepare`` for a column as read from the user's data, after checking its Arrow type."""
        kind = column.type.storage_type if isinstance(column.type, pa.BaseExtensionType) else column.type
        if pa.types.is_nested(kind) and not self.reads_nested:
            role = "output" if self.is_output else "input"
            raise DataError(
                f"{role} feature {self.name!r} ({self.type}): column {self.column!r} has Arrow type "
                f"{column.type}, but a {self.type} feature reads one value per cell (a string, a number "
                f"or a boolean). Point the feature at a scalar column, or flatten this one first"
            )
        return self.prepare(column)

    # Shared helpers ------------------------------------------------------------------------

    def fill_value(self, counts) -> Any:
        """The value missing entries get, given value counts of the training column."""
        strategy = self.preprocessing.missing_value_strategy
        if strategy == "fill_with_mode":
            top = st.most_common(counts, 1)
            return top[0] if top else getattr(self.preprocessing, "fill_value", None)
        return getattr(self.preprocessing, "fill_value", None)

    @staticmethod
    def fill(column: pa.Array, value: Any) -> pa.Array:
        if column.null_count == 0 or value is None:
            return column
        return pc.fill_null(column, pa.scalar(value, type=column.type))


def table_column(table: pa.Table, name: str) -> pa.Array:
    """A table's column as one array (its chunks combined only when there are several)."""
    column = table[name]
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def check_unique_columns(columns: list[str], processors, label: str, also: tuple[str, ...] = ()) -> None:
    """A column the features (or ``also``: the split's column) read must appear once: a CSV with
    a repeated header has two columns of that name, and which one a feature would read is a guess."""
    seen, twice = set(), set()
    for column in columns:  # linear: datasets can have many thousands of columns
        (twice if column in seen else seen).add(column)
    repeated = sorted({column for p in processors for column in p.columns if column in twice}
                      | {column for column in also if column in twice})
    if repeated:
        raise DataError(
            f"{label} has {len(repeated)} column name(s) that appear more than once and that the config "
            f"reads: {', '.join(repr(c) for c in repeated)}. Rename the duplicated header(s) so that each "
            f"column has its own name"
        )
