"""Benchmark of plait's training loop and batch prediction against a hand-written PyTorch loop.

    .venv/bin/python benchmarks/train.py                              # 200,000 rows, 3 epochs
    .venv/bin/python benchmarks/train.py --rows 50000 --epochs 2 --predict-rows 200000 --threads 1
    .venv/bin/python benchmarks/train.py --combiner tabnet --predict-rows 100000   # another combiner

The data is a seeded synthetic table (8 number columns, 4 category columns of 5 to 1,000 values,
a binary output that depends on both). Every figure is printed and written as JSON (default
``benchmarks/out/train.json``) with the machine's details.

What is timed
-------------
* **plait training**: ``Model(config).train(...)`` with a fixed number of epochs, early stopping
  off (``trainer.early_stop: -1``) and a 98/1/1 split. Preprocessing, model building and the
  Trainer's construction are *not* timed. ``Trainer.fit`` is wrapped with a timer, and so is the
  per-epoch evaluation on the validation split (``Trainer._evaluate_and_checkpoint``). The
  headline figure is fit minus evaluation: the epochs' batching, forward, loss, backward,
  gradient clipping, optimizer and scheduler steps and progress bookkeeping. The whole of fit
  (validation included) is reported too.
* **hand-written loop**: the same ``plait.models.ecd.ECD`` built from the same config and
  preprocessing metadata with the same seed (so the same initial weights), the same optimizer
  (Adam, plait's default, with the same learning rate, betas, eps and weight decay),
  gradient-norm clipping and batch size, over the same in-memory training tensors: per epoch a
  ``randperm``, ``index_select`` per column, forward, ``ECD.loss``, backward, clip, step. Only the
  epochs are timed. It uses the same permutations and dropout seed as plait, so its final
  training loss should equal plait's: a check that both loops did the same work.

  Both loops run ``--repeat`` times, interleaved, and the fastest run of each counts.
  samples/s = training rows x epochs / wall-clock seconds; samples/CPU-s divides by the
  process's CPU time instead, which is steadier when other work shares the machine (with
  one torch thread it equals wall-clock time on an idle machine).
* **prediction**: ``Model.predict`` on a raw 1,000,000-row pandas DataFrame (generated like the
  training data), end to end: chunking, preprocessing of raw chunks with the saved metadata,
  forward passes, postprocessing into label/probability columns and the final DataFrame. Best
  of ``--predict-repeat`` runs, wall-clock.
* **start-up**: ``plait --help`` and ``python -c "import plait"`` as subprocesses, best of 5.

With ``--backend ray`` the script compares backends instead: the same config, data, seed,
epochs and *global* batch trained locally, on Ray Train with one worker (ddp) and with
``--num-workers`` workers for each ``--strategy`` (ddp, fsdp, deepspeed, horovod), each batch
split over the workers, the learning rate unscaled. ``--backend torchrun`` does the same under
torchrun (no Ray needed: the way to check the GPU paths on a machine without Ray). It reports
the training rows/s each run recorded per epoch (over all workers, evaluation excluded; the
first epoch is left out as warm-up), the median fraction of each epoch a worker waited for its
next batch, the wall-clock time of the whole ``train`` call (the worker group's start included)
and the test accuracy reached::

    .venv/bin/python benchmarks/train.py --backend ray --num-workers 2 --rows 100000 --epochs 4 --strategy ddp fsdp deepspeed
    python3 benchmarks/train.py --backend torchrun --num-workers 1 --mixed-precision   # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

NUMBER_COLUMNS = [f"num_{i}" for i in range(8)]
CATEGORY_COLUMNS = {"cat_5": 5, "cat_10": 10, "cat_100": 100, "cat_1000": 1000}
OUTPUT_COLUMN = "label"

TARGETS = {"training_ratio": 0.90, "predict_rows_per_s": 200_000, "help_s": 0.5}


# Data ----------------------------------------------------------------------------------------

def make_data(rows: int, seed: int, with_label: bool = True) -> pd.DataFrame:
    """Numbers (some with missing values) and categories; the label mixes both, with noise."""
    rng = np.random.default_rng(seed)
    columns: dict = {}
    logit = np.zeros(rows)
    for i, name in enumerate(NUMBER_COLUMNS):
        values = rng.normal(loc=i, scale=1 + i, size=rows)
        logit += (0.5 if i % 2 else -0.3) * (values - i) / (1 + i)
        values[rng.random(rows) < 0.01] = np.nan
        columns[name] = values
    for name, size in CATEGORY_COLUMNS.items():
        codes = rng.integers(0, size, size=rows)
        effect = np.random.default_rng(size).normal(size=size)
        logit += 0.5 * effect[codes]
        columns[name] = np.array([f"{name}_v{c}" for c in range(size)], dtype=object)[codes]
    if with_label:
        columns[OUTPUT_COLUMN] = np.where(rng.random(rows) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return pd.DataFrame(columns)


def make_config(epochs: int, batch_size: int, cache_dir: str, combiner: str = "concat") -> dict:
    return {
        "combiner": {"type": combiner},
        "input_features": [{"name": n, "type": "number"} for n in NUMBER_COLUMNS]
        + [{"name": n, "type": "category"} for n in CATEGORY_COLUMNS],
        "output_features": [{"name": OUTPUT_COLUMN, "type": "binary"}],
        "preprocessing": {"split": {"type": "random", "probabilities": [0.98, 0.01, 0.01]}},
        "trainer": {"epochs": epochs, "batch_size": batch_size, "early_stop": -1},
        "backend": {"type": "local", "cache_dir": cache_dir},
    }


# Training ------------------------------------------------------------------------------------

def clock() -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds of this process). CPU time is what the loop itself costs;
    on a machine shared with other work it is steadier than wall-clock time."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


class Timers:
    """(wall, CPU) seconds of each call of wrapped methods, per name."""

    def __init__(self):
        self.calls: dict[str, list[tuple[float, float]]] = {}

    def wrap(self, owner, method: str, name: str):
        original = getattr(owner, method)

        def timed(*args, **kwargs):
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                self.calls.setdefault(name, []).append(since(start))

        setattr(owner, method, timed)
        return lambda: setattr(owner, method, original)

    @contextmanager
    def wrapping(self, *methods: tuple[Any, str, str]):
        """Each (owner, method, name) timed while the block runs, restored after it."""
        undo = [self.wrap(*method) for method in methods]
        try:
            yield self
        finally:
            for restore in undo:
                restore()

    def total(self, name: str) -> tuple[float, float]:
        calls = self.calls.get(name, [])
        return sum(c[0] for c in calls), sum(c[1] for c in calls)


def train_plait(df: pd.DataFrame, config: dict, seed: int):
    """``Model.train`` with ``Trainer.fit`` and its per-epoch evaluation timed."""
    from plait import Model
    from plait.training.trainer import Trainer

    with Timers().wrapping((Trainer, "fit", "fit"), (Trainer, "_evaluate_and_checkpoint", "evaluation")) as timers:
        model = Model(config)
        result = model.train(dataset=df, random_seed=seed, progress_bar=False)
    (fit_wall, fit_cpu), (eval_wall, eval_cpu) = timers.total("fit"), timers.total("evaluation")
    run = {"fit_s": fit_wall, "fit_cpu_s": fit_cpu, "evaluation_s": eval_wall, "evaluation_cpu_s": eval_cpu,
           "training_s": fit_wall - eval_wall, "training_cpu_s": fit_cpu - eval_cpu,
           "epoch_losses": [r["training"]["combined"]["loss"] for r in result.training_statistics],
           "validation_accuracy": result.training_statistics[-1]["validation"][OUTPUT_COLUMN]["accuracy"]}
    return model, result, run


def train_by_hand(model, data, seed: int, epochs: int, batch_size: int) -> dict:
    """The minimal loop: same module, optimizer, clipping, batches; nothing else."""
    import torch

    from plait.training.run import seed_everything
    from plait.models.ecd import ECD
    from plait.data.tensors import table_tensors
    from plait.training.schedule import learning_rate

    trainer = model.config.trainer
    seed_everything(seed)
    module = ECD(model.config, model.metadata)
    names = module.input_names + module.output_names
    tensors = table_tensors(data.read_split("training"), model.metadata["features"], names)
    rows = len(tensors[names[0]])
    opt = trainer.optimizer
    lr = learning_rate(trainer, world_size=1)  # the resolved learning_rate (auto: 1e-3)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay)
    clip = trainer.gradient_clipping.clipglobalnorm
    module.train()
    epoch_losses, wall, cpu = [], 0.0, 0.0
    for epoch in range(epochs):
        start = clock()
        generator = torch.Generator().manual_seed(seed * 100_003 + epoch)  # plait's permutation, for the loss check
        order = torch.randperm(rows, generator=generator)
        total, steps = 0.0, 0
        for first in range(0, rows, batch_size):
            index = order[first : first + batch_size]
            batch = {name: tensor.index_select(0, index) for name, tensor in tensors.items()}
            logits = module({n: batch[n] for n in module.input_names})
            loss, _ = module.loss(logits, {n: batch[n] for n in module.output_names})
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            total += loss.item()
            steps += 1
        elapsed = since(start)
        wall, cpu = wall + elapsed[0], cpu + elapsed[1]
        epoch_losses.append(total / steps)
    return {"rows": rows, "training_s": wall, "training_cpu_s": cpu, "epoch_losses": epoch_losses}


def compare_training(df: pd.DataFrame, args) -> tuple:
    """Both loops ``args.repeat`` times, interleaved so both see the same machine load; the
    fastest run of each counts (by wall-clock and, separately, by CPU time)."""
    runs: dict[str, list] = {"plait": [], "hand_written": []}
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as cache_dir:
        config = make_config(args.epochs, args.batch_size, cache_dir, args.combiner)
        for _ in range(args.repeat):
            model, result, run = train_plait(df, config, args.seed)
            rows = result.preprocessed.rows("training")
            runs["plait"].append({"rows": rows, **run})
            runs["hand_written"].append(train_by_hand(model, result.preprocessed, args.seed, args.epochs, args.batch_size))
    samples = rows * args.epochs
    summary: dict = {"rows": rows, "epochs": args.epochs, "batch_size": args.batch_size, "combiner": args.combiner}
    for name, loop_runs in runs.items():
        summary[name] = {
            "samples_per_s": samples / min(r["training_s"] for r in loop_runs),
            "samples_per_cpu_s": samples / min(r["training_cpu_s"] for r in loop_runs),
            "runs": loop_runs,
        }
    plait, hand = summary["plait"], summary["hand_written"]
    plait["fit_samples_per_s"] = samples / min(r["fit_s"] for r in runs["plait"])
    summary["ratio"] = plait["samples_per_s"] / hand["samples_per_s"]
    summary["cpu_ratio"] = plait["samples_per_cpu_s"] / hand["samples_per_cpu_s"]
    summary["fit_ratio"] = plait["fit_samples_per_s"] / hand["samples_per_s"]
    # Each plait run and the hand-written run right after it saw about the same machine load.
    pairs = [h["training_s"] / p["training_s"] for p, h in zip(runs["plait"], runs["hand_written"])]
    summary["pair_ratios"] = pairs
    summary["median_pair_ratio"] = statistics.median(pairs)
    summary["final_losses"] = {name: r[0]["epoch_losses"][-1] for name, r in runs.items()}
    summary["validation_accuracy"] = runs["plait"][0]["validation_accuracy"]
    return model, summary


def compare_backends(df: pd.DataFrame, args) -> dict:
    """Local, then one worker and ``args.num_workers`` workers per strategy, on Ray Train or under
    torchrun: same data, seed and global batch."""
    runs = {}
    with tempfile.TemporaryDirectory(prefix="plait-bench-") as cache_dir:
        plans = [("local", None, None)]
        if args.backend == "ray":
            plans.append(("ray_1_worker", 1, "ddp"))
        plans += [(f"{args.backend}_{args.num_workers}_workers_{s}", args.num_workers, s) for s in args.strategy]
        for name, workers, strategy in plans:
            config = make_config(args.epochs, args.batch_size // (workers or 1), cache_dir)
            config["trainer"].update(learning_rate_scaling="constant", early_stop=-1, use_mixed_precision=args.mixed_precision)
            if workers:
                config["backend"] = {"type": args.backend, "cache_dir": cache_dir,
                                     "trainer": {"num_workers": workers, "strategy": strategy}}
            train = train_launched if workers and args.backend != "ray" else train_in_process
            runs[name] = {"workers": workers or 1, "strategy": strategy, "batch_size_per_worker": config["trainer"]["batch_size"],
                          **train(df, config, args)}
    local = runs["local"]
    for run in runs.values():
        run["vs_local"] = run["rows_per_s"] / local["rows_per_s"]
        run["accuracy_minus_local"] = run["test_accuracy"] - local["test_accuracy"]
    return {"epochs": args.epochs, "global_batch_size": args.batch_size, "mixed_precision": args.mixed_precision, "runs": runs}


def epoch_figures(history: list) -> dict:
    """Median rows/s and data-wait fraction over the epochs, the first (warm-up) left out."""
    epochs = [r for r in history if "rows_per_s" in r]
    steady = epochs[1:] or epochs
    return {"rows_per_s_per_epoch": [r["rows_per_s"] for r in epochs],
            "rows_per_s": statistics.median(r["rows_per_s"] for r in steady),
            "data_wait_fraction": statistics.median(r.get("data_wait_fraction", 0.0) for r in steady)}


def train_in_process(df: pd.DataFrame, config: dict, args) -> dict:
    from plait import Model

    model = Model(config)
    started = time.perf_counter()
    result = model.train(dataset=df, random_seed=args.seed, progress_bar=False)
    wall = time.perf_counter() - started
    accuracy = model.evaluate(df, split="test", random_seed=args.seed)[OUTPUT_COLUMN]["accuracy"]
    model.close()
    return {**epoch_figures(result.training_statistics), "train_call_s": wall, "test_accuracy": accuracy}


def train_launched(df: pd.DataFrame, config: dict, args) -> dict:
    """``torchrun --nproc-per-node N -m plait train`` in a scratch folder (start-up included in
    the wall-clock time); the figures come from the run's training statistics."""
    import yaml

    from plait import Model

    workers = config["backend"]["trainer"]["num_workers"]
    with tempfile.TemporaryDirectory(prefix="plait-bench-run-") as folder:
        folder = Path(folder)
        df.to_parquet(folder / "data.parquet")
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        command = [str(Path(sys.executable).parent / "torchrun"), "--nproc-per-node", str(workers), "-m", "plait", "train",
                   "--config", "config.yaml", "--dataset", "data.parquet", "--random-seed", str(args.seed)]
        started = time.perf_counter()
        subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        run_dir = folder / "results" / "experiment_run_0"
        from plait.evaluation.statistics import history_of

        history = history_of(json.loads((run_dir / "training_statistics.json").read_text()))
        accuracy = Model.load(run_dir / "model").evaluate(df, split="test", random_seed=args.seed)[OUTPUT_COLUMN]["accuracy"]
    return {**epoch_figures(history), "train_call_s": wall, "test_accuracy": accuracy}


