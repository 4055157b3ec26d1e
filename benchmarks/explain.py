"""Benchmark of explanations (issue #37): integrated gradients' rows/s, locally and on Ray, beside
plain prediction's on the same rows in the same run.

    PYTHONPATH=. .venv/bin/python benchmarks/explain.py                     # 5,000 rows, 50 steps
    PYTHONPATH=. .venv/bin/python benchmarks/explain.py --rows 20000 --ray-batch-rows 0

The model is train.py's (8 number and 4 category inputs, a binary output; ``make_data`` and
``make_config``), trained for ``--epochs`` on ``--train-rows`` rows and saved once into
``benchmarks/data/`` (re-used while the parameters match). It explains ``--rows`` rows generated
with another seed, without labels: ``Model.explain`` (integrated gradients, ``--steps`` steps,
the predicted class; rows whose completeness error is over 1% are integrated again with 4x the
steps, as always) and ``Model.predict`` on the same DataFrame, each the best of ``--repeat``:

* local: in this process, torch's own threads;
* ray: a local Ray instance of this machine's cores, started here (its start is reported
  apart), then each call a Ray Data job: an actor pool (one actor per CPU, one torch thread
  each) over batches of ``plait.backends.ray.batches.BATCH_ROWS`` rows (16,384: 5,000 rows are
  one batch, for one actor) and, with ``--ray-batch-rows N``, again over batches of N rows.

rows/s = rows / seconds of the call, the job's start included. Printed as a table and written as
JSON (default ``benchmarks/out/explain.json``) with the machine's details and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from train import make_config, make_data  # noqa: E402  (benchmarks/train.py: the 200k-row benchmark's model)

DATA_DIR, OUT_DIR = HERE / "data", HERE / "out"


def ensure_model(train_rows: int, epochs: int, seed: int) -> Path:
    """train.py's model, trained briefly and saved, unless saved already with these parameters."""
    from plait import Model

    path = DATA_DIR / f"explain-model-r{train_rows}-e{epochs}-s{seed}"
    if not path.exists():
        config = make_config(epochs, 256, str(DATA_DIR / "explain-cache"))
        model = Model(config)
        started = time.perf_counter()
        model.train(dataset=make_data(train_rows, seed), progress_bar=False, random_seed=seed)
        print(f"trained on {train_rows:,} rows, {epochs} epoch(s), in {time.perf_counter() - started:.1f} s")
        model.save(path)
    return path


def best_of(repeat: int, call) -> tuple[float, object]:
    """(the fastest of ``repeat`` calls' seconds, the last call's result)."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return min(times), result


def measure(model, frame, steps: int, repeat: int) -> dict:
    predict_s, _ = best_of(repeat, lambda: model.predict(frame))
    explain_s, explanation = best_of(repeat, lambda: model.explain(frame, steps=steps))
    rows = explanation.rows
    return {"predict_s": predict_s, "predict_rows_per_s": len(frame) / predict_s,
            "explain_s": explain_s, "explain_rows_per_s": len(frame) / explain_s,
            "explain_to_predict": predict_s / explain_s, "mean_steps": float(rows["steps"].mean()),
            "refined_rows": int((rows["steps"] > steps).sum()), "max_abs_delta": explanation.summary["max_abs_delta"],
            "ranking": explanation.summary["ranking"][:4], "_rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5000, help="rows explained and predicted")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--train-rows", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--ray-batch-rows", type=int, default=1000,
                        help="also run on Ray with batches of this many rows (0: only the default batches)")
    parser.add_argument("--backends", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=str(OUT_DIR / "explain.json"))
    args = parser.parse_args(argv)

    import numpy as np

    from plait import Model

    path = ensure_model(args.train_rows, args.epochs, args.seed)
    frame = make_data(args.rows, args.seed + 7, with_label=False)
    load_before = os.getloadavg()
    results, reference = [], None
    if "local" in args.backends:
        found = measure(Model.load(path, backend="local"), frame, args.steps, args.repeat)
        reference = found.pop("_rows")
        results.append({"backend": "local", "batch_rows": None, **found})
    if "ray" in args.backends:
        import ray

        from plait.backends.ray import batches

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        started = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        ray_start_s = time.perf_counter() - started
        for batch_rows in [batches.BATCH_ROWS] + ([args.ray_batch_rows] if args.ray_batch_rows else []):
            batches.BATCH_ROWS = batch_rows
            found = measure(Model.load(path, backend="ray"), frame, args.steps, args.repeat)
            rows = found.pop("_rows")
            if reference is not None:  # the same rows as locally, to float32 rounding
                columns = [c for c in rows.columns if c.endswith("_attribution")]
                found["max_abs_difference_from_local"] = float(np.abs(rows[columns].to_numpy()
                                                                      - reference[columns].to_numpy()).max())
            results.append({"backend": "ray", "batch_rows": batch_rows, "ray_start_s": ray_start_s, **found})
        ray.shutdown()

    print(f"\n{args.rows:,} rows, integrated gradients with {args.steps} steps; train.py's model "
          f"({args.train_rows:,} rows, {args.epochs} epoch(s))\n")
    print("| backend | batches | predict rows/s | explain rows/s | explain / predict | mean steps | refined rows |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        batches_shown = "one chunk" if r["batch_rows"] is None else f"{r['batch_rows']:,} rows"
        print(f"| {r['backend']} | {batches_shown} | {r['predict_rows_per_s']:,.0f} | {r['explain_rows_per_s']:,.0f} "
              f"| 1/{1 / r['explain_to_predict']:,.0f} | {r['mean_steps']:.1f} | {r['refined_rows']} |")
    load_after = os.getloadavg()
    print(f"\nload average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} CPUs")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    record = {"rows": args.rows, "steps": args.steps, "train_rows": args.train_rows, "epochs": args.epochs,
              "repeat": args.repeat, "results": results, "commit": commit,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                          "load_before": load_before, "load_after": load_after}}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
