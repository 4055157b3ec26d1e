"""Overhead of the Ray backend against the local backend on the same cores.

    .venv/bin/python benchmarks/ray_overhead.py                       # all three, --repeat 3
    .venv/bin/python benchmarks/ray_overhead.py --only predict --repeat 5
    .venv/bin/python benchmarks/ray_overhead.py --preprocess-rows 1000000 --predict-rows 1000000 --train-rows 50000

For each workload the ratio is Ray throughput / local throughput on this machine's cores (a
local Ray instance with every core, started by each measured run as plait starts one on a
machine without a cluster). A ratio of 1 means Ray costs nothing beyond the local backend; the
issue's target is at least 0.8 for each.

* preprocessing: ``preprocess.py``'s cold run (a fresh cache: read, clean, split, fit, transform,
  write) on its synthetic table, local engine against Dask-on-Ray (persist);
* training: ``train.py``'s backend comparison, the local backend against Ray Train with one
  worker (ddp), the rows/s each run's training statistics record per epoch, the first epoch
  (warm-up) left out;
* batch prediction: ``predict.py``'s ``write_predictions`` from Parquet to Parquet.

Ray's start-up (a few seconds) is left out of every figure, as those scripts leave it out: it is
paid once per process, and the sizes here make each run several seconds longer than it. The
machine is shared, so the runs are interleaved (local, ray, local, ray, ...) and each ratio is
reported as the median over the pairs with its spread (lowest and highest pair), and also as
the ratio of the medians. Before each pair the script waits (``--quiet-load``, ``--quiet-wait``)
for the machine to calm down, and records the load average: other work flatters Ray (see
``wait_for_quiet``). Every Ray run uses a temp folder of its own (``private_ray_tmpdir``). Results are printed and written to ``benchmarks/out/ray_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

OUT_DIR = preprocess.OUT_DIR
TARGET = 0.8
WORKLOADS = ("preprocess", "train", "predict")


def private_ray_tmpdir() -> str:
    """A temp folder of Ray's own for every run this process starts (``RAY_TMPDIR``, inherited).

    ``ray.init()`` without an address, and plait's ``connect()``, join the cluster recorded in
    ``$RAY_TMPDIR/ray/ray_current_cluster`` when there is one: on a machine where someone else
    runs ``ray start`` (or a test's multi-node cluster), a benchmark's "local Ray" would join
    theirs. In its own temp folder it never finds one. The path stays short: Ray's socket paths
    must fit in 107 bytes."""
    import atexit

    folder = tempfile.mkdtemp(prefix="pb-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # Ray's session logs
    return folder


# One measured run per workload and backend: each returns rows/s ------------------------------------

def preprocess_run(backend: str, rows: int) -> dict:
    """``preprocess.py``'s cold run in its own subprocess and a fresh cache."""
    dataset = preprocess.ensure_dataset(rows, 0, "parquet")
    cache_dir = tempfile.mkdtemp(dir=OUT_DIR, prefix="overhead-cache-")
    try:
        run = preprocess.measure({"phase": "cold", "dataset": str(dataset), "cache_dir": cache_dir, "partitions": None,
                                  "threads": None, "backend": backend, "processor": "dask", "persist": True})
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return {"rows_per_s": rows / run["seconds"], "seconds": run["seconds"], "startup_seconds": run["startup_seconds"]}


def predict_run(backend: str, rows: int) -> dict:
    """``predict.py``'s measured ``write_predictions`` in its own subprocess."""
    model = predict.ensure_model(50_000, 0)
    dataset = preprocess.ensure_dataset(rows, 0, "parquet")
    run = predict.measure({"backend": backend, "rows": rows, "dataset": str(dataset), "model": str(model), "num_workers": None})
    return {"rows_per_s": rows / run["seconds"], "seconds": run["seconds"], "startup_seconds": run["startup_seconds"]}


def train_run(backend: str, rows: int, epochs: int = 4, **more) -> dict:
    """``train.py``'s backend comparison for one backend, in a subprocess (this process stays
    free of torch and Ray); ``more``: ``workers``, ``cpus_per_worker``."""
    spec = json.dumps({"backend": backend, "rows": rows, "epochs": epochs, **more})
    proc = subprocess.run([sys.executable, __file__, "--train-worker", spec], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"the {backend} training run failed (exit {proc.returncode})")
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))


