"""Benchmark of plait's hyperparameter search: the same 16-trial grid with FIFO and with ASHA.

    .venv/bin/python benchmarks/hyperopt.py                          # 50,000 rows, 10 epochs
    .venv/bin/python benchmarks/hyperopt.py --rows 10000 --epochs 4 --reduction-factor 2

The data is a seeded synthetic table (``plait.synthesize.synthesize_dataset``: 4 number and 2
category inputs, a binary output; kept in ``benchmarks/data/``). Both searches run the same 16
settings, a grid of ``trainer.learning_rate`` (4 values) x ``combiner.output_size`` (4 values),
``--epochs`` epochs each, early stopping off, maximizing validation accuracy, ``--concurrent``
trials at once (1 CPU each, backend local), one report per epoch. FIFO runs every trial to the
end; ASHA (``async_hyperband``, ``time_attr: training_iteration``, ``max_t``: the epochs,
``grace_period: 1``, ``--reduction-factor``) stops the trials in the bottom part of a rung.
Every figure is printed and written as JSON (default ``benchmarks/out/hyperopt.json``) with the
machine's details and the load average before each search; the searches' folders and logs stay
in ``benchmarks/out/hyperopt-*/``.

What is timed
-------------
* **not timed**: Ray's start (one ``ray.init`` with every core, in a Ray temp folder of its own so
  that it joins no other cluster; both searches share it) and preprocessing (once, into a fresh
  cache, before anything else: the searches and the plain run find it there). Both are printed.
* **wall**: the ``hyperopt()`` call: checks, plan, cache hit, Tune's start, the trials' processes
  and trials, models for stopped trials, the statistics.
* **best**: the highest validation accuracy of any report (any trial, any epoch), which is also
  the best trial's score in plait's statistics (a trial scores its best evaluation).
* **to best / to FIFO best-0.01**: from the ``hyperopt()`` call's start to the first report that
  scores the search's own best / FIFO's best minus one point. Report times are the ``timestamp``
  column of each trial's Tune ``progress.csv``: whole seconds, so 0 to 1 s early. The target,
  ASHA reaching FIFO's best-0.01 in at most half the time, is checked against half of FIFO's wall
  time, of FIFO's time to its best, and of FIFO's time to that same score.
* **slot use**: the trials' time inside Tune's trainable (sum of ``time_total_s``) over wall x
  concurrent trials; the rest is start-up, bookkeeping and idle slots.
* **overhead**: Tune times each report (``time_this_iter_s``): a trial's first from its function's
  start (its process already up) to the report, the others from report to report, whose median
  is the *epoch interval* (one epoch's training and evaluation). *first step after start*: the
  call's start to the first report, minus an epoch interval (Tune's start, trial processes,
  imports, model build). *in trial*: a trial's first report minus an epoch interval (median over
  trials in a new process / in one Tune reused). *between trials*: a reused process's time from
  its first trial's start to its last report not inside a trial's ``time_total_s``, per change of
  trial (saving a model, Tune stopping and starting trials). The plain run: ``plait train`` as a
  subprocess (``OMP_NUM_THREADS=1``, a trial's one CPU) on the same config without its hyperopt
  section, its evaluation log lines timed as they arrive: the epoch interval is their median gap,
  the first step after start from the process's start to the first line, minus that.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import platform
import re
import shutil
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
        synthesize_dataset(base_config(1, ""), rows, seed=seed).to_csv(path.with_suffix(".part"), index=False)
        path.with_suffix(".part").rename(path)
    return path


def start_ray(cores: int) -> float:
    os.environ.pop("RAY_ADDRESS", None)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    folder = tempfile.mkdtemp(prefix="hb-", dir="/tmp")  # a short path: Ray's socket paths must fit 107 bytes
    os.environ["RAY_TMPDIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # runs after Ray's own shutdown, registered later
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    return time.perf_counter() - start


def run_search(name: str, config: dict, data: Path, out: Path, concurrent: int) -> dict:
    import pandas as pd

    from plait.search import hyperopt

    load, log = os.getloadavg(), out / f"{name}.log"
    with open(log, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        started = time.time()
        result = hyperopt(config, str(data), output_directory=str(out / name), random_seed=42)
        wall = time.time() - started
    root = result.run.root.local()
    frames = [pd.read_csv(p) for p in sorted(root.glob("tune/*/progress.csv")) if p.stat().st_size]
    if not frames:
        raise SystemExit(f"the {name} search made no report: see {log} and {root}")
    frame = pd.concat(frames, ignore_index=True).sort_values(["timestamp", "training_iteration"])
    statuses = [t["status"] for t in result.trials]
    return {"wall_s": wall, "started": started, "frame": frame, "load_before": load, "log": str(log),
            "search_directory": str(root), "trials": len(result.trials), "completed": statuses.count("completed"),
            "stopped_early": statuses.count("stopped"), "errors": statuses.count("error"), "reports": len(frame),
            "best": float(frame["hyperopt_metric"].max()),
            "plait_best": result.best and {k: result.best[k] for k in ("trial_id", "parameters", "metric_score")},
            "slot_use": float(frame.groupby("trial_id")["time_total_s"].max().sum()) / (wall * concurrent),
            "overhead": overheads(frame, started),
            "trial_records": [{k: t[k] for k in ("trial_id", "parameters", "metric_score", "status", "error")}
                              | {"reports": len(t["history"])} for t in result.trials]}


def overheads(frame, started: float) -> dict:
    """The search's overhead figures (see the module's docstring), in seconds."""
    epoch = float(frame.loc[frame["training_iteration"] > 1, "time_this_iter_s"].median())
    trials = frame.groupby("trial_id").agg(pid=("pid", "first"), first_s=("time_this_iter_s", "first"),
                                           first_at=("timestamp", "first"), end=("timestamp", "last"),
                                           busy=("time_total_s", "max"))
    trials = trials.assign(start=trials["first_at"] - trials["first_s"]).sort_values("start")
    fresh = ~trials["pid"].duplicated()
    per_process = trials.groupby("pid").agg(n=("busy", "size"), busy=("busy", "sum"), start=("start", "min"),
                                            end=("end", "max"))
    reused = per_process[per_process["n"] > 1]
    changes = int((reused["n"] - 1).sum())
    idle = float((reused["end"] - reused["start"] - reused["busy"]).sum())
    first = trials["first_s"] - epoch
    return {"epoch_interval_s": epoch, "first_step_after_start_s": float(frame["timestamp"].min() - started) - epoch,
            "new_processes": int(fresh.sum()), "in_trial_new_process_s": float(first[fresh].median()),
            "in_trial_reused_process_s": float(first[~fresh].median()) if changes else None,
            "between_trials_s": idle / changes if changes else None}


def plain_train(config: dict, data: Path, out: Path) -> dict:
    """``plait train`` as a subprocess; each evaluation's log line timed as it arrives."""
    import yaml

    path = out / "plain.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [str(ROOT / ".venv/bin/plait"), "train", "--config", str(path), "--dataset", str(data),
               "--output-directory", str(out / "plain"), "--logging-level", "info"]
    started, times, lines = time.perf_counter(), [], []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}) as proc:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"epoch \d+ \| step \d+ \|", line):
                times.append(time.perf_counter() - started)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or len(times) < 2:
        sys.stderr.write("".join(lines[-40:]))
        raise SystemExit(f"plait train failed (exit {proc.returncode}, {len(times)} evaluations seen)")
    gap = statistics.median(b - a for a, b in zip(times, times[1:]))
    return {"wall_s": wall, "first_evaluation_s": times[0], "epoch_interval_s": gap,
            "first_step_after_start_s": times[0] - gap}


