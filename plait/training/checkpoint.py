"""Resumable checkpoints: weights in safetensors, optimizer state via torch.save (loaded with
``weights_only=True``), progress in JSON. Each checkpoint is a directory written under a
temporary name and renamed; ``latest.json`` names the newest complete one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from plait.utils.fs import temporary_name, write_json

LATEST = "latest.json"
BEST = "best.safetensors"


def save_weights(state_dict: dict, path: Path) -> None:
    tmp = Path(temporary_name(str(path)))
    save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(tmp))
    os.replace(tmp, path)


def load_weights(path: Path) -> dict:
    return load_file(str(path))


def save_checkpoint(directory: Path, model, optimizer, scheduler, state: dict, keep: int = 2,
                    best_weights: dict | None = None) -> Path:
    """Write checkpoint ``step-<n>`` under ``directory`` and point ``latest.json`` at it.
    ``best_weights``: the best evaluation's weights, where they are not the model's own."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{state['step']:09d}"
    tmp = Path(temporary_name(str(final)))
    tmp.mkdir()
    try:
        save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"))
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "rng": torch.get_rng_state()}, tmp / "trainer.pt")
        if best_weights is not None:
            save_file({k: v.detach().cpu().contiguous() for k, v in best_weights.items()}, str(tmp / BEST))
        (tmp / "state.json").write_text(json.dumps(state, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:  # an interrupted write (Ctrl-C, full disk) leaves no half-written folder behind
        shutil.rmtree(tmp, ignore_errors=True)
    write_json(directory / LATEST, {"checkpoint": final.name, "step": state["step"]})
    for old in sorted(directory.glob("step-*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(directory: Path) -> Path | None:
    pointer = directory / LATEST
    if not pointer.is_file():
        return None
    path = directory / json.loads(pointer.read_text())["checkpoint"]
    return path if (path / "state.json").is_file() else None


def load_checkpoint(path: Path, model, optimizer, scheduler) -> dict:
    model.load_state_dict(load_file(str(path / "model.safetensors")))
    extra = torch.load(path / "trainer.pt", weights_only=True)
    optimizer.load_state_dict(extra["optimizer"])
    scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["rng"])
    return json.loads((path / "state.json").read_text())
