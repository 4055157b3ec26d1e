"""The data-engine interface: the few operations preprocessing needs from a dataframe library.

A dataset is whatever the engine partitions data into (a list of Arrow tables locally, a Dask
dataframe on Ray). Preprocessing hands the engine pure functions over one Arrow partition, so
pandas, Dask, Modin and Ray Data run exactly the same feature code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, TypeVar

import pyarrow as pa

S = TypeVar("S")
ROW_NUMBER = "__plait_row__"
"""Column holding each row's position in the input, added by ``from_table``; it keys the
seeded row hashes used for sampling and splitting."""


class DataEngine(ABC):
    name: str

    @abstractmethod
    def from_table(self, table: pa.Table) -> Any:
        """Partition a table and add the ``ROW_NUMBER`` column."""

    @abstractmethod
    def map(self, data: Any, fn: Callable[[pa.Table], pa.Table]) -> Any:
        """Apply ``fn`` to every partition independently."""

    @abstractmethod
    def reduce(self, data: Any, fn: Callable[[pa.Table], S], merge: Callable[[S, S], S]) -> S:
        """``fn`` on every partition, results combined with ``merge`` (associative, commutative)."""

    @abstractmethod
    def write_parquet(self, data: Any, fs, path: str) -> int:
        """Write the dataset as one Parquet file at ``path`` on fsspec filesystem ``fs``; returns
        the number of rows written. Output bytes must not depend on the partitioning."""

    @abstractmethod
    def to_table(self, data: Any) -> pa.Table:
        """Gather the whole dataset into one table (for small data and tests)."""


PARQUET_OPTIONS = dict(row_group_size=256 * 1024, compression="zstd", write_statistics=True)
"""Fixed writer settings: together with canonical row order they make output byte-identical."""


def parquet_options(schema: pa.Schema) -> dict:
    """``PARQUET_OPTIONS`` plus the columns to dictionary-encode, chosen from the schema alone
    (so every partitioning and engine picks the same): every leaf that is not floating point.
    Normalized floats are nearly all distinct; dictionary-encoding them is wasted work that the
    writer abandons after the first megabyte, and it leaves the file larger."""
    return {**PARQUET_OPTIONS, "use_dictionary": [path for path, leaf in _leaves(schema) if not pa.types.is_floating(leaf)]}


def _leaves(schema: pa.Schema):
    """(Parquet column path, Arrow leaf type) of every column, as the writer names them."""

    def walk(path: str, type_: pa.DataType):
        if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
            yield from walk(f"{path}.list.element", type_.value_type)
        elif pa.types.is_struct(type_):
            for i in range(type_.num_fields):
                yield from walk(f"{path}.{type_.field(i).name}", type_.field(i).type)
        else:
            yield path, type_

    for field in schema:
        yield from walk(field.name, field.type)
