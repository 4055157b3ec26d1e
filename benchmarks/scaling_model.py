"""A scaling model of plait on Ray: measured parts, predicted throughput for 1 to 64 nodes.

    .venv/bin/python benchmarks/scaling_model.py                   # measure, then predict
    .venv/bin/python benchmarks/scaling_model.py --cores-per-node 16 --network-gbit 25
    .venv/bin/python benchmarks/scaling_model.py --parts benchmarks/out/scaling_parts.json   # re-use the measurements

A 2-core machine cannot show scaling, but it can measure what scaling is made of. This script
measures, on this machine:

* preprocessing, on one core (the local engine with one thread, Arrow on one thread): the time
  spent inside the per-partition functions (read, clean, fit, transform, write: what Ray runs as
  one task per partition) and the rest, which stays on the driver whatever the cluster;
* batch prediction on one core (torch on one thread, as a Ray actor runs it): per batch of
  ``BATCH_ROWS`` rows, reading it, the model (preprocessing included), writing it;
* the ECD model of ``train.py``: its gradient's size and the time of one training step against
  the batch size, on one thread;
* gloo all-reduce between 2 processes (``torch.distributed``) against the message size, 1 KB to
  64 MB, and a 2-process DDP training step of that model (a measured 2-worker point);
* Ray: the object store's put and get throughput for 16 MB numpy blocks and Arrow tables
  between tasks, and how many tasks a second the driver can hand out.

From those parts it predicts the throughput of preprocessing, DDP training and batch prediction
on ``n`` nodes of ``--cores-per-node`` cores (default 4), checks the prediction against every
point measured here (1 and 2 cores or workers, and the Ray-against-local ratios of
``ray_overhead.py`` when its JSON exists), and says, for each workload, which term limits it
from which node count: the driver, the object store, the all-reduce, the network shuffle, or
the number of partitions (batches) to share. The assumptions are printed with the predictions
and written with them to ``benchmarks/out/scaling_model.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import predict  # noqa: E402  (benchmarks/predict.py)
import preprocess  # noqa: E402  (benchmarks/preprocess.py)
import ray_overhead  # noqa: E402  (benchmarks/ray_overhead.py)

OUT_DIR = preprocess.OUT_DIR
NODES = (1, 2, 4, 8, 16, 32, 64)
ALLREDUCE_BYTES = [2**10 * 4**i for i in range(9)]  # 1 KiB .. 64 MiB
STEP_BATCHES = (8, 32, 128, 256, 1024)


def in_subprocess(function: str, spec: dict) -> dict:
    """Run one measurement in a fresh process, so that each has its own threads and imports."""
    proc = subprocess.run([sys.executable, __file__, "--part", json.dumps({"function": function, **spec})],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"measuring {function} failed (exit {proc.returncode})")
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))


# Preprocessing: per-partition work and the driver's ------------------------------------------------

def preprocess_parts(spec: dict) -> dict:
    """One cold preprocess with the local engine on ``threads`` threads, every per-partition call
    timed. With one thread, the calls' sum is the work Ray would spread over tasks and the rest
    is the driver's; the whole-table read is counted as per-partition work (Ray reads by
    partition)."""
    import pyarrow as pa

    from plait.config import load_config
    from plait.data.engines.local import LocalEngine
    from plait.data.preprocess import preprocess as run_preprocess

    if spec["threads"] == 1:
        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
    # On one thread, CPU seconds: what a core spends, whatever else shares the machine.
    clock = time.process_time if spec["threads"] == 1 else time.perf_counter
    timed = {"task_seconds": 0.0, "tasks": 0, "read_seconds": 0.0}

    class TimedEngine(LocalEngine):
        def read(self, sources, storage_options=None):
            started = clock()
            try:
                return super().read(sources, storage_options)
            finally:
                timed["read_seconds"] += clock() - started

        def _run(self, fn, parts):
            def one(part):
                started = clock()
                try:
                    return fn(part)
                finally:
                    timed["task_seconds"] += clock() - started
                    timed["tasks"] += 1
            return super()._run(one, parts)

    with tempfile.TemporaryDirectory(dir=OUT_DIR, prefix="model-cache-") as cache_dir:
        cfg = load_config(preprocess.config(cache_dir))
        started, started_cpu = time.perf_counter(), clock()
        run_preprocess(cfg, spec["dataset"], engine=TimedEngine(threads=spec["threads"]))
        seconds, cpu = time.perf_counter() - started, clock() - started_cpu
    work = timed["task_seconds"] + timed["read_seconds"]
    return {"threads": spec["threads"], "rows": spec["rows"], "seconds": seconds, "clock": clock.__name__,
            "clock_seconds": cpu, "partition_work_seconds": work,
            "driver_seconds": max(0.0, cpu - work) if spec["threads"] == 1 else None, **timed}


# Prediction: a batch's read, model and write on one core -------------------------------------------

def predict_parts(spec: dict) -> dict:
    """Per-row seconds of reading, predicting and writing, batch by batch, on one thread: what a
    Ray read task, a prediction actor and a write task each do with a batch."""
    import io

    import pyarrow.parquet as pq
    import torch

    from plait import Model
    from plait.backends.ray.batches import BATCH_ROWS
    from plait.data.reader import pieces, read_piece

    torch.set_num_threads(1)
    started = time.perf_counter()
    predictor = Model.load(spec["model"]).predictor_spec().build()  # what an actor does when it starts
    build_seconds = time.perf_counter() - started + spec["import_seconds"]
    fs, found = pieces(spec["dataset"])
    seconds = {"read": 0.0, "model": 0.0, "write": 0.0}
    rows = in_bytes = out_bytes = batches = 0
    for piece in found:
        chunks = read_piece(fs, piece, BATCH_ROWS)
        while rows < spec["rows"]:
            started = time.process_time()  # CPU seconds of one thread: robust to other work
            batch = next(chunks, None)
            if batch is None:
                break
            seconds["read"] += time.process_time() - started
            started = time.process_time()
            out = predictor.predict_chunk(batch)
            seconds["model"] += time.process_time() - started
            started = time.process_time()
            pq.write_table(out, io.BytesIO())
            seconds["write"] += time.process_time() - started
            rows, batches = rows + batch.num_rows, batches + 1
            in_bytes, out_bytes = in_bytes + batch.nbytes, out_bytes + out.nbytes
        if rows >= spec["rows"]:
            break
    return {"rows": rows, "batches": batches, "batch_rows": BATCH_ROWS, "seconds": seconds, "actor_start_seconds": build_seconds,
            "seconds_per_row": {k: v / rows for k, v in seconds.items()},
            "input_bytes_per_row": in_bytes / rows, "output_bytes_per_row": out_bytes / rows}


# Training: the model, its step and the all-reduce ---------------------------------------------------

def ecd_module(rows: int = 20_000):
    """The ECD module of ``train.py``'s config and its training tensors (preprocessed locally)."""
    import train

    from plait import Model
    from plait.models.ecd import ECD
    from plait.data.tensors import table_tensors
    from plait.training.run import seed_everything

    cache_dir = tempfile.mkdtemp(dir=OUT_DIR, prefix="model-cache-")
    model = Model(train.make_config(1, 256, cache_dir))
    data = model.preprocess(train.make_data(rows, 42))
    seed_everything(42)
    module = ECD(model.config, data.metadata)
    names = module.input_names + module.output_names
    return module, table_tensors(data.read_split("training"), data.metadata["features"], names)


