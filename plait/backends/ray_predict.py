"""Batch prediction and evaluation on raw data as Ray Data jobs.

* Reading: plait's own readers in parallel read tasks (a Parquet row group, or a file of another
  format, each), so rows parse as on the local backend; a DataFrame goes to the object store.
* The model: an autoscaling pool of actors (``backend.trainer``: at most ``num_workers``, each
  with ``resources_per_worker``, on GPUs with ``use_gpu``), each loading the saved model once
  from its directory (every node must see that path) to predict on batches of ``BATCH_ROWS``.
* Predictions: part files ``part-000000.<format>``... written by write tasks into a temporary
  folder, renamed to ``predictions.<format>/`` when complete and then marked ``_SUCCESS`` (the
  mark that counts on object stores, where a rename is a copy). The job preserves order: the parts in name order
  hold one row per input row, in the input's order. A dead actor is restarted and its batch
  retried, and a retried write task rewrites its own part, so no row is lost or repeated.
* Evaluation: each batch's metric statistics (counts and float64 sums), added up by the driver.

The driver holds metadata and statistics, never the data (except to return a DataFrame).
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
import tempfile
from functools import partial
from typing import Iterator, NamedTuple

import pyarrow as pa
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import BlockAccessor, BlockMetadata

from plait.predict import CachedSplit, WrittenPredictions, add_statistics, lists_as_text, metrics_of
from plait.backends.ray_train import _worker_message, plan
from plait.data.io import (RowGroups, _dataset_files, _first_line, _read_file, data_format, from_pandas, is_dataframe,
                           parquet_row_groups, read_row_groups)
from plait.errors import BackendError, DataError, PlaitError
from plait.predict import Predictor

log = logging.getLogger("plait")

BATCH_ROWS = 16_384
"""Rows per call on an actor: enough to amortize Ray's cost per batch, few enough that a retried
batch is cheap."""
PART_BYTES = 128 << 20
"""A write task gathers about this much data (in memory) into one part file."""
TABLE_BLOCK_ROWS = 100_000
"""Rows per object store block of a DataFrame to predict on."""


# ---- reading ---------------------------------------------------------------------------------------

class Piece(NamedTuple):
    """What one read task reads: row groups of a Parquet file, or a whole file."""

    file: str
    row_groups: tuple[int, ...] | None = None
    rows: int | None = None


class RawFiles(Datasource):
    """A dataset's files through plait's readers, one read task per piece, in dataset order."""

    def __init__(self, fs, pieces: list[Piece]):
        self.fs, self.pieces = fs, pieces

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context=None) -> list[ReadTask]:
        return [ReadTask(partial(_read_piece, self.fs, piece),
                         BlockMetadata(num_rows=piece.rows, size_bytes=None, exec_stats=None, input_files=[piece.file]),
                         per_task_row_limit=per_task_row_limit)
                for piece in self.pieces]


def raw_dataset(source):
    """``(Ray Dataset, column names or None when unknown before reading)`` of raw data."""
    import ray.data

    if isinstance(source, CachedSplit):
        from plait.backends.ray_loader import _arrow_filesystem

        files = source.data.split_files(source.split)
        return ray.data.read_parquet(files, filesystem=_arrow_filesystem(source.data.fs)), None
    if is_dataframe(source) or isinstance(source, pa.Table):
        table = from_pandas(source) if is_dataframe(source) else source
        blocks = [table.slice(i, TABLE_BLOCK_ROWS) for i in range(0, table.num_rows, TABLE_BLOCK_ROWS)]
        return ray.data.from_arrow(blocks or [table]), table.column_names
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(f"a dataset must be a path, a URL or a pandas DataFrame, not {type(source).__name__}")
    fs, pieces, columns = _pieces(os.fspath(source))
    return ray.data.read_datasource(RawFiles(fs, pieces)), columns


def _pieces(path: str):
    """(filesystem, pieces, column names when the footers tell them) of a path or URL."""
    import fsspec

    parquet = parquet_row_groups(path)
    if parquet is not None:
        fs, groups, columns = parquet
        return fs, [Piece(g.file, g.indices, g.rows) for g in groups], columns
    fs, fs_path = fsspec.core.url_to_fs(path)
    files = _dataset_files(fs, fs_path, path) or [fs_path]
    for file in files:
        data_format(file)  # an unknown format fails here, in the driver, naming the file
    return fs, [Piece(file) for file in files], None


def _read_piece(fs, piece: Piece) -> Iterator[pa.Table]:
    try:
        if piece.row_groups is not None:
            yield read_row_groups(fs, RowGroups(piece.file, piece.row_groups, piece.rows))
        elif data_format(piece.file) in ("csv", "tsv"):
            yield from _csv_blocks(fs, piece.file)
        else:
            yield _read_file(fs, piece.file, data_format(piece.file))
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {piece.file!r}: {_first_line(exc)}") from None


def _csv_blocks(fs, file: str) -> Iterator[pa.Table]:
    """A CSV or TSV file (compressed or not) in blocks, parsed as plait.predict.iter_chunks does."""
    import pyarrow.csv as csv

    parse = csv.ParseOptions(delimiter="\t" if data_format(file) == "tsv" else ",", newlines_in_values=True)
    with fs.open(file, "rb", compression="infer") as handle:
        reader = csv.open_csv(handle, parse_options=parse, read_options=csv.ReadOptions(block_size=16 << 20),
                              convert_options=csv.ConvertOptions(strings_can_be_null=True))
        for batch in reader:
            yield pa.Table.from_batches([batch])


# ---- the actors ------------------------------------------------------------------------------------

class _OnDevice(Predictor):
    """A Predictor whose model runs on ``device``: each batch's tensors go there and back."""

    def __init__(self, config, metadata: dict, module, device: str, cached: bool):
        super().__init__(config, metadata, module.to(device), cached=cached)
        self.device = device

    def logits(self, inputs: dict) -> dict:
        logits = super().logits({name: tensor.to(self.device) for name, tensor in inputs.items()})
        return {name: tensor.cpu() for name, tensor in logits.items()}


