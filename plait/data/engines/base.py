"""The data-engine interface: the few operations preprocessing needs from a dataframe library.

A dataset is whatever the engine partitions data into (a list of Arrow tables locally, a Dask
dataframe on Ray). Preprocessing hands the engine pure functions over one Arrow partition, so
pandas, Dask, Modin and Ray Data run exactly the same feature code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import pyarrow as pa

S = TypeVar("S")
ROW_NUMBER = "__plait_row__"
"""Column holding each row's position in the input, added by ``read``; it keys the seeded row
hashes used for sampling and splitting."""


@dataclass(frozen=True)
class Source:
    """One input: a path, URL, DataFrame or (on Ray) a Dask DataFrame or Ray Dataset; ``split``
    is the split code when the data comes pre-split (training, validation, test sets)."""

    data: Any
    split: int | None = None


class DataEngine(ABC):
    name: str

    @abstractmethod
    def read(self, sources: list[Source], storage_options: dict | None = None) -> tuple[Any, list[str]]:
        """Read the sources into partitions numbered with ``ROW_NUMBER`` (and the split column
        for pre-split sources); returns the dataset and the columns every source has."""

    @abstractmethod
    def map(self, data: Any, fn: Callable[[pa.Table], pa.Table]) -> Any:
        """Apply ``fn`` to every partition independently."""

    @abstractmethod
    def reduce(self, data: Any, fn: Callable[[pa.Table], S], merge: Callable[[S, S], S]) -> S:
        """``fn`` on every partition, results combined with ``merge`` (associative, commutative)."""

    @abstractmethod
    def collect(self, data: Any, fn: Callable[[pa.Table], S]) -> list[S]:
        """``fn`` of every partition, brought to the driver in partition order (small results)."""

    @abstractmethod
    def persist(self, data: Any) -> Any:
        """Materialize the partitions so later passes do not recompute them (or not, by setting)."""

    def expect_costly_rows(self) -> None:
        """Rows will be costly to transform (files to decode, such as images): where the engine
        can, it reads the data into enough partitions to keep every CPU busy, however few bytes
        the data itself has (a CSV of paths is one 64 MB block). The output does not change."""

    @abstractmethod
    def write(self, data: Any, tasks: list, fs, schema: pa.Schema) -> list[int]:
        """Write each :class:`~plait.data.layout.FileTask` (in parallel where the engine can);
        returns each file's size in bytes."""


PARQUET_OPTIONS = dict(row_group_size=256 * 1024, compression="zstd", write_statistics=True)
"""Fixed writer settings: together with canonical row order they make output byte-identical."""


def parquet_options(schema: pa.Schema) -> dict:
    """``PARQUET_OPTIONS`` plus the columns to dictionary-encode, chosen from the schema alone
    (so every partitioning and engine picks the same): every leaf that is not floating point.
    Normalized floats are nearly all distinct; dictionary-encoding them is wasted work that the
    writer abandons after the first megabyte, and it leaves the file larger (so are images)."""
    leaves = list(_leaves(schema))
    blobs = [path for path, leaf in leaves if _blob(leaf)]
    options = {**PARQUET_OPTIONS, "use_dictionary": [path for path, leaf in leaves if not _distinct_values(leaf)],
               "write_statistics": [path for path, leaf in leaves if not _blob(leaf)],
               "row_group_size": min(PARQUET_OPTIONS["row_group_size"], max(1, ROW_GROUP_BYTES // fixed_row_bytes(schema)))}
    if blobs:  # Snappy for pixels: 287 MB of 224x224 images wrote in 0.40 s (0.81 of the bytes), LZ4 0.56 (0.72), zstd 0.85 (0.61)
        options["compression"] = {path: "snappy" if path in blobs else "zstd" for path, _ in leaves}
    return options


ROW_GROUP_BYTES = 64 << 20
"""Row groups of rows with large fixed-size values (images) hold about this much."""


def fixed_row_bytes(schema: pa.Schema) -> int:
    """The bytes every row has in fixed-size binary columns (an image's pixels), at least 1."""
    return max(1, sum(leaf.byte_width for _, leaf in _leaves(schema) if pa.types.is_fixed_size_binary(leaf)))


def _distinct_values(leaf: pa.DataType) -> bool:
    """Leaves whose values are nearly all distinct: floats, and blobs."""
    return pa.types.is_floating(leaf) or _blob(leaf)


def _blob(leaf: pa.DataType) -> bool:
    """An image's pixels, say: no statistics either, whose minimum and maximum are whole values
    (computing them cut the writer from about 630 MB/s to 115 MB/s on 224x224 images)."""
    return pa.types.is_fixed_size_binary(leaf) or pa.types.is_binary(leaf)


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