def train_step_time(module, tensors, batch: int, steps: int, clock=time.perf_counter) -> float:
    """Median seconds of a training step (batch, forward, loss, backward, clip, Adam) as
    ``train.py``'s hand-written loop takes it, by ``clock``."""
    import torch

    inner = getattr(module, "module", module)  # DDP wraps the ECD module
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    rows = len(next(iter(tensors.values())))
    times = []
    for step in range(steps + 2):
        started = clock()
        index = torch.randint(0, rows, (batch,))
        picked = {name: t.index_select(0, index) for name, t in tensors.items()}
        logits = module({n: picked[n] for n in inner.input_names})
        loss, _ = inner.loss(logits, {n: picked[n] for n in inner.output_names})
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(clock() - started)
    return statistics.median(times[2:])  # the first steps warm up


def training_parts(spec: dict) -> dict:
    """Gradient size and step time against the batch size, on one torch thread."""
    import torch

    torch.set_num_threads(1)
    module, tensors = ecd_module()
    gradient_bytes = sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
    # CPU seconds on one thread: robust to other work on the machine.
    steps = {batch: train_step_time(module, tensors, batch, steps=60, clock=time.process_time) for batch in STEP_BATCHES}
    return {"gradient_bytes": gradient_bytes, "parameters": gradient_bytes // 4, "step_seconds": steps}


def gloo_parts(spec: dict) -> dict:
    """All-reduce time against message size, then a DDP step of the ECD model (per-worker batch
    ``spec['batch']``), both between 2 processes over gloo on this machine."""
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()
    port = 29_500 + os.getpid() % 1000
    mp.spawn(_gloo_rank, args=(2, port, spec["batch"], queue), nprocs=2, join=True)
    return queue.get()


def _gloo_rank(rank: int, world: int, port: int, batch: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    allreduce = {}
    for size in ALLREDUCE_BYTES:
        tensor = torch.ones(size // 4)
        repeats = max(5, min(200, (64 << 20) // size // 4))
        times = []
        for _ in range(repeats + 2):
            dist.barrier()
            started = time.perf_counter()
            dist.all_reduce(tensor)
            times.append(time.perf_counter() - started)
        allreduce[size] = statistics.median(times[2:])
    module, tensors = ecd_module()
    ddp = torch.nn.parallel.DistributedDataParallel(module)
    step = train_step_time(ddp, tensors, batch, steps=60)
    if rank == 0:
        queue.put({"allreduce_seconds": allreduce, "ddp_workers": world, "ddp_batch_per_worker": batch, "ddp_step_seconds": step})
    dist.destroy_process_group()


# Ray: the object store and the driver's task rate ---------------------------------------------------

def ray_parts(spec: dict) -> dict:
    """Put and get throughput of 16 MB blocks (numpy and Arrow) between tasks, and no-op tasks a
    second through this driver, on a local Ray instance of this machine's cores."""
    import numpy as np
    import pyarrow as pa
    import ray

    started = time.perf_counter()
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level="ERROR")
    startup = time.perf_counter() - started

    @ray.remote
    def make(kind: str, size: int):
        values = np.random.default_rng(0).random(size // 8)
        return values if kind == "numpy" else pa.table({f"c{i}": values[i::8] for i in range(8)})

    @ray.remote
    def size_of(block) -> int:
        return block.nbytes

    @ray.remote
    def noop() -> None:
        return None

    ray.get([noop.remote() for _ in range(20)])  # workers started
    throughput = {}
    for kind in ("numpy", "arrow"):
        block = ray.get(make.remote(kind, 16 << 20))
        ray.get(size_of.remote(block))  # warm
        puts, gets = [], []
        for _ in range(8):
            begun = time.perf_counter()
            ref = ray.put(block)
            puts.append(time.perf_counter() - begun)
            begun = time.perf_counter()
            ray.get(size_of.remote(ref))
            gets.append(time.perf_counter() - begun)
            del ref
        nbytes = block.nbytes
        throughput[kind] = {"block_bytes": nbytes, "put_bytes_per_s": nbytes / statistics.median(puts),
                            "task_get_bytes_per_s": nbytes / statistics.median(gets)}
    begun = time.perf_counter()
    ray.get([noop.remote() for _ in range(2000)])
    tasks_per_s = 2000 / (time.perf_counter() - begun)
    ray.shutdown()
    return {"ray_startup_seconds": startup, "object_store": throughput, "driver_tasks_per_s": tasks_per_s}


PARTS = {"preprocess_parts": preprocess_parts, "predict_parts": predict_parts, "training_parts": training_parts,
         "gloo_parts": gloo_parts, "ray_parts": ray_parts}


def measure_parts(args) -> dict:
    """Every measured part, each in its own process."""
    dataset = str(preprocess.ensure_dataset(args.measure_rows, 0, "parquet"))
    parts = {}
    for threads in (1, 2):
        parts[f"preprocess_{threads}"] = in_subprocess("preprocess_parts", {"dataset": dataset, "rows": args.measure_rows, "threads": threads})
        print(f"preprocess on {threads} thread(s): {parts[f'preprocess_{threads}']['seconds']:.2f} s", flush=True)
    model = str(predict.ensure_model(50_000, 0))
    parts["predict"] = in_subprocess("predict_parts", {"dataset": dataset, "model": model, "rows": 400_000,
                                                       "import_seconds": import_seconds("torch")})
    print(f"prediction per row on one core: {parts['predict']['seconds_per_row']}", flush=True)
    parts["training"] = in_subprocess("training_parts", {})
    print(f"training: gradient {parts['training']['gradient_bytes']:,} bytes, steps {parts['training']['step_seconds']}", flush=True)
    parts["gloo"] = in_subprocess("gloo_parts", {"batch": 128})
    print(f"gloo all-reduce: {parts['gloo']['allreduce_seconds']}", flush=True)
    parts["ray"] = in_subprocess("ray_parts", {})
    print(f"ray: {parts['ray']}", flush=True)
    parts["arrow_bytes_per_row"] = preprocess.arrow_bytes(Path(dataset)) / args.measure_rows
    return parts


def import_seconds(module: str) -> float:
    """A cold import of ``module`` in a fresh interpreter (a new actor pays it)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - started


# The model ----------------------------------------------------------------------------------------

def fitted(parts: dict, args) -> dict:
    """The model's parameters from the measured parts and the stated assumptions."""
    one = parts["preprocess_1"]
    ar = {int(k): v for k, v in parts["gloo"]["allreduce_seconds"].items()}
    large = max(ar)
    steps = {int(k): v for k, v in parts["training"]["step_seconds"].items()}
    per_row, per_fixed = _line([(b, s) for b, s in steps.items()])
    store = parts["ray"]["object_store"]["arrow"]
    return {
        "cores_per_node": args.cores_per_node,
        "network_bytes_per_s": args.network_gbit * 1e9 / 8,
        "network_latency_s": args.network_latency_us * 1e-6,
        "preprocess_partition_seconds_per_row": one["partition_work_seconds"] / one["rows"],
        "preprocess_driver_seconds_per_row": one["driver_seconds"] / one["rows"],
        "rows_per_partition": 250_000,
        "arrow_bytes_per_row": parts["arrow_bytes_per_row"],
        "store_passes": 2,  # cleaned partitions persisted once, transformed partitions once
        "store_put_bytes_per_s": store["put_bytes_per_s"],
        "driver_tasks_per_s": parts["ray"]["driver_tasks_per_s"],
        "predict_seconds_per_row": sum(parts["predict"]["seconds_per_row"].values()),
        "predict_model_seconds_per_row": parts["predict"]["seconds_per_row"]["model"],
        "predict_batch_rows": parts["predict"]["batch_rows"],
        "predict_actor_start_s": parts["predict"]["actor_start_seconds"],
        "predict_bytes_per_row": parts["predict"]["input_bytes_per_row"] + parts["predict"]["output_bytes_per_row"],
        "predict_tasks_per_batch": 3,  # a read task, an actor call, a share of a write task
        "step_seconds_fixed": per_fixed, "step_seconds_per_row": per_row,
        "gradient_bytes": parts["training"]["gradient_bytes"],
        # 2 (N - 1) = 2 ring steps for 2 processes; the least of the small messages' times, the
        # one least disturbed by other work on the machine
        "allreduce_hop_latency_s": min(t for size, t in ar.items() if size <= 64 << 10) / 2,
        "loopback_bytes_per_s": large / ar[large],  # 2 (N - 1) / N = 1 for 2 processes
        "global_batch": 256,
        "thread_efficiency": args.thread_efficiency,
    }


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    xs, ys = zip(*points)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return slope, max(0.0, my - slope * mx)


def allreduce_seconds(p: dict, nbytes: int, workers: int, nodes: int) -> float:
    """Ring all-reduce: 2 (N - 1) / N of the message over the slowest link, 2 (N - 1) hops."""
    if workers == 1:
        return 0.0
    bandwidth = p["loopback_bytes_per_s"] if nodes == 1 else min(p["network_bytes_per_s"], p["loopback_bytes_per_s"])
    latency = p["allreduce_hop_latency_s"] + (p["network_latency_s"] if nodes > 1 else 0.0)
    return 2 * (workers - 1) / workers * nbytes / bandwidth + 2 * (workers - 1) * latency


def predict_preprocess(p: dict, rows: int, nodes: int, cores: int | None = None) -> dict:
    """Dask-on-Ray preprocessing: the driver's part, the partitions' work shared by the cores (in
    whole partitions), the object store on each node, the shuffle of the output across nodes."""
    cores = cores or nodes * p["cores_per_node"]
    partitions = max(1, math.ceil(rows / p["rows_per_partition"]))
    terms = {
        "driver": rows * p["preprocess_driver_seconds_per_row"],
        "partitions": math.ceil(partitions / cores) * p["rows_per_partition"] * p["preprocess_partition_seconds_per_row"]
        if partitions > cores else rows / partitions * p["preprocess_partition_seconds_per_row"],
        "object store": p["store_passes"] * rows * p["arrow_bytes_per_row"] / (nodes * p["store_put_bytes_per_s"]),
        "shuffle": (nodes - 1) / nodes * rows * p["arrow_bytes_per_row"] / (nodes * p["network_bytes_per_s"]),
        "scheduling": 8 * partitions / p["driver_tasks_per_s"],  # about 8 tasks per partition over the passes
    }
    return _throughput(rows, terms)


def predict_prediction(p: dict, rows: int, nodes: int, cores: int | None = None) -> dict:
    """Ray Data prediction: an actor per core; each batch read, predicted and written on the
    cores; the driver hands out every task; blocks cross the network where an actor is not on
    the reader's node."""
    cores = cores or nodes * p["cores_per_node"]
    batches = math.ceil(rows / p["predict_batch_rows"])
    per_batch = p["predict_batch_rows"] * p["predict_seconds_per_row"]
    terms = {
        "actor start": p["predict_actor_start_s"],
        "compute": math.ceil(batches / cores) * per_batch,
        "driver": batches * p["predict_tasks_per_batch"] / p["driver_tasks_per_s"],
        "object store": rows * p["predict_bytes_per_row"] / (nodes * p["store_put_bytes_per_s"]),
        "network": (nodes - 1) / nodes * rows * p["predict_bytes_per_row"] / (nodes * p["network_bytes_per_s"]),
    }
    return _throughput(rows, terms, overlapped=("compute", "driver", "object store", "network"))


def predict_training(p: dict, nodes: int, workers: int | None = None, threads: int | None = None,
                     global_batch: int | None = None) -> dict:
    """DDP as plait runs it on Ray: one worker per node whose torch uses the node's cores but
    one (at ``thread_efficiency`` each beyond the first), the global batch fixed (strong
    scaling) unless given. A step is the compute of the worker's share, then the all-reduce of
    the gradient, nothing overlapped (the model is small: DDP's buckets barely overlap)."""
    workers = workers or nodes
    threads = threads or max(1, p["cores_per_node"] - 1)
    batch = global_batch or p["global_batch"]
    share = max(1, batch // workers)
    speed = 1 + (threads - 1) * p["thread_efficiency"]
    terms = {"compute": p["step_seconds_fixed"] + share * p["step_seconds_per_row"] / speed,
             "all-reduce": allreduce_seconds(p, p["gradient_bytes"], workers, nodes)}
    return _throughput(share * workers, terms)


def _throughput(rows: int, terms: dict, overlapped: tuple = ()) -> dict:
    """Rows/s from the terms' seconds: summed, except that of the ``overlapped`` ones (stages of
    a stream, which run at once) only the largest counts; the largest term is the limit."""
    streamed = [terms[k] for k in overlapped]
    seconds = sum(v for k, v in terms.items() if k not in overlapped) + (max(streamed) if streamed else 0.0)
    return {"rows_per_s": rows / seconds, "seconds": seconds, "terms": terms, "limit": max(terms, key=terms.get)}


# Checks against what was measured -------------------------------------------------------------------

def checks(parts: dict, p: dict, overhead: dict | None) -> list[dict]:
    """Predicted against measured, for every point measured on this machine."""
    rows = parts["preprocess_1"]["rows"]
    local_engine = dict(p, store_put_bytes_per_s=math.inf, driver_tasks_per_s=math.inf)  # no Ray: no store, no tasks
    out = [
        _check("preprocess, local, 1 core", predict_preprocess(local_engine, rows, 1, cores=1), rows / parts["preprocess_1"]["seconds"]),
        _check("preprocess, local, 2 cores", predict_preprocess(local_engine, rows, 1, cores=2), rows / parts["preprocess_2"]["seconds"]),
        _check("training, 1 worker, 1 thread (batch 256)", predict_training(p, 1, workers=1, threads=1),
               256 / parts["training"]["step_seconds"]["256"]),  # keys are strings: the parts went through JSON
        _check("training, 2 workers ddp, 1 thread each (128 each)", predict_training(p, 1, workers=2, threads=1),
               256 / parts["gloo"]["ddp_step_seconds"]),
    ]
    if overhead:
        out += _overhead_checks(p, overhead, local_engine)
    return out


def _overhead_checks(p: dict, overhead: dict, local: dict) -> list[dict]:
    """The Ray-against-local ratios of ``ray_overhead.py``: the model's Ray on this machine's
    cores against the model's local engine, next to the measured ratio."""
    cores = os.cpu_count()
    found = []
    results = overhead["results"]
    if "preprocess" in results:
        rows = results["preprocess"]["rows"]
        ratio = predict_preprocess(p, rows, 1, cores)["rows_per_s"] / predict_preprocess(local, rows, 1, cores)["rows_per_s"]
        found.append({"point": f"preprocess, Ray / local, {rows:,} rows", "predicted": ratio, "measured": results["preprocess"]["ratio"]})
    if "predict" in results:
        rows = results["predict"]["rows"]
        ray = predict_prediction(p, rows, 1, cores)["rows_per_s"]
        found.append({"point": f"prediction, Ray, {rows:,} rows (rows/s)", "predicted": ray, "measured": results["predict"]["ray_rows_per_s"]})
    if "predict" in results:  # the local backend: one process, torch on every core
        rows = results["predict"]["rows"]
        found.append({"point": f"prediction, local, {rows:,} rows (rows/s)",
                      "predicted": cores / p["predict_seconds_per_row"], "measured": results["predict"]["local_rows_per_s"]})
    if "train" in results:  # one worker: the same step; the model has no term for Ray's data feed
        found.append({"point": "training, Ray 1 worker / local", "predicted": 1.0, "measured": results["train"]["ratio"]})
    for check in found:
        check["error"] = check["predicted"] / check["measured"] - 1
    return found


def _check(point: str, predicted: dict, measured: float) -> dict:
    return {"point": point, "predicted": predicted["rows_per_s"], "measured": measured,
            "error": predicted["rows_per_s"] / measured - 1}


def predictions(p: dict, rows: list[int]) -> dict:
    """Throughput for each node count, and its limiting term."""
    table = {}
    for n in NODES:
        row = {f"preprocess_{r}": predict_preprocess(p, r, n) for r in rows}
        row.update({f"predict_{r}": predict_prediction(p, r, n) for r in rows})
        row["train_strong"] = predict_training(p, n)
        row["train_weak"] = predict_training(p, n, global_batch=256 * n)
        table[n] = row
    return table


def print_report(p: dict, check_rows: list[dict], table: dict) -> None:
    print("\nparameters (measured on this machine, and assumed):")
    for k, v in p.items():
        print(f"  {k:40} {v:.4g}" if isinstance(v, float) else f"  {k:40} {v}")
    print("\nchecks: predicted against measured")
    for c in check_rows:
        print(f"  {c['point']:48} predicted {c['predicted']:>12,.2f}  measured {c['measured']:>12,.2f}  error {100 * c['error']:+.0f}%")
    keys = list(next(iter(table.values())))
    print(f"\npredicted rows/s on n nodes of {p['cores_per_node']} cores (limiting term in brackets)")
    print(f"  {'nodes':>5} " + " ".join(f"{k:>27}" for k in keys))
    for n, row in table.items():
        print(f"  {n:>5} " + " ".join(f"{row[k]['rows_per_s']:>14,.0f} [{row[k]['limit'][:10]:>10}]" for k in keys))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores-per-node", type=int, default=4, help="cores of each modelled node (default 4)")
    parser.add_argument("--network-gbit", type=float, default=10.0, help="cross-node bandwidth per node, Gbit/s (default 10)")
    parser.add_argument("--network-latency-us", type=float, default=50.0, help="added per all-reduce hop across nodes, µs (default 50)")
    parser.add_argument("--thread-efficiency", type=float, default=0.7,
                        help="what each torch thread beyond the first adds to a training step, assumed (default 0.7)")
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 100_000_000], help="dataset rows to predict for")
    parser.add_argument("--measure-rows", type=int, default=1_000_000, help="rows of the preprocessing measurement (default 1,000,000)")
    parser.add_argument("--parts", type=Path, help="re-use the measured parts from this JSON instead of measuring")
    parser.add_argument("--overhead", type=Path, default=OUT_DIR / "ray_overhead.json", help="ray_overhead.py's JSON, checked when present")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "scaling_model.json")
    parser.add_argument("--part", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:
        spec = json.loads(args.part)
        print(json.dumps(PARTS[spec.pop("function")](spec)))
        return 0

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    ray_overhead.private_ray_tmpdir()
    parts = json.loads(args.parts.read_text())["parts"] if args.parts else measure_parts(args)
    p = fitted(parts, args)
    overhead = json.loads(args.overhead.read_text()) if args.overhead.exists() else None
    check_rows = checks(parts, p, overhead)
    table = predictions(p, args.rows)
    print_report(p, check_rows, table)
    report = {"benchmark": "scaling_model", "parts": parts, "parameters": p, "checks": check_rows,
              "predictions": table, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": preprocess.machine()}
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
