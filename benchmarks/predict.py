"""Benchmark of batch prediction on raw data: the local backend against a Ray Data job.

    .venv/bin/python benchmarks/predict.py                          # 1,000,000 and 5,000,000 rows
    .venv/bin/python benchmarks/predict.py --rows 200000 --repeat 2
    .venv/bin/python benchmarks/predict.py --rows 5000000 --backends ray --num-workers 2

The data is preprocess.py's seeded synthetic table (8 number columns, 4 category columns, a
text column, a binary label; Parquet in row groups of 128 Ki rows), generated once into
``benchmarks/data/`` and re-used while the parameters match. A small model (that config, one
epoch) is trained once on ``--train-rows`` rows generated with another seed, and saved there too.

Each measurement is a subprocess, so that its peak RSS is its own, running what
``plait predict --model-path M --dataset D --backend B`` runs: predictions written as Parquet to
a temporary output folder (removed afterwards).

* local: in this process, chunk by chunk (100,000 rows), into one file;
* ray: a local Ray instance started by the subprocess, as ``plait predict --backend ray`` starts
  one on a machine without a cluster (its start-up is reported apart), then the Ray Data job:
  parallel reads, an autoscaling pool of prediction actors, part files written by Ray tasks.

rows/s = rows / seconds of the predict call. Driver peak = ``ru_maxrss`` of the subprocess: the
driver alone (Ray's raylet, object store and actors are other processes). Results are printed
and written as JSON (default ``benchmarks/out/predict.json``) with the machine's details.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import preprocess as synthetic  # noqa: E402  (benchmarks/preprocess.py: the data generator)

DATA_DIR, OUT_DIR = synthetic.DATA_DIR, synthetic.OUT_DIR


# Model ---------------------------------------------------------------------------------------

def model_path(train_rows: int, seed: int) -> Path:
    return DATA_DIR / f"predict-model-v{synthetic.GENERATOR_VERSION}-r{train_rows}-s{seed}"


def ensure_model(train_rows: int, seed: int) -> Path:
    """Train and save the model unless one with the same parameters exists (in a subprocess,
    so that this process stays small for the measured children)."""
    path = model_path(train_rows, seed)
    if not path.exists():
        sample = synthetic.ensure_dataset(train_rows, seed + 1, "parquet")
        spec = json.dumps({"sample": str(sample), "model": str(path)})
        subprocess.run([sys.executable, __file__, "--train", spec], check=True, cwd=ROOT)
    return path


def train(spec: dict) -> None:
    from plait import Model

    with tempfile.TemporaryDirectory(prefix="plait-bench-cache-") as cache_dir:
        config = {**synthetic.config(cache_dir), "trainer": {"epochs": 1, "batch_size": 256}}
        model = Model(config)
        model.train(dataset=spec["sample"], progress_bar=False)
        model.save(spec["model"])
    print(f"trained {spec['model']}")


# Measurements ----------------------------------------------------------------------------------

def worker(spec: dict) -> dict:
    """One measured prediction (run in a fresh subprocess); returns its figures."""
    import resource

    from plait import Model

    model = Model.load(spec["model"], backend=spec["backend"])
    if spec.get("num_workers") and spec["backend"] == "ray":  # the local backend has no worker settings
        trainer = model.config.backend.trainer.model_copy(update={"num_workers": spec["num_workers"]})
        model.config = model.config.model_copy(update={"backend": model.config.backend.model_copy(update={"trainer": trainer})})
    startup = 0.0
    if spec["backend"] == "ray":
        begun = time.perf_counter()
        model.backend.ensure_connected()
        startup = time.perf_counter() - begun
    out = tempfile.mkdtemp(dir=OUT_DIR, prefix="predict-")
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        started = time.perf_counter()
        written = model.write_predictions(spec["dataset"], out)
        seconds = time.perf_counter() - started
    finally:
        model.close()
        shutil.rmtree(out, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": seconds, "startup_seconds": startup, "rows_written": written.rows,
            "peak_rss_mib": after.ru_maxrss / 1024,  # KiB on Linux
            "cpu_seconds": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def measure(spec: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"the {spec['backend']} run on {spec['rows']:,} rows failed (exit {proc.returncode})")
    # The last line the worker printed is its JSON; Ray may print its own lines before it.
    result = json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))
    if result["rows_written"] != spec["rows"]:
        raise SystemExit(f"the {spec['backend']} run wrote {result['rows_written']:,} rows of {spec['rows']:,}")
    return result


def best(runs: list[dict], rows: int) -> dict:
    fastest = min(runs, key=lambda r: r["seconds"])
    return {"seconds": fastest["seconds"], "rows_per_s": rows / fastest["seconds"],
            "rows_per_s_with_startup": rows / (fastest["seconds"] + fastest["startup_seconds"]),
            "startup_seconds": fastest["startup_seconds"], "peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs),
            "runs": runs}


def print_table(results: list[dict]) -> None:
    print(f"\n{'rows':>11}  {'backend':8} {'seconds':>8} {'rows/s':>10} {'Ray start':>10} {'driver peak':>12}")
    for r in results:
        startup = f"{r['startup_seconds']:.1f} s" if r["backend"] == "ray" else "-"
        print(f"{r['rows']:>11,}  {r['backend']:8} {r['seconds']:>8.1f} {r['rows_per_s']:>10,.0f} {startup:>10} "
              f"{r['peak_rss_mib_max']:>8,.0f} MiB")


# Main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000],
                        help="rows of synthetic data to predict on, one run each (default 1,000,000 5,000,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    parser.add_argument("--train-rows", type=int, default=50_000, help="rows the model is trained on (default 50,000)")
    parser.add_argument("--backends", nargs="+", choices=("local", "ray"), default=["local", "ray"])
    parser.add_argument("--num-workers", type=int, default=None,
                        help="Ray: at most this many prediction actors (backend.trainer.num_workers; default: plait's)")
    parser.add_argument("--repeat", type=int, default=1, help="measure N times; report the fastest (default 1)")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "predict.json", help="JSON results (default benchmarks/out/predict.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--train", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.train:
        train(json.loads(args.train))
        return 0
    if min(args.rows) <= 0 or args.repeat <= 0 or args.train_rows <= 0:
        parser.error("--rows, --repeat and --train-rows must be positive")

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    model = ensure_model(args.train_rows, args.seed)
    load_before = os.getloadavg()  # other work on the machine skews the figures; say how much there was
    results = []
    for rows in args.rows:
        dataset = synthetic.ensure_dataset(rows, args.seed, "parquet")
        for backend in args.backends:
            spec = {"backend": backend, "rows": rows, "dataset": str(dataset), "model": str(model), "num_workers": args.num_workers}
            runs = [measure(spec) for _ in range(args.repeat)]
            results.append({"backend": backend, "rows": rows, "arrow_bytes": synthetic.arrow_bytes(dataset), **best(runs, rows)})
            print(f"{rows:,} rows, {backend}: {results[-1]['seconds']:.1f} s, {results[-1]['rows_per_s']:,.0f} rows/s, "
                  f"driver peak {results[-1]['peak_rss_mib_max']:,.0f} MiB")
    print_table(results)
    report = {
        "benchmark": "predict",
        "parameters": {k: v for k, v in vars(args).items() if k not in ("out", "worker", "train")},
        "model": {"path": str(model.relative_to(ROOT)), "train_rows": args.train_rows, "epochs": 1},
        "results": results,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "machine": synthetic.machine(),  # last: it imports numpy, pyarrow and pandas into this process
    }
    synthetic.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