def train_worker(spec: dict) -> dict:
    """One training run as ``train.py --backend ray`` makes it: the same config, data, seed and
    global batch of 256 split over the workers (one by default), learning rate unscaled.
    ``cpus_per_worker`` (strong_scaling.py) reserves enough of a node that no two workers share
    one."""
    import logging
    from types import SimpleNamespace

    import train

    logging.getLogger("plait").setLevel(logging.WARNING)
    df = train.make_data(spec["rows"], 42)
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as cache_dir:
        workers = spec.get("workers", 1)
        config = train.make_config(spec["epochs"], 256 // workers, cache_dir)
        config["trainer"].update(learning_rate_scaling="constant", early_stop=-1)
        if spec["backend"] == "ray":
            trainer = {"num_workers": workers, "strategy": "ddp"}
            if spec.get("cpus_per_worker"):
                trainer["resources_per_worker"] = {"CPU": spec["cpus_per_worker"]}
            config["backend"] = {"type": "ray", "cache_dir": cache_dir, "trainer": trainer}
        result = train.train_in_process(df, config, SimpleNamespace(seed=42))
    return {k: result[k] for k in ("rows_per_s", "rows_per_s_per_epoch", "data_wait_fraction", "train_call_s", "test_accuracy")}


RUNS = {"preprocess": preprocess_run, "train": train_run, "predict": predict_run}


# Interleaving and the summary ----------------------------------------------------------------------

def wait_for_quiet(max_load: float, max_wait: float) -> float:
    """Wait until the 1-minute load average is at most ``max_load`` (at most ``max_wait``
    seconds); returns the load average then. Under load the local backend loses more than Ray:
    the scheduler shares the cores per thread, and a Ray job runs more processes than the
    local backend, so a loaded machine flatters Ray's ratio."""
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def measure_workload(name: str, rows: int, args) -> dict:
    """``repeat`` pairs of runs, local then Ray, so each pair saw about the same machine load."""
    runs: dict[str, list] = {"local": [], "ray": []}
    for i in range(args.repeat):
        load = wait_for_quiet(args.quiet_load, args.quiet_wait)
        for backend in ("local", "ray"):
            runs[backend].append({**RUNS[name](backend, rows), "load_average_before_pair": load,
                                  "load_average_after": os.getloadavg()[0]})
            print(f"{name} {i + 1}/{args.repeat} {backend:5}: {runs[backend][-1]['rows_per_s']:>10,.0f} rows/s "
                  f"(load average {load:.1f} before the pair)", flush=True)
    return {"rows": rows, "repeat": args.repeat, "runs": runs, **ratios(runs)}


def ratios(runs: dict[str, list]) -> dict:
    """Median and spread of the pair ratios, and the ratio of the median throughputs."""
    local = [r["rows_per_s"] for r in runs["local"]]
    ray = [r["rows_per_s"] for r in runs["ray"]]
    pairs = [b / a for a, b in zip(local, ray)]
    return {"local_rows_per_s": statistics.median(local), "ray_rows_per_s": statistics.median(ray),
            "local_spread": [min(local), max(local)], "ray_spread": [min(ray), max(ray)],
            "pair_ratios": pairs, "ratio": statistics.median(pairs), "ratio_spread": [min(pairs), max(pairs)],
            "ratio_of_medians": statistics.median(ray) / statistics.median(local)}


def print_table(results: dict) -> None:
    print(f"\n{'workload':11} {'rows':>10} {'local rows/s (min-max)':>28} {'ray rows/s (min-max)':>28} "
          f"{'ratio (min-max)':>18} {'target':>7}")
    for name, r in results.items():
        local = f"{r['local_rows_per_s']:,.0f} ({r['local_spread'][0]:,.0f}-{r['local_spread'][1]:,.0f})"
        ray = f"{r['ray_rows_per_s']:,.0f} ({r['ray_spread'][0]:,.0f}-{r['ray_spread'][1]:,.0f})"
        ratio = f"{r['ratio']:.2f} ({r['ratio_spread'][0]:.2f}-{r['ratio_spread'][1]:.2f})"
        verdict = "met" if r["ratio"] >= TARGET else "NOT met"
        print(f"{name:11} {r['rows']:>10,} {local:>28} {ray:>28} {ratio:>18} {verdict:>7}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS), help="workloads to measure (default all)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs (local, ray) per workload (default 3)")
    parser.add_argument("--preprocess-rows", type=int, default=5_000_000, help="default 5,000,000 (about 10 s a run here)")
    parser.add_argument("--train-rows", type=int, default=200_000, help="default 200,000, 4 epochs (about 1 s an epoch here)")
    parser.add_argument("--predict-rows", type=int, default=5_000_000, help="default 5,000,000 (about 25 s a run here)")
    parser.add_argument("--quiet-load", type=float, default=0.75 * (os.cpu_count() or 1),
                        help="before each pair, wait for the 1-minute load average to fall to this (default 0.75 x cores)")
    parser.add_argument("--quiet-wait", type=float, default=120, help="but wait at most this many seconds (default 120)")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "ray_overhead.json", help="default benchmarks/out/ray_overhead.json")
    parser.add_argument("--train-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.train_worker:
        print(json.dumps(train_worker(json.loads(args.train_worker))))
        return 0
    if args.repeat <= 0 or min(args.preprocess_rows, args.train_rows, args.predict_rows) <= 0:
        parser.error("--repeat and the row counts must be positive")

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    private_ray_tmpdir()
    rows = {"preprocess": args.preprocess_rows, "train": args.train_rows, "predict": args.predict_rows}
    load_before = os.getloadavg()
    results = {name: measure_workload(name, rows[name], args) for name in args.only}
    print_table(results)
    report = {"benchmark": "ray_overhead", "target": TARGET, "results": results,
              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "load_average": {"before": load_before, "after": os.getloadavg()},
              "machine": preprocess.machine()}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