def print_backends(summary: dict) -> None:
    print(f"training by backend: {summary['epochs']} epochs, global batch {summary['global_batch_size']}"
          f"{', bf16 autocast' if summary['mixed_precision'] else ''}")
    print(f"  {'':28} {'rows/s':>10} {'vs local':>9} {'data wait':>10} {'train() s':>10} {'test acc':>9}")
    for name, run in summary["runs"].items():
        print(f"  {name:28} {run['rows_per_s']:>10,.0f} {run['vs_local']:>9.2f} {100 * run['data_wait_fraction']:>9.1f}% "
              f"{run['train_call_s']:>10.1f} {run['test_accuracy']:>9.4f}")


# Prediction and start-up ------------------------------------------------------------------------

def time_predict(model, rows: int, seed: int, repeat: int) -> dict:
    df = make_data(rows, seed + 1, with_label=False)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        predictions = model.predict(df)
        times.append(time.perf_counter() - started)
        assert len(predictions) == rows
    best = min(times)
    return {"rows": rows, "seconds": times, "best_s": best, "rows_per_s": rows / best,
            "columns": list(predictions.columns)}


def best_of(command: list[str], repeat: int = 5) -> dict:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return {"command": " ".join(command), "seconds": times, "best_s": min(times)}


def plait_executable() -> str:
    candidate = Path(sys.executable).parent / "plait"
    return str(candidate) if candidate.exists() else "plait"


