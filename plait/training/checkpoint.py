"""Resumable checkpoints: a folder per checkpoint with the model and optimizer state (written by
the strategy: weights in safetensors, optimizer tensors loaded back with ``weights_only=True``),
the scheduler and RNG state, and the progress in JSON. Each folder is written under a temporary
name and published whole when complete (``plait.utils.fs.publish_folder``), ``state.json``
written last as its marker; ``latest.json`` names the newest complete one, so a crash never
leaves a half-written checkpoint that a later run trusts."""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from plait.errors import ModelError
from plait.utils.fs import atomic_path, local_fs, publish_folder, remove_folder, write_json

log = logging.getLogger("plait")

LATEST = "latest.json"
BEST = "best.safetensors"
TRAINER_FILE = "trainer.pt"
STATE_FILE = "state.json"


def save_weights(state_dict: dict, path: Path) -> None:
    """Weights in safetensors at ``path``, all or nothing. Each tensor is copied: safetensors refuses
    tensors that share memory, which TabNet's shared blocks do (one weight under several names)."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().cpu().clone() for k, v in state_dict.items()}, tmp)


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
    """The newest complete checkpoint: the one ``latest.json`` names, or, where that file is
    damaged, the newest folder with its marker."""
    pointer = _read_pointer(directory)
    if pointer is not None and (directory / pointer / STATE_FILE).is_file():
        return directory / pointer
    if pointer is None and (directory / LATEST).is_file():
        complete = [p for p in _step_folders(directory) if (p / STATE_FILE).is_file()]
        return complete[0] if complete else None
    return None


def resumable_checkpoint(directory: Path, warn: bool = True) -> Path | None:
    """The newest checkpoint whose files all read back: the latest, or, where it (or
    ``latest.json``) is damaged (a disk that filled up, a file cut by a copy), the newest whole
    one, with a warning saying so.
    None where there is no checkpoint; a ModelError naming the damaged files where none is whole.
    ``warn``: log the fallback (once per run: where the run is first checked, not on each worker)."""
    problems = []
    pointer = _read_pointer(directory)
    if pointer is None and (directory / LATEST).is_file():
        problems.append(f"{directory / LATEST} is damaged")
    candidates = [directory / pointer] if pointer else []
    candidates += [p for p in _step_folders(directory) if p not in candidates]
    for path in candidates:
        problem = checkpoint_problem(path)
        if problem is None:
            if problems and warn:
                log.warning(f"{'; '.join(problems)}: resuming from {path}, the newest checkpoint that reads back whole")
            return path
        problems.append(problem)
    if problems:
        raise ModelError(f"cannot resume: no checkpoint in {str(directory)!r} reads back whole: {'; '.join(problems)}. "
                         "Start a new run instead (without --resume)")
    return None


def checkpoint_problem(path: Path) -> str | None:
    """What is damaged in checkpoint folder ``path`` (None if nothing is), read without
    unpickling: JSON parsed, safetensors headers checked against the file size, and each torch
    file (a zip archive) checked against its CRCs."""
    if not path.is_dir():
        return f"checkpoint {path} is missing"
    try:
        state = json.loads((path / STATE_FILE).read_text())
    except (OSError, ValueError) as exc:
        return f"{path / STATE_FILE} is missing or damaged ({_first_line(exc)})"
    if not isinstance(state, dict) or "step" not in state:
        return f"{path / STATE_FILE} is damaged (no step)"
    checks = {".safetensors": _safetensors_problem, ".pt": _torch_file_problem}
    for file in sorted(path.iterdir()):
        problem = checks[file.suffix](file) if file.suffix in checks and file.is_file() else None
        if problem:
            return f"{file} is damaged ({problem})"
    return None


def _safetensors_problem(file: Path) -> str | None:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(file), "pt"):
            return None
    except (SafetensorError, OSError) as exc:
        return _first_line(exc)


def _torch_file_problem(file: Path) -> str | None:
    try:
        with zipfile.ZipFile(file) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return _first_line(exc) or "not a torch file"
    return f"member {bad} fails its CRC check" if bad else None


def _read_pointer(directory: Path) -> str | None:
    """The checkpoint folder name ``latest.json`` holds; None if it is missing or damaged."""
    try:
        name = json.loads((directory / LATEST).read_text())["checkpoint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and name.startswith("step-") and "/" not in name else None


def _step_folders(directory: Path) -> list[Path]:
    """Checkpoint folders, newest first (names hold the zero-padded step)."""
    return sorted((p for p in directory.glob("step-*") if p.is_dir()), reverse=True)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_checkpoint(path: Path, strategy, model, optimizer, scheduler) -> dict:
    """Restore a checkpoint into model, optimizer and scheduler (on every worker); returns the
    saved progress."""
    strategy.state.load(path, model, optimizer)
    extra = torch.load(path / TRAINER_FILE, weights_only=True)
    scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["rng"])
    return json.loads((path / STATE_FILE).read_text())
