"""Resumable checkpoints: a folder per checkpoint with the model and optimizer state (written by
the strategy: weights in safetensors, optimizer tensors loaded back with ``weights_only=True``),
the scheduler and RNG state, and the progress in JSON. Each folder is written under a temporary
name and published whole when complete (``plait.utils.fs.publish_folder``), ``state.json``
written last as its marker; ``latest.json`` names the newest complete one, so a crash never
leaves a half-written checkpoint that a later run trusts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from plait.utils.fs import atomic_path, local_fs, publish_folder, remove_folder, write_json

LATEST = "latest.json"
BEST = "best.safetensors"
TRAINER_FILE = "trainer.pt"
STATE_FILE = "state.json"


def save_weights(state_dict: dict, path: Path) -> None:
    """Weights in safetensors at ``path``, all or nothing."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, tmp)


def load_weights(path: Path) -> dict:
    return load_file(str(path))


def save_checkpoint(directory: Path, strategy, model, optimizer, scheduler, state: dict, keep: int = 2,
                    best_weights: dict | None = None) -> Path:
    """Write checkpoint ``step-<n>`` under ``directory`` and point ``latest.json`` at it. Called
    on every worker (a sharded strategy writes a part from each); the coordinator publishes it.
    ``best_weights``: the best evaluation's weights, where they are not the model's own."""
    final = directory / f"step-{state['step']:09d}"
    # One name every worker can compute (not a random temporary_name): the workers write into
    # the same folder, and the coordinator publishes it.
    partial = directory / f".{final.name}.partial"
    if strategy.is_coordinator:
        directory.mkdir(parents=True, exist_ok=True)
        remove_folder(local_fs(), str(partial))  # left by a crash: never trusted, never reused
        partial.mkdir()
    strategy.barrier()
    try:
        strategy.state.save(partial, model, optimizer)
        strategy.barrier()
        if strategy.is_coordinator:
            _publish(partial, final, scheduler, state, best_weights)
    finally:  # an interrupted write (Ctrl-C, full disk) leaves no half-written folder behind
        if strategy.is_coordinator:
            remove_folder(local_fs(), str(partial))
    if strategy.is_coordinator:
        write_json(directory / LATEST, {"checkpoint": final.name, "step": state["step"]})
        for old in sorted(directory.glob("step-*"))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    strategy.barrier()
    return final


def _publish(partial: Path, final: Path, scheduler, state: dict, best_weights: dict | None) -> None:
    torch.save({"scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}, partial / TRAINER_FILE)
    if best_weights is not None:
        save_weights(best_weights, partial / BEST)
    (partial / STATE_FILE).write_text(json.dumps(state, indent=2))  # last: its presence marks a whole folder
    # A checkpoint of the same step (saved again after a resume) is replaced, never missing.
    publish_folder(local_fs(), str(partial), str(final), marker=STATE_FILE)


def latest_checkpoint(directory: Path) -> Path | None:
    pointer = directory / LATEST
    if not pointer.is_file():
        return None
    path = directory / json.loads(pointer.read_text())["checkpoint"]
    return path if (path / STATE_FILE).is_file() else None


def load_checkpoint(path: Path, strategy, model, optimizer, scheduler) -> dict:
    """Restore a checkpoint into model, optimizer and scheduler (on every worker); returns the
    saved progress."""
    strategy.state.load(path, model, optimizer)
    extra = torch.load(path / TRAINER_FILE, weights_only=True)
    scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["rng"])
    return json.loads((path / STATE_FILE).read_text())