# Main ----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="training dataset rows (default 200,000)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256, help="for both loops (default 256, what batch_size: auto picks here)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--repeat", type=int, default=5, help="training runs of each loop, interleaved; the best of each is reported")
    parser.add_argument("--predict-rows", type=int, default=1_000_000)
    parser.add_argument("--predict-repeat", type=int, default=2, help="prediction runs; the best is reported")
    parser.add_argument("--backend", choices=["local", "ray", "torchrun"], default="local",
                        help="local: plait against a hand-written loop; ray: local against Ray Train workers")
    parser.add_argument("--num-workers", type=int, default=2, help="with --backend ray/torchrun: workers of the larger runs")
    parser.add_argument("--strategy", nargs="+", choices=["ddp", "fsdp", "deepspeed", "horovod"], default=["ddp"],
                        help="with --backend ray/torchrun: one run of --num-workers workers per strategy")
    parser.add_argument("--combiner", default="concat", help="combiner.type of the model (default concat)")
    parser.add_argument("--mixed-precision", action="store_true", help="trainer.use_mixed_precision (bf16 autocast)")
    parser.add_argument("--out", default=str(HERE / "out" / "train.json"))
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("plait").setLevel(logging.WARNING)

    df = make_data(args.rows, args.seed)
    load_before = os.getloadavg()[0]
    report: dict = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
                    "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
        "parameters": {k: v for k, v in vars(args).items() if k != "out"},
        "targets": TARGETS,
    }
    if args.backend != "local":
        report["backends"] = compare_backends(df, args)
        print_backends(report["backends"])
        default_out = HERE / "out" / f"train_{args.backend}.json"
        write_report(report, args.out if args.out != str(HERE / "out" / "train.json") else default_out)
        return 0
    model, training = compare_training(df, args)
    report["training"] = training
    report["prediction"] = time_predict(model, args.predict_rows, args.seed, args.predict_repeat)
    report["startup"] = {"help": best_of([plait_executable(), "--help"]),
                         "import": best_of([sys.executable, "-c", "import plait"])}

    report["machine"]["load_average_1min"] = {"start": load_before, "end": os.getloadavg()[0]}
    t, p, s = training, report["prediction"], report["startup"]
    plait, hand = t["plait"], t["hand_written"]
    print(f"training: {t['combiner']} combiner, {t['rows']:,} rows x {t['epochs']} epochs, batch size {t['batch_size']}, "
          f"{torch.get_num_threads()} torch threads, best of {args.repeat} interleaved runs each")
    print(f"  {'':34} {'samples/s':>12} {'samples/CPU-s':>14}")
    print(f"  {'plait (Trainer.fit - evaluation)':34} {plait['samples_per_s']:>12,.0f} {plait['samples_per_cpu_s']:>14,.0f}")
    print(f"  {'hand-written loop':34} {hand['samples_per_s']:>12,.0f} {hand['samples_per_cpu_s']:>14,.0f}")
    print(f"  {'ratio plait / hand-written':34} {t['ratio']:>12.3f} {t['cpu_ratio']:>14.3f}   (target >= {TARGETS['training_ratio']})")
    print(f"  ratio of each run pair (plait, then hand-written): {', '.join(f'{r:.3f}' for r in t['pair_ratios'])}; "
          f"median {t['median_pair_ratio']:.3f}")
    print(f"  plait's whole Trainer.fit, per-epoch validation included: {plait['fit_samples_per_s']:,.0f} samples/s "
          f"(ratio {t['fit_ratio']:.3f})")
    print(f"  final epoch training loss: plait {t['final_losses']['plait']:.6f}, hand-written {t['final_losses']['hand_written']:.6f}")
    print(f"  validation accuracy after the last epoch (plait's first run): {t['validation_accuracy']:.4f}")
    print(f"prediction: {p['rows']:,} raw rows in {p['best_s']:.2f} s = {p['rows_per_s']:,.0f} rows/s "
          f"(target >= {TARGETS['predict_rows_per_s']:,})")
    load = report["machine"]["load_average_1min"]
    if max(load.values()) > 0.5:
        print(f"note: 1-minute load average {load['start']:.1f} at the start, {load['end']:.1f} at the end on "
              f"{os.cpu_count()} CPUs: other work shares this machine, so wall-clock figures are noisy "
              f"(samples/CPU-s and --threads 1 are steadier)")
    print(f"startup: plait --help {s['help']['best_s']:.3f} s (target < {TARGETS['help_s']}), "
          f"import plait {s['import']['best_s']:.3f} s (best of 5)")

    write_report(report, args.out)
    return 0


def write_report(report: dict, path) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    raise SystemExit(main())
