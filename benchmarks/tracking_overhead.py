"""What experiment tracking costs a training run: train.py's 200,000-row model trained with no
tracker, then with MLflow (a SQLite store), W&B (offline) and Aim (a local repository).

    .venv/bin/python benchmarks/tracking_overhead.py                   # 200,000 rows, 3 epochs, 3 repeats
    .venv/bin/python benchmarks/tracking_overhead.py --rows 50000 --repeat 1

The data, config and seed are ``benchmarks/train.py``'s (``make_data``, ``make_config``); every
run trains the same model from the same seed in a run directory of its own, and the runs are
interleaved (none, mlflow, wandb, aim, none, ...), ``--repeat`` times; the fastest of each counts.

What is timed
-------------
* **training**: ``Trainer.fit`` (the epochs and their evaluations), the part a tracker can slow
  down while the model trains: every evaluation's metrics and every epoch's speed are logged from
  inside it. The overhead is this time against the run without a tracker (the goal: at most 2%),
  in wall-clock seconds and in this process's CPU seconds (steadier on a shared machine; W&B's
  service process is not counted there).
* **start** and **end**: the fixed costs around it, reported apart: ``on_train_init`` (the
  tool's import, its store or run, the config as params and a file) and ``on_ludwig_end`` (the
  model folder and statistics uploaded, the run closed). MLflow's first run in a new SQLite
  store also creates the database (its migrations), once per store: the first repeat pays it.

Figures are printed and written as JSON (default ``benchmarks/out/tracking_overhead.json``).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from train import Timers, make_config, make_data, write_report  # noqa: E402 (benchmarks/train.py)

TOOLS = ("none", "mlflow", "wandb", "aim")
GOAL_PERCENT = 2.0


def tracking_item(tool: str, folder: Path) -> list[dict]:
    return {"none": [], "mlflow": [{"type": "mlflow", "tracking_uri": f"sqlite:///{folder / 'mlflow.db'}"}],
            "wandb": [{"type": "wandb", "mode": "offline"}], "aim": [{"type": "aim", "repo": str(folder / "aim")}]}[tool]


def one_run(tool: str, df, args, folder: Path, index: int) -> dict:
    """Train once with ``tool`` (or none); its fit, start and end times in seconds."""
    from plait import Model
    from plait.tracking.base import Tracker
    from plait.training.trainer import Trainer

    config = make_config(args.epochs, args.batch_size, str(folder / "cache"))
    config["tracking"] = tracking_item(tool, folder)
    timers = Timers()
    undo = [timers.wrap(Trainer, "fit", "fit"), timers.wrap(Tracker, "on_train_init", "start"),
            timers.wrap(Tracker, "on_ludwig_end", "end")]
    try:
        model = Model(config)
        run_dir = folder / f"{tool}_run_{index}"
        model.train(dataset=df, random_seed=args.seed, run_dir=run_dir, progress_bar=False)
        model.save(run_dir / "model")
        model.close()
    finally:
        for restore in undo:
            restore()
    return {"training_s": timers.total("fit")[0], "training_cpu_s": timers.total("fit")[1],
            "start_s": timers.total("start")[0], "end_s": timers.total("end")[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=str(HERE / "out" / "tracking_overhead.json"))
    args = parser.parse_args()
    logging.getLogger("plait").setLevel(logging.WARNING)
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")

    import torch

    df = make_data(args.rows, args.seed)
    runs: dict[str, list[dict]] = {tool: [] for tool in TOOLS}
    with tempfile.TemporaryDirectory(prefix="plait-tracking-bench-") as tmp:
        os.environ["WANDB_DIR"] = tmp
        for index in range(args.repeat):
            for tool in TOOLS:
                runs[tool].append(one_run(tool, df, args, Path(tmp), index))
                print(f"  {tool:7} repeat {index + 1}: training {runs[tool][-1]['training_s']:.2f} s", flush=True)

    best = {tool: min(runs[tool], key=lambda r: r["training_s"]) for tool in TOOLS}
    baseline = best["none"]["training_s"]
    best_cpu = {tool: min(r["training_cpu_s"] for r in runs[tool]) for tool in TOOLS}
    summary = {tool: {"training_s": best[tool]["training_s"],
                      "overhead_percent": 100 * (best[tool]["training_s"] / baseline - 1),
                      "training_cpu_s": best_cpu[tool],
                      "cpu_overhead_percent": 100 * (best_cpu[tool] / best_cpu["none"] - 1),
                      "start_s": min(r["start_s"] for r in runs[tool]), "end_s": min(r["end_s"] for r in runs[tool]),
                      "first_start_s": runs[tool][0]["start_s"]} for tool in TOOLS}
    print(f"\n{'tracker':8} {'training':>10} {'overhead':>9} {'CPU':>9} {'overhead':>9} {'start':>8} {'end':>7}"
          f"   (best of {args.repeat})")
    for tool, figures in summary.items():
        print(f"{tool:8} {figures['training_s']:>9.2f}s {figures['overhead_percent']:>+8.1f}% "
              f"{figures['training_cpu_s']:>8.2f}s {figures['cpu_overhead_percent']:>+8.1f}% "
              f"{figures['start_s']:>7.2f}s {figures['end_s']:>6.2f}s")
    worst = max(summary[tool]["overhead_percent"] for tool in TOOLS if tool != "none")
    print(f"worst training overhead {worst:+.1f}% (goal: at most {GOAL_PERCENT}%)")
    write_report({"machine": {"python": platform.python_version(), "torch": torch.__version__,
                              "platform": platform.platform(), "cpus": os.cpu_count()},
                  "parameters": {k: v for k, v in vars(args).items() if k != "out"},
                  "goal_percent": GOAL_PERCENT, "summary": summary, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
