"""Reading datasets: CSV, TSV, Parquet, JSON and JSONL from paths or fsspec URLs, or DataFrames.

Everything is read into Arrow. Read failures become :class:`~plait.errors.DataError` naming the
file and what to check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa

from plait.errors import DataError

FORMATS = {
    ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".json": "json",
    ".jsonl": "jsonl", ".ndjson": "jsonl",
}
COMPRESSIONS = (".gz", ".bz2", ".zst", ".xz")


def data_format(path: str) -> str:
    name = path.rstrip("/").lower()
    for suffix in COMPRESSIONS:
        name = name.removesuffix(suffix)
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt
    raise DataError(
        f"cannot tell the format of {path!r} from its name; plait reads "
        f"{', '.join(sorted(FORMATS))} files (optionally compressed: {', '.join(COMPRESSIONS)})"
    )


def is_url(source: Any) -> bool:
    """A dataset named by an fsspec URL (``s3://...``): storage options apply to it."""
    return isinstance(source, str) and "://" in source


def is_dataframe(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "pandas" and type(obj).__name__ == "DataFrame"


def read_table(source: Any, storage_options: dict | None = None) -> pa.Table:
    """A whole dataset as an Arrow table."""
    if isinstance(source, pa.Table):
        return source
    if is_dataframe(source):
        return from_pandas(source)
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(f"a dataset must be a path, a URL or a pandas DataFrame, not {type(source).__name__}")
    path = os.fspath(source)
    import fsspec

    fs, fs_path = fsspec.core.url_to_fs(path, **(storage_options or {}))
    files = dataset_files(fs, fs_path, path)
    if files is not None:
        return read_files_as_one(fs, files, path)
    fmt = data_format(path)
    try:
        table = read_file(fs, fs_path, fmt)
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path!r} as {fmt.upper()}: {first_line(exc)}. Is the file complete and in that format?") from None
    if table.num_rows == 0:
        raise DataError(f"dataset {path!r} has no rows")
    return table


def from_pandas(df, empty_ok: bool = False, label: str = "the DataFrame") -> pa.Table:
    """A DataFrame (``label`` in errors) as Arrow; no rows is an error unless ``empty_ok``
    (prediction answers it). Columns mixing numbers and strings become strings, as a CSV reader
    would see them; repeated column names are kept, for the features' check to name (as a CSV's
    repeated header is)."""
    if len(df.columns) == 0:
        raise DataError(f"{label} has {len(df)} row(s) but no columns; give it a column for each feature "
                        f"the config names")
    if len(df) == 0 and not empty_ok:
        raise DataError(f"{label} has no rows")
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError):
        names = [str(name) for name in df.columns]
        return pa.Table.from_arrays([_column(df.iloc[:, i], names[i], label) for i in range(len(names))], names=names)


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _column(series, name: str, label: str) -> pa.Array:
    import numpy as np
    import pandas as pd

    if isinstance(series.dtype, pd.SparseDtype):
        series = series.sparse.to_dense()
    try:
        return pa.array(series, from_pandas=True)
    except (pa.ArrowException, ValueError, TypeError):
        pass
    values = series.astype(object).tolist()
    nested = [i for i, v in enumerate(values) if isinstance(v, (*_CONTAINERS, np.ndarray))]
    if nested:
        first = nested[0]
        other = next((i for i, v in enumerate(values) if v is not None and type(v) is not type(values[first])), None)
        with_what = f", and row {other} holds {_short(values[other])}" if other is not None else ""
        raise DataError(
            f"column {name!r} of {label} holds values of different kinds that no one column type fits: row "
            f"{first} holds {_short(values[first])}{with_what}. Give the column one kind of value (all "
            f"lists for a vector, all text or numbers for other features), or drop it")
    return pa.array([None if pd.isna(v) else str(v) for v in values], pa.string())


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def read_file(fs, fs_path: str, fmt: str) -> pa.Table:
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    if fmt == "parquet":
        return pq.read_table(fs_path, filesystem=fs)
    if fmt in ("csv", "tsv"):
        return read_csv(fs, fs_path, fmt)
    with fs.open(fs_path, "rb", compression="infer") as handle:
        head = handle.read(1024).lstrip()
        handle.seek(0)
        if fmt == "json" and head.startswith(b"["):
            import pandas as pd

            return from_pandas(pd.read_json(handle, orient="records"), label=repr(fs_path))
        return pj.read_json(handle)


# ---- CSV and TSV: every read goes through read_csv or csv_blocks ----------------------------------

CSV_BLOCK_BYTES = 16 << 20
"""The block a streamed CSV is parsed in (a whole-file read starts with Arrow's 1 MiB)."""
CSV_MAX_BLOCK_BYTES = 1 << 30
"""The largest block tried: Arrow parses a row within one block, so a row (a long text or
sequence cell) larger than this is refused."""
_GROWTH = 16
"""How much larger each next block is, after a row did not fit."""


