"""A function mapped over batches of data as a Ray Data job (prediction and evaluation at scale).

* Reading: plait's own chunk reader in parallel read tasks (a Parquet row group, or a file of
  another format, each), so rows parse as on the local backend; a DataFrame goes to the object
  store; a cached split is read as Parquet.
* The function: an autoscaling pool of actors (``backend.trainer``: at most ``num_workers``,
  each with ``resources_per_worker``, on GPUs with ``use_gpu``), each building it once from its
  picklable factory (a model is loaded once per actor), applied to batches of ``BATCH_ROWS``.
* Writing: each write task writes one part file of the sink's part folder, named by the task's
  index, so the parts in name order hold the rows in input order; a dead actor is restarted and
  its batch retried, and a retried write task rewrites its own part.

The driver holds metadata and statistics, never the data (except where its caller collects it).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import warnings
from functools import partial
from typing import Iterator

import pyarrow as pa
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import BlockAccessor, BlockMetadata

from plait.backends.ray.cluster import check_room, describe_nodes, plan_with_room, room_for
from plait.backends.ray.errors import plait_error_of, worker_message
from plait.backends.ray.train import plan
from plait.errors import BackendError
from plait.data.reader import CachedSplit, Piece, in_memory_table, pieces, read_piece

log = logging.getLogger("plait")

BATCH_ROWS = 16_384
"""Rows per call on an actor: enough to amortize Ray's cost per batch, few enough that a retried
batch is cheap."""
PART_BYTES = 128 << 20
"""A write task gathers about this much data (in memory) into one part file."""
TABLE_BLOCK_ROWS = 100_000
"""Rows per object store block of a DataFrame."""
READ_TASK_CPUS = 0.5
"""What a read task reserves: reading is a small part of the work (the model is most of it), and
reads must find room beside an actor pool that covers every core."""


# ---- reading ---------------------------------------------------------------------------------------

class RawFiles(Datasource):
    """A dataset's files through plait's reader, one read task per piece, in dataset order."""

    def __init__(self, fs, found: list[Piece]):
        self.fs, self.pieces = fs, found

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context=None) -> list[ReadTask]:
        # Blocks of one batch each: the actors take them as they come, without re-batching.
        return [ReadTask(partial(read_piece, self.fs, piece, BATCH_ROWS),
                         BlockMetadata(num_rows=piece.rows, size_bytes=None, exec_stats=None, input_files=[piece.file]),
                         per_task_row_limit=per_task_row_limit)
                for piece in self.pieces]


def source_dataset(source) -> tuple:
    """``(Ray Dataset, rows or None when unknown before reading)`` of raw data or a cached split.
    Files are read one task per piece (a Parquet row group, or a file), in blocks of a batch."""
    import ray.data

    read_args = {"num_cpus": READ_TASK_CPUS}
    if isinstance(source, CachedSplit):
        from plait.backends.ray.loader import read_cached_parquet

        return (read_cached_parquet(source.data.split_files(source.split), source.data.fs, **read_args),
                source.data.rows(source.split))
    table = in_memory_table(source)
    if table is not None:
        blocks = [table.slice(i, TABLE_BLOCK_ROWS) for i in range(0, table.num_rows, TABLE_BLOCK_ROWS)]
        return ray.data.from_arrow(blocks or [table]), table.num_rows
    fs, found = pieces(source)
    rows = [piece.rows for piece in found]
    dataset = ray.data.read_datasource(RawFiles(fs, found), **read_args)
    return dataset, (sum(rows) if None not in rows else None)


# ---- the actors ------------------------------------------------------------------------------------

class BatchActor:
    """An actor's function, built once from its factory on the actor's device."""

    def __init__(self, make_function, use_gpu: bool):
        self.function = make_function("cuda" if use_gpu else "cpu")

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.function(batch)


def actor_plan(settings, resources: dict, nodes: list[dict] | None = None) -> dict:
    """Training's ``plan``, except that without ``num_workers`` on CPUs the pool has an actor
    per CPU, each reserving a share of one ((C - 1) / C of C CPUs, at least half) so that the read
    and write tasks always find room beside them. The model is most of prediction's work, and
    an actor's torch runs one thread: this way it runs on every core. Given the ``nodes``'
    resources, the pool takes the room there is beside one read task (``READ_TASK_CPUS``): actors
    that took every CPU would wait for data forever. It is refused only when no actor fits."""
    use_gpu = settings.use_gpu if settings.use_gpu is not None else resources.get("GPU", 0) > 0
    if settings.num_workers is None and not use_gpu:
        cpus = max(1, int(resources.get("CPU", 1)))
        update: dict = {"num_workers": cpus}
        if settings.resources_per_worker is None:
            update["resources_per_worker"] = {"CPU": round(max(0.5, (cpus - 1) / cpus), 2)}
        settings = settings.model_copy(update=update)
    scaling = plan(settings, resources)
    if nodes is not None:
        per_actor = scaling["resources_per_worker"]
        check_room(per_actor, nodes, 1, "backend.trainer: the Ray Data actor pool")
        fits = int(min(scaling["num_workers"], room_for(per_actor, with_room_for_reads(nodes))))
        if fits < 1:
            raise BackendError(
                f"backend.trainer.resources_per_worker: a Ray Data actor of {_shown(per_actor)} leaves no room for the "
                f"{READ_TASK_CPUS:g}-CPU tasks that read its data, on a cluster with {describe_nodes(nodes, per_actor)}; "
                "give each actor less (for prediction, a fraction of a CPU per actor is enough), or add nodes")
        if fits < scaling["num_workers"]:
            log.info("Ray Data: %d actor(s), not %d, leave room for the tasks that read their data.", fits,
                     scaling["num_workers"])
        scaling["num_workers"] = fits
    return scaling


def with_room_for_reads(nodes: list[dict]) -> list[dict]:
    """The nodes, the one with the most CPUs short of one read task's: where reads still run
    when the actors have taken all they can."""
    if not nodes:
        return nodes
    largest = max(range(len(nodes)), key=lambda i: nodes[i].get("CPU", 0))
    return [{**node, "CPU": node.get("CPU", 0) - READ_TASK_CPUS} if i == largest else node
            for i, node in enumerate(nodes)]


def _shown(resources: dict) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in resources.items())


def _mapped(source, make_function, settings, ordered: bool, what: str):
    """The source with the function applied to each batch by the actor pool."""
    data, rows = source_dataset(source)
    options, use_gpu = _pool(settings, what, rows)
    context = data.context  # this dataset's own copy
    context.execution_options = _execution_options(ordered)
    context.enable_progress_bars = context.print_on_execution_start = False
    context.raise_original_map_exception = True  # a worker's DataError reaches the driver as itself
    context.read_op_min_num_blocks = 1  # the read tasks' blocks are batches already: no splitting
    return data.map_batches(BatchActor, batch_size=BATCH_ROWS, batch_format="pyarrow",
                            fn_constructor_args=(make_function, use_gpu), **options)


def _execution_options(ordered: bool):
    """The job's order, and no actor locality: with it Ray Data hands a batch to an actor on the
    node that holds it while that actor has room in its queue, so with the reads on one or two
    nodes their actors took every batch and the rest idled (the device's 16 cores: 8 nodes
    predicted no faster than 1). A batch is a few MiB; the model's work on it is seconds."""
    from ray.data import ExecutionOptions

    with warnings.catch_warnings():
        # Ray 2.60 deprecates the option ("Ray Data manages actor locality internally") but still
        # obeys it; a Ray without it places batches its own way.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return ExecutionOptions(preserve_order=ordered, actor_locality_enabled=False)
        except TypeError:
            return ExecutionOptions(preserve_order=ordered)