def time_to(run: dict, score: float) -> float | None:
    """Seconds from the search's start to its first report of at least ``score``."""
    hits = run["frame"].loc[run["frame"]["hyperopt_metric"] >= score, "timestamp"]
    return float(hits.min() - run["started"]) if len(hits) else None


def compare(runs: dict) -> dict:
    """ASHA against FIFO; the target read three ways: ASHA reaches FIFO's best-0.01 in at most half
    of FIFO's wall time / of FIFO's time to its best / of FIFO's time to that same score."""
    fifo, asha = runs["fifo"], runs["asha"]
    threshold = fifo["best"] - TARGET_POINTS
    for run in runs.values():
        run["time_to_best_s"], run["time_to_fifo_best_s"] = time_to(run, run["best"]), time_to(run, threshold)
    reached = asha["time_to_fifo_best_s"]
    limits = {name: TARGET_TIME_RATIO * fifo[key] for name, key in [
        ("wall", "wall_s"), ("time_to_best", "time_to_best_s"), ("time_to_best-0.01", "time_to_fifo_best_s")]}
    return {"threshold": threshold, "asha_reached_s": reached, "asha_over_fifo_wall": asha["wall_s"] / fifo["wall_s"],
            "limits_s": limits, "met": {k: reached is not None and reached <= v for k, v in limits.items()}}