def csv_options(fmt: str, block_size: int | None = None) -> dict:
    """The options every CSV or TSV read in plait uses, so that a file parses the same whether it
    is read whole (preprocessing) or in blocks (prediction)."""
    import pyarrow.csv as csv

    read = csv.ReadOptions(block_size=block_size) if block_size else csv.ReadOptions()
    return {"parse_options": csv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",", newlines_in_values=True),
            "convert_options": csv.ConvertOptions(strings_can_be_null=True), "read_options": read}


def read_csv(fs, file: str, fmt: str) -> pa.Table:
    """A whole CSV or TSV file (types inferred from every row), in blocks large enough for its
    largest row."""
    import pyarrow.csv as csv

    sizes = _block_sizes(fs, file, csv.ReadOptions().block_size)
    for block_size in sizes:
        try:
            with fs.open(file, "rb", compression="infer") as handle:
                table = csv.read_csv(handle, **csv_options(fmt, block_size))
        except pa.ArrowInvalid as exc:
            _raise_unless_row_too_large(exc, file, block_size, last=block_size == sizes[-1])
            continue
        _check_last_value_closed(fs, file, table)
        return table


def csv_blocks(fs, file: str, fmt: str) -> Iterator[pa.Table]:
    """A CSV or TSV file as tables of about CSV_BLOCK_BYTES each, without reading it whole (types
    inferred from the first block); a file with a header and no rows gives one empty table. A row
    larger than a block starts the read again with larger blocks, skipping the rows given."""
    import pyarrow.csv as csv

    given, sizes = 0, _block_sizes(fs, file, CSV_BLOCK_BYTES)
    for block_size in sizes:
        try:
            read = 0
            with fs.open(file, "rb", compression="infer") as handle:
                reader = csv.open_csv(handle, **csv_options(fmt, block_size))
                last = reader.schema.empty_table()
                for batch in reader:
                    read += batch.num_rows
                    if read > given:
                        last = pa.Table.from_batches([batch.slice(batch.num_rows - (read - given))])
                        given = read
                        yield last
                if read == 0:
                    yield last
        except pa.ArrowInvalid as exc:
            _raise_unless_row_too_large(exc, file, block_size, last=block_size == sizes[-1])
            continue
        _check_last_value_closed(fs, file, last)
        return


def _block_sizes(fs, file: str, first: int) -> list[int]:
    """The block sizes to try, in order: ``first``, then larger ones up to the size of the file
    (when it is known: a block that holds the whole file holds any row) or CSV_MAX_BLOCK_BYTES."""
    limit = CSV_MAX_BLOCK_BYTES
    if not file.lower().endswith(COMPRESSIONS):
        try:
            limit = min(limit, int(fs.size(file)) + 1)
        except (OSError, TypeError, ValueError):
            pass  # unknown: the cap bounds the tries
    sizes = [first]
    while sizes[-1] < limit:
        sizes.append(min(sizes[-1] * _GROWTH, limit))
    return sizes


def _check_last_value_closed(fs, file: str, table: pa.Table) -> None:
    """Refuse a file that ends inside a quoted value. Arrow reads such a value to the end of the
    file, without a word when it is in the last column (the column counts still agree): that is
    how a file cut short in a quoted value looks. A value with a line break was quoted, so a
    whole file ends with its closing quote."""
    if not table.num_rows or not pa.types.is_string(table.schema.types[-1]):
        return
    value = table.column(-1)[-1].as_py()
    if value is None or ("\n" not in value and "\r" not in value):
        return
    with fs.open(file, "rb", compression="infer") as handle:
        if file.lower().endswith(COMPRESSIONS):
            tail = b""
            while chunk := handle.read(1 << 20):
                tail = (tail + chunk)[-8:]
        else:
            handle.seek(max(0, fs.size(file) - 8))
            tail = handle.read()
    if not tail.rstrip(b"\r\n").endswith(b'"'):
        raise DataError(f"cannot read {file!r}: the quoted value of column {table.column_names[-1]!r} in its last "
                        f"row never ends (an unmatched \"). Is the file complete?")


def _raise_unless_row_too_large(exc: pa.ArrowInvalid, file: str, block_size: int, last: bool) -> None:
    """Return (to try the next, larger block) when ``exc`` says that a row did not fit in the
    block; raise ``exc`` otherwise, and a DataError when no larger block is left."""
    if "straddl" not in str(exc):
        raise exc
    if last:
        raise DataError(
            f"cannot read {file!r}: a row is longer than {block_size >> 20} MiB, or a quoted value never "
            f"ends (an unmatched \"). Is the file complete? If so, split such long values"
        ) from None


def is_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def dataset_files(fs, fs_path: str, path: str) -> list[str] | None:
    """The data files of a glob or a directory, in name order (hidden and ``_`` files skipped);
    None for a single file."""
    if is_glob(path):
        files = sorted(fs.glob(fs_path))
    elif not fs.exists(fs_path):
        raise DataError(f"dataset {path!r} does not exist")
    elif fs.isdir(fs_path):
        files = sorted(fs.find(fs_path))
    else:
        return None
    files = [f for f in files if not os.path.basename(f).startswith(("_", "."))]
    if not files:
        raise DataError(f"dataset {path!r} matches no data files")
    return files


@dataclass(frozen=True)
class RowGroups:
    """Consecutive row groups of one Parquet file: what a distributed engine reads in one task."""

    file: str
    indices: tuple[int, ...]
    rows: int


