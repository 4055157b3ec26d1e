"""Ctrl-C on one worker of a real two-process ddp group (gloo): every worker stops at the same
step, they save one checkpoint together, and the run continues from it.

Here rather than beside test_trainer.py: it needs this folder's process-group fixture."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd

STEPS_PER_EPOCH = 9
"""287 training rows in two shards, 16 rows a batch."""
INTERRUPT_AT = 4
"""Rank 1's training step during which it receives SIGINT."""


def _frame(rows: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x1": rng.normal(size=rows), "x2": rng.normal(size=rows)})
    df["y"] = df.x1 + df.x2 > 0
    return df


def _config(root: Path) -> dict:
    return {"input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}],
            "output_features": [{"name": "y", "type": "binary"}],
            "trainer": {"epochs": 2, "batch_size": 16, "learning_rate": 0.01},
            "backend": {"type": "torchrun", "cache_dir": str(root / "cache")}}


def _send_sigint_to_rank_1_at(step: int) -> None:
    """From rank 1's ``step``-th training step on, as if Ctrl-C reached that process alone."""
    from plait.training.trainer import Trainer

    original, calls = Trainer._train_step, {"n": 0}

    def train_step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *args, **kwargs)

    Trainer._train_step = train_step


def _train(rank: int, root: Path, interrupt_at: int | None, resume: bool) -> dict:
    from plait.api import Model
    from plait.training.trainer import TrainingInterrupted

    # Python's own Ctrl-C handling, whatever this process inherited: a shell ignores SIGINT in the
    # commands it starts in the background (``cmd &``), and spawned workers inherit that.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if rank == 1 and interrupt_at:
        _send_sigint_to_rank_1_at(interrupt_at)
    model = Model(_config(root))
    try:
        result = model.train(dataset=_frame(), run_dir=root / "run", resume=resume, progress_bar=False)
        return {"history": result.training_statistics}
    except TrainingInterrupted as error:
        return {"interrupted": str(error), "exit_code": error.exit_code}
    finally:
        model.close()


def test_ctrl_c_on_one_worker_saves_one_checkpoint_with_every_worker_and_the_run_resumes(run_workers, tmp_path):
    started = time.monotonic()
    outcomes = run_workers(_train, 2, tmp_path, INTERRUPT_AT, False, timeout=150)
    assert time.monotonic() - started < 150  # neither worker hung in a collective the other left
    checkpoints = tmp_path / "run" / "checkpoints"
    # The request travels with the next step's all-reduce: both workers stop after the step in progress.
    stopped_at = INTERRUPT_AT
    for outcome in outcomes:
        assert outcome["exit_code"] == 130
        assert outcome["interrupted"].startswith(f"training interrupted at step {stopped_at}; a checkpoint is saved at ")
        assert f"--resume {tmp_path / 'run'}" in outcome["interrupted"]
    # One whole checkpoint (no .partial folder left), and latest.json names it.
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest.json", f"step-{stopped_at:09d}"]
    assert json.loads((checkpoints / "latest.json").read_text()) == {"checkpoint": f"step-{stopped_at:09d}", "step": stopped_at}
    folder = checkpoints / f"step-{stopped_at:09d}"
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors", "optimizer.pt", "state.json", "trainer.pt"]
    state = json.loads((folder / "state.json").read_text())
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (stopped_at, 0, stopped_at)

    first, second = run_workers(_train, 2, tmp_path, None, True, timeout=150)
    assert [(r["epoch"], r["step"]) for r in first["history"]] == [(1, STEPS_PER_EPOCH), (2, 2 * STEPS_PER_EPOCH)]
    # Validation metrics are summed over both workers: the same on each.
    assert [r["validation"] for r in first["history"]] == [r["validation"] for r in second["history"]]
