"""Benchmark of ``plait serve`` on an ONNX export against the same model's plait folder.

    .venv/bin/python benchmarks/serve_onnx.py                       # defaults
    .venv/bin/python benchmarks/serve_onnx.py --duration 5 --clients 1 4

The model is benchmarks/serve.py's (3 number, 2 category and 1 binary input, a binary output,
trained once on synthesized rows), exported with ``plait export_model --format onnx`` beside it.
Each of the two folders is served in turn by ``python -m plait serve --model-path F --port 0``
(local backend: the same server, the same cores), with serve.py's load generator and server
handling. Per folder: ``--warmup`` s of single rows, then for each ``--clients`` count a closed
loop of single-row ``/predict`` requests for ``--duration`` s (req/s, p50/p99 latency), then
``--batches`` ``/batch_predict`` requests of ``--batch-rows`` rows (rows/s = rows / summed latency).
Every answer is checked (HTTP 200, the model's columns). Results are printed and written as JSON
(default ``benchmarks/out/serve_onnx.json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve as bench_serve  # noqa: E402  benchmarks/serve.py: its model, load generator and server

GOAL = 1.5
"""The issue's goal: the export's single-row req/s at this multiple of the plait folder's."""


def ensure_export(model: Path) -> Path:
    export = model.parent / "onnx" / "model"  # served as "model", as the plait folder is
    if not (export / "export.json").exists():
        subprocess.run([sys.executable, "-m", "plait", "export_model", "--model_path", str(model), "--output_path",
                        str(export), "--format", "onnx"], cwd=bench_serve.ROOT, check=True, capture_output=True)
    return export


def measure(args, folder: Path, rows: list[list], pool) -> dict:
    server = bench_serve.Server(folder, "local", None)
    try:
        server.wait_ready(args.start_timeout)
        host, port, names = server.host, server.port, list(bench_serve.INPUTS)
        info = json.loads(bench_serve.get(server.url + "/info"))
        columns = {c for output in info["output_features"] for c in output["prediction_columns"]}
        singles = [bench_serve.post(host, port, "/predict", dict(zip(names, row))) for row in rows]
        batch = [bench_serve.post(host, port, "/batch_predict",
                                  {"columns": names, "data": [rows[k % len(rows)] for k in range(args.batch_rows)]})]
        pool.apply(bench_serve.load, (host, port, singles, 1, ("row", columns, 1)), {"seconds": args.warmup})
        pool.apply(bench_serve.load, (host, port, batch, 1, ("batch", columns, args.batch_rows)), {"count": 1})
        single = {clients: pool.apply(bench_serve.load, (host, port, singles, clients, ("row", columns, 1)),
                                      {"seconds": args.duration}) for clients in args.clients}
        batches = pool.apply(bench_serve.load, (host, port, batch, 1, ("batch", columns, args.batch_rows)),
                             {"count": args.batches})
        batches["rows_per_s"] = args.batch_rows * batches["answered"] / (batches["sum_ms"] / 1000)
    finally:
        stopped = server.stop()
    return {"folder": str(folder.relative_to(bench_serve.ROOT)), "server_command": shlex.join(server.command),
            "single_row": single, "batch": batches, **stopped}


def print_table(results: dict[str, dict], clients: list[int]) -> None:
    print(f"{'served from':<14}" + "".join(f"{f'{c} client(s) req/s':>20}{'p50 ms':>8}{'p99 ms':>8}" for c in clients)
          + f"{'batch rows/s':>14}{'errors':>8}")
    for name, r in results.items():
        cells = "".join(f"{r['single_row'][c]['requests_per_s']:>20.0f}{r['single_row'][c]['ms']['p50']:>8.2f}"
                        f"{r['single_row'][c]['ms']['p99']:>8.2f}" for c in clients)
        errors = sum(p["errors"] for p in r["single_row"].values()) + r["batch"]["errors"]
        print(f"{name:<14}{cells}{r['batch']['rows_per_s']:>14,.0f}{errors:>8}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--clients", type=int, nargs="+", default=[1, 4], help="concurrent single-row clients, a phase each (default 1 4)")
    add("--warmup", type=float, default=2.0, help="seconds of single-row warm-up (default 2)")
    add("--duration", type=float, default=10.0, help="seconds of each single-row phase (default 10)")
    add("--batch-rows", type=int, default=10_000, help="rows per /batch_predict request (default 10,000)")
    add("--batches", type=int, default=5, help="measured batch requests, after one of warm-up (default 5)")
    add("--data-rows", type=int, default=5_000, help="rows synthesized: the model's training data and the requests' rows")
    add("--seed", type=int, default=0, help="seed of the synthesized data (default 0)")
    add("--start-timeout", type=float, default=300.0, help="seconds to wait for the server to answer (default 300)")
    add("--out", type=Path, default=bench_serve.OUT_DIR / "serve_onnx.json", help="JSON results")
    args = parser.parse_args(argv)
    model, rows = bench_serve.ensure_model(args.data_rows, args.seed)
    folders = {"plait folder": model, "onnx export": ensure_export(model)}
    load_before = os.getloadavg()
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # the load generator: one process, reused
        results = {name: measure(args, folder, rows, pool) for name, folder in folders.items()}
    print_table(results, args.clients)
    ratios = {c: results["onnx export"]["single_row"][c]["requests_per_s"]
              / results["plait folder"]["single_row"][c]["requests_per_s"] for c in args.clients}
    print("onnx / plait folder, single-row req/s: " + ", ".join(f"{c} client(s) {r:.2f}x" for c, r in ratios.items())
          + f" (goal {GOAL}x)")
    import preprocess  # benchmarks/preprocess.py: the machine's details, as the other benchmarks give them

    report = {"benchmark": "serve_onnx", "command": shlex.join([sys.executable, *sys.argv]),
              "parameters": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "results": results, "single_row_ratio": ratios, "goal": GOAL,
              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "load_average": {"before": load_before, "after": os.getloadavg()}, "machine": preprocess.machine()}
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