class _Loaded:
    """The saved model, loaded once per actor from its directory."""

    def __init__(self, model_dir: str, use_gpu: bool, cached: bool):
        from plait.api import Model

        model = Model.load(model_dir, backend="local")
        self.config = model.config
        self.predictor = _OnDevice(model.config, model.metadata, model.module, "cuda" if use_gpu else "cpu", cached)


class Predictions(_Loaded):
    """A batch's predictions, row for row (set predictions as text when written to CSV)."""

    def __init__(self, model_dir: str, use_gpu: bool, cached: bool, for_csv: bool):
        super().__init__(model_dir, use_gpu, cached)
        self.for_csv = for_csv

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.predictor.check_columns(batch, with_outputs=False)
        table = self.predictor.predict_chunk(batch)
        return lists_as_text(table, self.config) if self.for_csv else table


class Statistics(_Loaded):
    """A batch's metric statistics as one row: its rows with every target, and the flat vector."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        import torch

        from plait.training.metrics import MetricSet

        metrics = MetricSet(self.predictor.module)
        stats = metrics.zeros()
        rows = add_statistics(self.predictor, metrics, batch, stats)
        flat = torch.cat(list(stats.values())).numpy()
        return pa.table({"rows": [rows], "stats": pa.array([flat], pa.list_(pa.float64()))})


# ---- the jobs --------------------------------------------------------------------------------------

def actor_plan(settings, resources: dict) -> dict:
    """Training's ``plan``, except that without ``num_workers`` on CPUs the pool may grow to an
    actor per CPU but one (left for the read and write tasks), not just one."""
    use_gpu = settings.use_gpu if settings.use_gpu is not None else resources.get("GPU", 0) > 0
    if settings.num_workers is None and not use_gpu:
        settings = settings.model_copy(update={"num_workers": max(1, int(resources.get("CPU", 1)) - 1)})
    return plan(settings, resources)


def _mapped(model, dataset, settings, model_dir: str, actor: type, actor_args: tuple = (), ordered: bool = False):
    """The raw data with ``actor(model_dir, use_gpu, *actor_args)`` applied to each batch by the pool."""
    from ray.data import ExecutionOptions

    data, columns = raw_dataset(dataset)
    if columns is not None:  # known without reading: fail before any actor starts
        model.predictor().check_columns(pa.table({c: pa.nulls(0) for c in columns}), with_outputs=actor is Statistics)
    options, use_gpu = _pool(settings, "evaluation" if actor is Statistics else "prediction")
    context = data.context  # this dataset's own copy
    context.execution_options = ExecutionOptions(preserve_order=ordered)
    context.enable_progress_bars = context.print_on_execution_start = False
    context.raise_original_map_exception = True  # a worker's DataError reaches the driver as itself
    return data.map_batches(actor, batch_size=BATCH_ROWS, batch_format="pyarrow",
                            fn_constructor_args=(model_dir, use_gpu, isinstance(dataset, CachedSplit), *actor_args),
                            **options)


def _pool(settings, what: str) -> tuple[dict, bool]:
    """``map_batches`` options for the actor pool (its plan logged), and whether it uses GPUs."""
    import ray
    from ray.data import ActorPoolStrategy

    scaling = actor_plan(settings, ray.cluster_resources())
    resources = dict(scaling["resources_per_worker"])
    log.info("Ray Data %s: up to %d actor(s) x %s, on %s.", what, scaling["num_workers"],
             ", ".join(f"{v:g} {k}" for k, v in resources.items()), "GPU" if scaling["use_gpu"] else "CPU")
    options = {"compute": ActorPoolStrategy(min_size=1, max_size=scaling["num_workers"]),
               "num_cpus": resources.pop("CPU", None), "num_gpus": resources.pop("GPU", None), "resources": resources or None}
    return options, scaling["use_gpu"]


def predictions_frame(model, dataset, settings):
    """Predictions as a pandas DataFrame, rows in input order."""
    import pandas as pd

    with _model_directory(model) as model_dir, _ray_job("prediction"):
        batches = _mapped(model, dataset, settings, model_dir, Predictions, (False,), ordered=True)
        tables = list(batches.iter_batches(batch_size=None, batch_format="pyarrow"))
    return pa.concat_tables(tables).to_pandas() if tables else pd.DataFrame()


def write_predictions(model, dataset, settings, output_directory, fmt: str) -> WrittenPredictions:
    """Predictions written as ``<output_directory>/predictions.<fmt>/part-*.<fmt>``, all or nothing."""
    from plait.utils.fs import ensure_dir, resolve, temporary_name

    name = f"predictions.{fmt}"
    fs, folder = resolve(os.fspath(output_directory))
    final = posixpath.join(folder, name)
    tmp = temporary_name(final)
    ensure_dir(fs, tmp)
    sink = PartFiles(fs, tmp, fmt)
    try:
        with _model_directory(model) as model_dir, _ray_job("prediction"):
            _mapped(model, dataset, settings, model_dir, Predictions, (fmt == "csv",), ordered=True).write_datasink(sink)
        _replace(fs, tmp, final)
    finally:
        fs.invalidate_cache()  # workers may have written parts there
        if fs.exists(tmp):
            fs.rm(tmp, recursive=True)
    return WrittenPredictions(posixpath.join(os.fspath(output_directory), name), sink.rows)


def evaluate(model, dataset, settings) -> dict:
    """Metrics from the statistics of every batch, added up here."""
    import numpy as np
    import torch

    from plait.training.metrics import MetricSet

    metrics = MetricSet(model.module)
    total, rows = np.zeros(sum(s.numel() for s in metrics.zeros().values())), 0
    with _model_directory(model) as model_dir, _ray_job("evaluation"):
        for batch in _mapped(model, dataset, settings, model_dir, Statistics).iter_batches(
                batch_size=None, batch_format="pyarrow"):
            rows += sum(batch["rows"].to_pylist())
            total += batch["stats"].combine_chunks().flatten().to_numpy().reshape(batch.num_rows, -1).sum(axis=0)
    stats = metrics.reduce(metrics.zeros(), lambda zeros: zeros + torch.from_numpy(total))
    return metrics_of(metrics, stats, rows)


class PartFiles(Datasink):
    """Each write task's rows as one part file named by the task's index: the names sort in the
    dataset's order, and a retried task rewrites its own file."""

    def __init__(self, fs, folder: str, fmt: str):
        self.fs, self.folder, self.fmt, self.rows = fs, folder, fmt, 0

    @property
    def min_bytes_per_write(self) -> int:
        return PART_BYTES

    def write(self, blocks, ctx) -> None:
        import pyarrow.csv as csv
        import pyarrow.parquet as pq

        tables = [t for t in (BlockAccessor.for_block(b).to_arrow() for b in blocks) if t.num_rows]
        if tables:
            with self.fs.open(posixpath.join(self.folder, f"part-{ctx.task_idx:06d}.{self.fmt}"), "wb") as handle:
                (pq.write_table if self.fmt == "parquet" else csv.write_csv)(pa.concat_tables(tables), handle)

    def on_write_complete(self, write_result) -> None:
        self.rows = int(write_result.num_rows)