def _pool(settings, what: str, rows: int | None) -> tuple[dict, bool]:
    """``map_batches`` options for the actor pool (its plan logged), and whether it uses GPUs.
    The pool starts whole: grown on demand, it stays at one actor while the reads set the pace.
    It holds no more actors than the data has batches, when the rows are known."""
    from ray.data import ActorPoolStrategy

    scaling = plan_with_room(partial(actor_plan, settings), settings.scheduling_timeout_s)
    resources = dict(scaling["resources_per_worker"])
    size = scaling["num_workers"] if rows is None else max(1, min(scaling["num_workers"], -(-rows // BATCH_ROWS)))
    log.info("Ray Data %s: %d actor(s) x %s, on %s.", what, size,
             ", ".join(f"{v:g} {k}" for k, v in resources.items()), "GPU" if scaling["use_gpu"] else "CPU")
    options = {"compute": ActorPoolStrategy(size=size),
               "num_cpus": resources.pop("CPU", None), "num_gpus": resources.pop("GPU", None), "resources": resources or None}
    return options, scaling["use_gpu"]


# ---- the jobs --------------------------------------------------------------------------------------

def mapped_batches(source, make_function, settings, ordered: bool, what: str) -> Iterator[pa.Table]:
    """The function's output for every batch, streamed back to this process."""
    with _ray_job(what):
        yield from _mapped(source, make_function, settings, ordered, what).iter_batches(
            batch_size=None, batch_format="pyarrow")


def write_mapped_batches(source, make_function, settings, sink):
    """The function's output written by parallel write tasks as the sink's part files, all or
    nothing."""
    with sink.part_folder() as parts, _ray_job("prediction"):
        writer = PartFiles(parts)
        _mapped(source, make_function, settings, ordered=True, what="prediction").write_datasink(writer)
    return sink.written(writer.rows)


class PartFiles(Datasink):
    """Each write task's rows as one part file named by the task's index."""

    def __init__(self, parts):
        self.parts, self.rows = parts, 0

    @property
    def min_bytes_per_write(self) -> int:
        return PART_BYTES

    def write(self, blocks, ctx) -> None:
        self.parts.write_part(ctx.task_idx, [BlockAccessor.for_block(b).to_arrow() for b in blocks])

    def on_write_complete(self, write_result) -> None:
        self.rows = int(write_result.num_rows)


@contextlib.contextmanager
def _ray_job(what: str):
    """Ray Data's own log lines muted unless plait is verbose (plait logs its own), and a failure
    raised as plait's error: a worker's DataError as itself, anything else as a BackendError."""
    # An earlier job that failed left its executor in reference cycles that hold its actor
    # pool's handles: until a garbage collection those actors live on, holding CPUs that this
    # job's pool is sized around (or that an actor it must restart waits for, for ever).
    gc.collect()
    _actor_tracker_outside_placement_groups()
    ray_log = logging.getLogger("ray.data")
    level = ray_log.level
    if not log.isEnabledFor(logging.DEBUG):
        ray_log.setLevel(logging.CRITICAL)
    try:
        yield
    except Exception as exc:
        log.debug("The Ray Data job failed.", exc_info=True)
        raise plait_error_of(exc) or BackendError(f"{what} on Ray failed: {worker_message(exc)}") from None
    finally:
        ray_log.setLevel(level)


def _actor_tracker_outside_placement_groups() -> None:
    """Make Ray Data's ActorLocationTracker, unless it exists, outside any placement group.

    Every actor pool job on a cluster shares that one detached actor, made by the first job that
    needs it. Made by a job inside a Ray Tune trial (a k-fold fold, a search trial), whose placement
    group captures the actors its code starts, it lived in that trial's group and was killed when
    the trial ended, under the jobs of the trials still running: they failed with a
    SystemException (seen in tests/test_kfold.py: two folds at once). Made here first, with an
    explicit scheduling strategy (which Ray does not override with the trial's group), it outlives
    every trial. The options are Ray Data's own; a Ray without the class changes nothing."""
    try:
        import ray
        from ray.data._internal.execution.node_trackers.actor_location import ActorLocationTracker
    except ImportError:
        return
    node = {ray._raylet.RAY_NODE_ID_KEY: ray.get_runtime_context().get_node_id()}
    ActorLocationTracker.options(name="ActorLocationTracker", namespace="ActorLocationTracker", get_if_exists=True,
                                 lifetime="detached", label_selector=node, max_concurrency=8,
                                 scheduling_strategy="DEFAULT").remote()