def fmt(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def show(args, ray_s: float, prep_s: float, plain: dict, runs: dict, comparison: dict) -> None:
    print(f"\n{args.rows:,} rows, {args.epochs} epochs, 16 trials, {args.concurrent} at once; "
          f"Ray start {ray_s:.1f} s, preprocessing (once, before everything) {prep_s:.1f} s")
    print(f"{'':<6}{'wall s':>8}{'best':>8}{'to best s':>11}{'to FIFO best-0.01 s':>21}{'reports':>9}"
          f"{'stopped':>9}{'errors':>8}{'slot use':>10}{'load':>7}")
    for name, run in runs.items():
        print(f"{name:<6}{run['wall_s']:>8.1f}{run['best']:>8.4f}{run['time_to_best_s']:>11.0f}"
              f"{fmt(run['time_to_fifo_best_s'], '.0f'):>21}{run['reports']:>9}{run['stopped_early']:>9}"
              f"{run['errors']:>8}{run['slot_use']:>10.0%}{run['load_before'][0]:>7.2f}")
    print(f"ASHA/FIFO wall: {comparison['asha_over_fifo_wall']:.2f}. Target: ASHA reaches FIFO's best-0.01 "
          f"({comparison['threshold']:.4f}), here at {fmt(comparison['asha_reached_s'], '.0f')} s, in <= half FIFO's")
    for key, limit in comparison["limits_s"].items():
        verdict = "met" if comparison["met"][key] else "NOT met"
        print(f"  {key.replace('_', ' '):<20} <= {limit:5.1f} s: {verdict}")
    print(f"\n{'overhead, seconds':<30}{'fifo':>8}{'asha':>8}{'plait train':>13}")
    for label, key in [("first step after start", "first_step_after_start_s"),
                       ("epoch interval", "epoch_interval_s"), ("in trial, new process", "in_trial_new_process_s"),
                       ("in trial, reused process", "in_trial_reused_process_s"),
                       ("between trials", "between_trials_s")]:
        values = [fmt(runs[name]["overhead"][key], ".2f") for name in ("fifo", "asha")]
        print(f"{label:<30}{values[0]:>8}{values[1]:>8}{fmt(plain.get(key), '.2f'):>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=os.cpu_count() or 1, help="trials at once (1 CPU each)")
    parser.add_argument("--reduction-factor", type=float, default=3)
    parser.add_argument("--seed", type=int, default=7, help="the data's seed")
    parser.add_argument("--output", type=Path, default=OUT_DIR / "hyperopt.json")
    args = parser.parse_args()
    data = dataset(args.rows, args.seed)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hyperopt-", dir=OUT_DIR))
    base = base_config(args.epochs, str(work / "cache"))
    ray_s = start_ray(os.cpu_count() or 1)
    for name in ("plait", "ray", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from plait.api import Model

    start = time.perf_counter()
    Model(base).preprocess(str(data), random_seed=42)  # the local backend: nothing to close
    prep_s = time.perf_counter() - start
    plain = plain_train(base, data, work)
    runs = {name: run_search(name, search_config(base, args, name), data, work, args.concurrent)
            for name in ("fifo", "asha")}
    comparison = compare(runs)
    show(args, ray_s, prep_s, plain, runs, comparison)
    import ray
    import torch

    report = {"settings": {**vars(args), "learning_rates": LEARNING_RATES, "output_sizes": OUTPUT_SIZES,
                           "dataset": str(data), "work": str(work)},
              "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                          "ray": ray.__version__, "platform": platform.platform()},
              "ray_start_s": ray_s, "preprocess_s": prep_s, "plain_train": plain, "comparison": comparison,
              "runs": {name: {k: v for k, v in run.items() if k != "frame"} for name, run in runs.items()}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, default=str))
    print(f"Written: {args.output}")


if __name__ == "__main__":
    main()