def _replace(fs, tmp: str, final: str) -> None:
    """Put the finished folder in place of any earlier output, then mark it complete: a rename
    on a filesystem; on an object store, which has none, a copy of each part."""
    from plait.utils.fs import is_local

    fs.invalidate_cache()  # the parts were written by other processes: list them afresh
    old = f"{tmp}.old"
    if fs.exists(final) and is_local(fs):
        fs.mv(final, old, recursive=True)  # removed once the new folder is in place
    elif fs.exists(final):
        fs.rm(final, recursive=True)
    if is_local(fs):
        fs.mv(tmp, final, recursive=True)
    else:
        parts = fs.find(tmp)
        fs.copy(parts, [posixpath.join(final, posixpath.basename(part)) for part in parts])
    fs.pipe_file(posixpath.join(final, "_SUCCESS"), b"")
    if fs.exists(old):
        fs.rm(old, recursive=True)


@contextlib.contextmanager
def _model_directory(model):
    """The directory the actors load the model from: where it was loaded from or saved, else a
    copy saved for this job in a temporary folder."""
    if model.path is not None and model.path.is_dir():
        yield str(model.path)
        return
    from plait.config.render import resolved_dict
    from plait.models.saved import save_model

    folder = tempfile.mkdtemp(prefix="plait-model-")
    try:
        yield str(save_model(os.path.join(folder, "model"), resolved_dict(model.config), model.metadata, model.module.state_dict()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _ray_job(what: str):
    """Ray Data's own log lines muted unless plait is verbose (plait logs its own), and a failure
    raised as plait's error: a worker's DataError as itself, anything else as a BackendError."""
    ray_log = logging.getLogger("ray.data")
    level = ray_log.level
    if not log.isEnabledFor(logging.DEBUG):
        ray_log.setLevel(logging.CRITICAL)
    try:
        yield
    except Exception as exc:
        log.debug("The Ray Data job failed.", exc_info=True)
        raise _plait_error(exc, what) from None
    finally:
        ray_log.setLevel(level)


def _plait_error(exc: BaseException, what: str) -> PlaitError:
    """The plait error under Ray's wrappers (a wrapper subclasses it: the original is further
    down the chain), else a BackendError with the innermost error's message."""
    for _ in range(20):
        if isinstance(exc, PlaitError) and type(exc).__module__.startswith("plait"):
            return exc
        inner = getattr(exc, "cause", None) or exc.__cause__
        if inner is None:
            break
        exc = inner
    return BackendError(f"{what} on Ray failed: {_worker_message(exc)}")
