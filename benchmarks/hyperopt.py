"""Benchmark of plait's hyperparameter search: the same 16-trial grid with FIFO and with ASHA.

    .venv/bin/python benchmarks/hyperopt.py                          # 50,000 rows, 10 epochs
    .venv/bin/python benchmarks/hyperopt.py --rows 10000 --epochs 4  # a quick look
    .venv/bin/python benchmarks/hyperopt.py --reduction-factor 2 --concurrent 1

The data is a seeded synthetic table (``plait.synthesize.synthesize_dataset``: 4 number and 2
category inputs, one binary output; written once to ``benchmarks/data/``). Both searches run
the same 16 settings, a grid of ``trainer.learning_rate`` (4 values) x ``combiner.output_size``
(4 values), ``--epochs`` epochs each, early stopping off, goal: maximize validation accuracy,
``--concurrent`` trials at once (one CPU each, backend local), one report per epoch. FIFO runs
every trial to the end; ASHA (``async_hyperband``, ``time_attr: training_iteration``,
``max_t: epochs``, ``grace_period: 1``) stops the trials in the bottom part of each rung. Every
figure is printed and written as JSON (default ``benchmarks/out/hyperopt.json``) with the
machine's details and the load average before each search (other work on the machine slows it).

What is timed
-------------
* **Ray start**: ``ray.init`` once, in a Ray temp folder of this run's own (never joining another
  cluster); both searches share it, so neither figure below includes it.
* **preprocessing**: the config is preprocessed once into a fresh cache before either search;
  both searches (and the plain run) then find it in the cache, so neither pays for it.
* **wall**: the ``hyperopt()`` call, end to end: checks, plan, cache hit, Tune's start, every
  trial, building models for stopped trials, writing the statistics.
* **best**: the highest validation accuracy of any report (any trial, any epoch) of the search;
  plait's own pick (the best trial's last report) is recorded too.
* **time to FIFO's best**: seconds from the ``hyperopt()`` call's start to the first report that
  scores at least FIFO's best minus 0.01 (one point). Report times are Tune's ``timestamp``
  column of each trial's ``progress.csv`` (whole seconds: +-1 s). The target: ASHA gets there in
  at most half of FIFO's wall time (the stricter check, against FIFO's own time to that score,
  is printed beside it).
* **slot use**: the trials' time inside Tune's trainable (sum of ``time_total_s``) over
  wall x concurrent trials: what is left is Tune's and plait's bookkeeping and idle slots.
* **per-trial overhead**: Tune times each report of a trial (``time_this_iter_s``); the first
  runs from the start of the trial's function (actor already up: Tune reuses actors) to its first
  report, the others from one report to the next, i.e. one epoch of training plus one evaluation.
  Overhead = first - median(others): config, cache read, model build and the first epoch's
  warm-up (trials with at least 3 reports). The plain run, ``plait train`` as a subprocess with
  ``OMP_NUM_THREADS=1`` (a trial's one CPU) on the same config without its hyperopt section, is
  measured the same way from the evaluation log lines' arrival: from the process's start
  (interpreter and imports included) to the first, minus the median gap between them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR, DATA_DIR = HERE / "out", HERE / "data"
sys.path.insert(0, str(ROOT))

LEARNING_RATES = [0.0001, 0.0005, 0.002, 0.01]
OUTPUT_SIZES = [8, 32, 128, 256]
OUTPUT = "label"
TARGET_TIME_RATIO, TARGET_POINTS = 0.5, 0.01


def base_config(epochs: int, cache_dir: str) -> dict:
    return {"input_features": [{"name": f"num_{i}", "type": "number"} for i in range(4)]
            + [{"name": f"cat_{i}", "type": "category"} for i in range(2)],
            "output_features": [{"name": OUTPUT, "type": "binary"}],
            "trainer": {"epochs": epochs, "batch_size": 256, "early_stop": -1},
            "backend": {"type": "local", "cache_dir": cache_dir}}


def search_config(base: dict, args, scheduler: str) -> dict:
    chosen = {"type": "fifo"} if scheduler == "fifo" else {
        "type": "async_hyperband", "time_attr": "training_iteration", "max_t": args.epochs, "grace_period": 1,
        "reduction_factor": args.reduction_factor}
    return {**base, "hyperopt": {
        "goal": "maximize", "metric": "accuracy", "output_feature": OUTPUT,
        "parameters": {"trainer.learning_rate": {"space": "grid_search", "values": LEARNING_RATES},
                       "combiner.output_size": {"space": "grid_search", "values": OUTPUT_SIZES}},
        "executor": {"max_concurrent_trials": args.concurrent, "scheduler": chosen}}}


def dataset(rows: int, seed: int) -> Path:
    from plait.synthesize import synthesize_dataset

    path = DATA_DIR / f"hyperopt-{rows}-{seed}.csv"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        synthesize_dataset(base_config(1, ""), rows, seed=seed).to_csv(path, index=False)
    return path


def start_ray(cores: int) -> float:
    """Ray in a temp folder of its own (``RAY_TMPDIR``): ``ray.init`` never joins another cluster."""
    import ray

    os.environ.pop("RAY_ADDRESS", None)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="hb-", dir="/tmp")  # short: socket paths <= 107 bytes
    start = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    return time.perf_counter() - start


def preprocess(config: dict, data: Path) -> float:
    from plait.api import Model

    start = time.perf_counter()
    model = Model(config)
    try:
        model.preprocess(str(data), random_seed=42)
    finally:
        model.close()
    return time.perf_counter() - start


def reports(run_root: Path):
    """Every Tune report of the search (each trial's ``progress.csv``), one DataFrame."""
    import pandas as pd

    frames = [pd.read_csv(p) for p in sorted((run_root / "tune").glob("*/progress.csv")) if p.stat().st_size]
    return pd.concat(frames, ignore_index=True).sort_values(["timestamp", "training_iteration"])


def overheads(frame, started: float) -> dict:
    """Per-trial overhead (see the module's docstring): seconds, from Tune's report times."""
    epoch = float(frame.loc[frame["training_iteration"] > 1, "time_this_iter_s"].median())
    trials = frame.groupby("trial_id", sort=False).agg(
        pid=("pid", "first"), first_s=("time_this_iter_s", "first"), first_at=("timestamp", "first"),
        last_at=("timestamp", "last"), busy_s=("time_total_s", "max"))
    trials["start"] = trials["first_at"] - trials["first_s"]
    trials = trials.sort_values("start")
    fresh = ~trials["pid"].duplicated()
    spans = trials.groupby("pid").agg(n=("busy_s", "size"), busy=("busy_s", "sum"), start=("start", "min"),
                                      end=("last_at", "max"))
    switches = int((spans["n"] - 1).sum())
    idle = float((spans["end"] - spans["start"] - spans["busy"])[spans["n"] > 1].sum())
    return {"epoch_interval_s": epoch, "first_step_after_search_start_s": float(frame["timestamp"].min() - started) - epoch,
            "new_process_trials": int(fresh.sum()), "in_trial_new_process_s": float((trials["first_s"][fresh] - epoch).median()),
            "in_trial_reused_process_s": float((trials["first_s"][~fresh] - epoch).median()) if switches else None,
            "between_trials_s": idle / switches if switches else None}


def search_function():
    """``hyperopt()``: in ``plait.search`` (formerly ``plait.hyperopt``)."""
    try:
        from plait.search import hyperopt
    except ModuleNotFoundError:
        from plait.hyperopt import hyperopt
    return hyperopt


def run_search(name: str, config: dict, data: Path, out: Path, concurrent: int) -> dict:
    hyperopt = search_function()
    load = os.getloadavg()
    log = out / f"{name}.log"
    with open(log, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        started = time.time()
        result = hyperopt(config, str(data), output_directory=str(out / name), random_seed=42)
        wall = time.time() - started
    frame = reports(result.run.root.local())
    statuses = [t["status"] for t in result.trials]
    return {"wall_s": wall, "started": started, "frame": frame, "load_before": load, "log": str(log),
            "search_directory": str(result.run.root.local()), "trials": len(result.trials),
            "completed": statuses.count("completed"), "stopped_early": statuses.count("stopped"),
            "errors": statuses.count("error"), "reports": len(frame), "best": float(frame["hyperopt_metric"].max()),
            "plait_best": result.best and {k: result.best[k] for k in ("trial_id", "parameters", "metric_score")},
            "slot_use": float(frame.groupby("trial_id")["time_total_s"].max().sum()) / (wall * concurrent),
            "overhead": overheads(frame, started),
            "trial_records": [{k: t[k] for k in ("trial_id", "parameters", "metric_score", "status")}
                              | {"reports": len(t["history"]), "error": t.get("error")} for t in result.trials]}


def time_to(run: dict, threshold: float) -> float | None:
    hits = run["frame"].loc[run["frame"]["hyperopt_metric"] >= threshold, "timestamp"]
    return float(hits.min() - run["started"]) if len(hits) else None


def plain_train(config: dict, data: Path, out: Path) -> dict:
    """``plait train`` as a subprocess; each evaluation log line timed as it arrives."""
    import yaml

    path = out / "plain.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in config.items() if k != "hyperopt"}))
    command = [str(ROOT / ".venv/bin/plait"), "train", "--config", str(path), "--dataset", str(data),
               "--output-directory", str(out / "plain"), "--logging-level", "info"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started, times, lines = time.perf_counter(), [], []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"epoch \d+ \| step \d+ \|", line):
                times.append(time.perf_counter() - started)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or len(times) < 3:
        sys.stderr.write("".join(lines[-40:]))
        raise SystemExit(f"plait train failed (exit {proc.returncode}, {len(times)} evaluations seen)")
    gap = statistics.median(b - a for a, b in zip(times, times[1:]))
    return {"wall_s": wall, "first_evaluation_s": times[0], "evaluation_gap_s": gap, "overhead_s": times[0] - gap}


def machine() -> dict:
    import ray
    import torch

    return {"cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "ray": ray.__version__, "platform": platform.platform()}


def summary(runs: dict) -> dict:
    fifo, asha = runs["fifo"], runs["asha"]
    threshold = fifo["best"] - TARGET_POINTS
    for run in runs.values():
        run["time_to_fifo_best_s"] = time_to(run, threshold)
    reached, fifo_reached = asha["time_to_fifo_best_s"], fifo["time_to_fifo_best_s"]
    return {"threshold": threshold, "asha_over_fifo_wall": asha["wall_s"] / fifo["wall_s"],
            "asha_over_fifo_time_to_best": reached / fifo_reached if reached is not None and fifo_reached else None,
            "target_met": reached is not None and reached <= TARGET_TIME_RATIO * fifo["wall_s"],
            "stricter_met": reached is not None and reached <= TARGET_TIME_RATIO * fifo_reached}


def fmt(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def show(args, ray_s: float, prep_s: float, plain: dict, runs: dict, comparison: dict) -> None:
    print(f"\n{args.rows:,} rows, {args.epochs} epochs, 16 trials, {args.concurrent} at once; "
          f"Ray start {ray_s:.1f} s, preprocessing (once, before both) {prep_s:.1f} s")
    print(f"{'':<6}{'wall s':>8}{'best':>8}{'to FIFO best-0.01 s':>21}{'reports':>9}{'stopped':>9}"
          f"{'errors':>8}{'slot use':>10}{'load':>7}")
    for name, run in runs.items():
        print(f"{name:<6}{run['wall_s']:>8.1f}{run['best']:>8.4f}{fmt(run['time_to_fifo_best_s']):>21}"
              f"{run['reports']:>9}{run['stopped_early']:>9}{run['errors']:>8}{run['slot_use']:>10.0%}"
              f"{run['load_before'][0]:>7.2f}")
    print(f"ASHA/FIFO: wall {comparison['asha_over_fifo_wall']:.2f}, time to FIFO's best-0.01 "
          f"{fmt(comparison['asha_over_fifo_time_to_best'], '.2f')}")
    print(f"target (ASHA within 0.01 of FIFO's best {runs['fifo']['best']:.4f} in <= half FIFO's wall time): "
          f"{'met' if comparison['target_met'] else 'NOT met'}; in <= half FIFO's own time to it: "
          f"{'met' if comparison['stricter_met'] else 'NOT met'}")
    rows = [("first step after the start", "first_step_after_search_start_s", plain["overhead_s"]),
            ("in trial, new process", "in_trial_new_process_s", None),
            ("in trial, reused process", "in_trial_reused_process_s", None),
            ("between trials, same process", "between_trials_s", None),
            ("epoch interval", "epoch_interval_s", plain["evaluation_gap_s"])]
    print(f"\n{'overhead, seconds':<30}{'fifo':>8}{'asha':>8}{'plait train':>13}")
    for label, key, plain_value in rows:
        print(f"{label:<30}{fmt(runs['fifo']['overhead'][key], '.2f'):>8}{fmt(runs['asha']['overhead'][key], '.2f'):>8}"
              f"{fmt(plain_value, '.2f'):>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=os.cpu_count() or 1, help="trials at once (1 CPU each)")
    parser.add_argument("--reduction-factor", type=float, default=3)
    parser.add_argument("--seed", type=int, default=7, help="the data's seed")
    parser.add_argument("--output", type=Path, default=OUT_DIR / "hyperopt.json")
    args = parser.parse_args()
    import logging

    for name in ("plait", "ray"):
        logging.getLogger(name).setLevel(logging.WARNING)
    data = dataset(args.rows, args.seed)
    work = Path(tempfile.mkdtemp(prefix="hyperopt-", dir=OUT_DIR.mkdir(parents=True, exist_ok=True) or OUT_DIR))
    base = base_config(args.epochs, str(work / "cache"))
    ray_s = start_ray(os.cpu_count() or 1)
    prep_s = preprocess(base, data)
    plain = plain_train(base, data, work)
    runs = {}
    for name in ("fifo", "asha"):
        runs[name] = run_search(name, search_config(base, args, name), data, work, args.concurrent)
        print(f"{name}: {runs[name]['wall_s']:.1f} s, best {runs[name]['best']:.4f} (log: {runs[name]['log']})")
    comparison = summary(runs)
    show(args, ray_s, prep_s, plain, runs, comparison)
    for run in runs.values():
        del run["frame"]
    report = {"settings": {**vars(args), "output": str(args.output), "learning_rates": LEARNING_RATES,
                           "output_sizes": OUTPUT_SIZES, "dataset": str(data), "work": str(work)},
              "machine": machine(), "ray_start_s": ray_s, "preprocess_s": prep_s, "plain_train": plain,
              "runs": runs, "comparison": comparison}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, default=str))
    print(f"Written: {args.output}")


if __name__ == "__main__":
    main()