def parquet_row_groups(source: Any, storage_options: dict | None = None, empty_ok: bool = False):
    """``(filesystem, row groups, column names)`` of a Parquet dataset (a file, a directory or a
    glob of Parquet files sharing one schema), in the order :func:`read_table` reads its rows;
    None for any other source, which engines read another way. No rows is an error unless
    ``empty_ok`` (prediction, which answers an empty input with an empty output)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    import fsspec
    import pyarrow.parquet as pq

    path = os.fspath(source)
    fs, fs_path = fsspec.core.url_to_fs(path, **(storage_options or {}))
    files = dataset_files(fs, fs_path, path) or [fs_path]
    if not all(_is_parquet(f) for f in files):
        return None
    groups, schema = [], None
    for file in files:
        try:
            with fs.open(file, "rb") as handle:
                meta = pq.ParquetFile(handle).metadata
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise DataError(f"cannot read {file!r} as PARQUET: {first_line(exc)}. Is the file complete and in that format?") from None
        file_schema = meta.schema.to_arrow_schema().remove_metadata()
        check_same_columns(path, {files[0]: (schema or file_schema).names, file: file_schema.names})
        if schema is not None and not file_schema.equals(schema):
            return None  # the whole-table reader reconciles differing schemas; leave it to that
        schema = file_schema
        groups += [RowGroups(file, (i,), meta.row_group(i).num_rows) for i in range(meta.num_row_groups)]
    if not sum(g.rows for g in groups) and not empty_ok:
        raise DataError(f"dataset {path!r} has no rows")
    return fs, [g for g in groups if g.rows], schema.names


def read_row_groups(fs, groups: RowGroups) -> pa.Table:
    import pyarrow.parquet as pq

    with fs.open(groups.file, "rb") as handle:
        return pq.ParquetFile(handle).read_row_groups(list(groups.indices))


def _is_parquet(path: str) -> bool:
    try:
        return data_format(path) == "parquet"
    except DataError:
        return False


def read_files_as_one(fs, files: list[str], path: str) -> pa.Table:
    """Every data file of a directory or glob, in name order, as one table."""
    tables = []
    for file in files:
        try:
            tables.append(read_file(fs, file, data_format(file)))
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise DataError(f"cannot read {file!r}: {first_line(exc)}") from None
    check_same_columns(path, {file: table.column_names for file, table in zip(files, tables)})
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowInvalid as exc:
        raise DataError(f"files in {path!r} do not share one schema: {first_line(exc)}") from None


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, cut to ``limit`` characters (a CSV parse error
    quotes the row, which may be megabytes long)."""
    line = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
    return line if len(line) <= limit else line[:limit] + "..."


def check_same_columns(path: str, columns_by_file: dict[str, list[str]]) -> None:
    """Files of one dataset must name the same columns: merging ``x1`` from one file with ``X1``
    from another would give each column nulls where the other file's rows are."""
    files = list(columns_by_file)
    first = set(columns_by_file[files[0]])
    for file in files[1:]:
        other = set(columns_by_file[file])
        if other == first:
            continue
        only_first, only_other = sorted(first - other), sorted(other - first)
        raise DataError(
            f"files in {path!r} do not share their columns: {files[0]!r} alone has {_few(only_first)}, "
            f"{file!r} alone has {_few(only_other)}; give every file of a dataset the same column names"
        )


def _few(names: list[str], shown: int = 5) -> str:
    if not names:
        return "no other column"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(repr(n) for n in names[:shown]) + more


def check_files_share_columns(source: Any, storage_options: dict | None = None) -> None:
    """For engines that read a folder or glob with their own reader (Dask, Modin): the same check
    :func:`read_table` makes, from the files' headers and footers only."""
    if not isinstance(source, (str, os.PathLike)):
        return
    import fsspec

    path = os.fspath(source)
    fs, fs_path = fsspec.core.url_to_fs(path, **(storage_options or {}))
    files = dataset_files(fs, fs_path, path)
    if files:
        check_same_columns(path, {file: file_columns(fs, file) for file in files})


def file_columns(fs, file: str) -> list[str]:
    """A file's column names, reading as little as its format allows."""
    fmt = data_format(file)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with fs.open(file, "rb") as handle:
                return pq.ParquetFile(handle).schema_arrow.names
        if fmt in ("csv", "tsv"):
            return next(csv_blocks(fs, file, fmt), pa.table({})).column_names
        return read_file(fs, file, fmt).column_names
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {file!r}: {first_line(exc)}") from None


def image_files(path: str) -> list[str] | None:
    """The image files of a folder or glob (a local path or URL), in name order, when every data
    file there is an image; None otherwise (a single file, a table, or a folder of tables)."""
    import fsspec

    from plait.features.image_ops import IMAGE_EXTENSIONS

    fs, root = fsspec.core.url_to_fs(path)
    files = dataset_files(fs, root, path)
    if files is None or not all(f.lower().endswith(IMAGE_EXTENSIONS) for f in files):
        return None
    return [fs.unstrip_protocol(f) if is_url(path) else f for f in files]
