"""Resumable checkpoints: a folder per checkpoint with the model and optimizer state (written by
the strategy: weights in safetensors, optimizer tensors loaded back with ``weights_only=True``),
the scheduler and RNG state, and the progress in JSON. Each folder is written under a temporary
name and published whole when complete (``plait.utils.fs.publish_folder``), ``state.json``
written last as its marker; ``latest.json`` names the newest complete one, so a crash never
leaves a half-written checkpoint that a later run trusts.

The checkpoints folder is a :class:`~plait.utils.folder.Folder`: a local (or shared) path, or
object storage. On object storage no worker needs to see another's disk: each writes its part
into a local folder of its own and uploads it; a resume downloads the checkpoint on every
worker."""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
import zipfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from plait.errors import ModelError
from plait.utils.folder import Folder
from plait.utils.fs import atomic_path, local_fs, publish_folder, remove_folder

log = logging.getLogger("plait")

LATEST = "latest.json"
BEST = "best.safetensors"
TRAINER_FILE = "trainer.pt"
STATE_FILE = "state.json"
MODEL_FILE = "model.safetensors"
"""A checkpoint's whole weights, where its strategy keeps them whole (see ``strategies/state.py``)."""


def as_folder(location: Folder | str | Path) -> Folder:
    """A checkpoint location given as a Folder, or as a local path."""
    return location if isinstance(location, Folder) else Folder(location)


def save_weights(state_dict: dict, path: Path) -> None:
    """Weights in safetensors at ``path``, all or nothing."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, tmp)


SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                      torch.uint8: "U8", torch.bool: "BOOL"}


def save_weights_streamed(path: Path, layout: dict[str, tuple[torch.dtype, tuple[int, ...]]], tensors) -> None:
    """Weights in safetensors at ``path``, all or nothing, written one tensor at a time, so the
    whole set is never in memory at once. ``layout``: each tensor's dtype and shape, known up
    front (safetensors puts them in a header before the data); ``tensors`` yields (name,
    tensor) in the layout's order."""
    header, offset = {}, 0
    for name, (dtype, shape) in layout.items():
        size = math.prod(shape) * dtype.itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        out.write(len(encoded).to_bytes(8, "little"))
        out.write(encoded)
        for (name, tensor), expected in zip(tensors, layout, strict=True):
            if name != expected or tensor.dtype != layout[name][0]:
                raise ValueError(f"save_weights_streamed: got {name} ({tensor.dtype}) where the layout has {expected}")
            out.write(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().data)


def load_weights(path: Path) -> dict:
    return load_file(str(path))


def save_checkpoint(directory: Folder | Path, strategy, model, optimizer, scheduler, state: dict, keep: int = 2,
                    best_weights: dict | Path | None = None) -> Folder:
    """Write checkpoint ``step-<n>`` under ``directory`` and point ``latest.json`` at it. Called
    on every worker (a sharded strategy writes a part from each); the coordinator publishes it.
    ``best_weights``: the best evaluation's weights (or a file of them), where they are not the
    model's own."""
    directory = as_folder(directory)
    final = directory / f"step-{state['step']:09d}"
    if directory.is_local:
        _save_in_shared_folder(directory.local(), strategy, model, optimizer, scheduler, state, best_weights)
    else:
        _save_to_object_storage(final, strategy, model, optimizer, scheduler, state, best_weights)
    if strategy.is_coordinator:
        directory.write_json(LATEST, {"checkpoint": final.name, "step": state["step"]})
        for old in _step_names(directory)[keep:]:
            (directory / old).remove(marker=STATE_FILE)
    strategy.barrier()
    return final


def _save_in_shared_folder(directory: Path, strategy, model, optimizer, scheduler, state: dict,
                           best_weights: dict | Path | None) -> None:
    """Every worker writes into one folder all of them see, which the coordinator publishes."""
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
            _write_trainer_files(partial, scheduler, state, best_weights)
            # A checkpoint of the same step (saved again after a resume) is replaced, never missing.
            publish_folder(local_fs(), str(partial), str(final), marker=STATE_FILE)
    finally:  # an interrupted write (Ctrl-C, full disk) leaves no half-written folder behind
        if strategy.is_coordinator:
            remove_folder(local_fs(), str(partial))


def _save_to_object_storage(final: Folder, strategy, model, optimizer, scheduler, state: dict,
                            best_weights: dict | Path | None) -> None:
    """Every worker writes its part in a local folder of its own and uploads it; the coordinator
    adds its files, the marker last. An older checkpoint of the same step loses its marker
    first, so no reader trusts the mix."""
    if strategy.is_coordinator:
        final.remove(marker=STATE_FILE)
    strategy.barrier()
    with tempfile.TemporaryDirectory(prefix="plait-checkpoint-") as staging:
        strategy.state.save(Path(staging), model, optimizer)
        final.upload(Path(staging))
    strategy.barrier()
    if strategy.is_coordinator:
        with tempfile.TemporaryDirectory(prefix="plait-checkpoint-") as staging:
            _write_trainer_files(Path(staging), scheduler, state, best_weights)
            final.upload(Path(staging), last=STATE_FILE)


def _write_trainer_files(folder: Path, scheduler, state: dict, best_weights: dict | Path | None) -> None:
    torch.save({"scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()}, folder / TRAINER_FILE)
    if isinstance(best_weights, Path):
        shutil.copyfile(best_weights, folder / BEST)
    elif best_weights is not None:
        save_weights(best_weights, folder / BEST)
    (folder / STATE_FILE).write_text(json.dumps(state, indent=2))  # last: its presence marks a whole folder


def latest_checkpoint(directory: Folder | Path) -> Folder | None:
    """The newest complete checkpoint: the one ``latest.json`` names, or, where that file is
    damaged, the newest folder with its marker."""
    directory = as_folder(directory)
    pointer = _read_pointer(directory)
    if pointer is not None and (directory / pointer).is_file(STATE_FILE):
        return directory / pointer
    if pointer is None and directory.is_file(LATEST):
        complete = [directory / name for name in _step_names(directory) if (directory / name).is_file(STATE_FILE)]
        return complete[0] if complete else None
    return None


def resumable_checkpoint(directory: Folder | Path, warn: bool = True) -> Folder | None:
    """The newest checkpoint whose files all read back: the latest, or, where it (or
    ``latest.json``) is damaged (a disk that filled up, a file cut by a copy), the newest whole
    one, with a warning saying so.
    None where there is no checkpoint; a ModelError naming the damaged files where none is whole.
    ``warn``: log the fallback (once per run: where the run is first checked, not on each worker)."""
    directory = as_folder(directory)
    problems = []
    pointer = _read_pointer(directory)
    if pointer is None and directory.is_file(LATEST):
        problems.append(f"{directory.file(LATEST)} is damaged")
    names = [pointer] if pointer else []
    names += [name for name in _step_names(directory) if name not in names]
    for name in names:
        candidate = directory / name
        problem = _problem_of(candidate)
        if problem is None:
            if problems and warn:
                log.warning(f"{'; '.join(problems)}: resuming from {candidate}, the newest checkpoint that reads back whole")
            return candidate
        problems.append(problem)
    if problems:
        raise ModelError(f"cannot resume: no checkpoint in {str(directory)!r} reads back whole: {'; '.join(problems)}. "
                         "Start a new run instead (without --resume)")
    return None


def _problem_of(checkpoint: Folder) -> str | None:
    """What is damaged in a checkpoint, checked on a local copy where it is on object storage
    (named by its URL all the same)."""
    if not checkpoint.exists():
        return f"checkpoint {checkpoint} is missing"
    with checkpoint.fetched() as local:
        problem = checkpoint_problem(local)
    return problem.replace(str(local), checkpoint.url) if problem else None


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


def _read_pointer(directory: Folder) -> str | None:
    """The checkpoint folder name ``latest.json`` holds; None if it is missing or damaged."""
    try:
        name = json.loads(directory.read_text(LATEST))["checkpoint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and name.startswith("step-") and "/" not in name else None


def _step_names(directory: Folder) -> list[str]:
    """Checkpoint folder names, newest first (names hold the zero-padded step)."""
    return sorted((name for name in directory.names() if name.startswith("step-")), reverse=True)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_checkpoint(path: Path, strategy, model, optimizer, scheduler) -> dict:
    """Restore a checkpoint (a local folder: ``Folder.fetched`` gives one) into model, optimizer
    and scheduler (on every worker); returns the saved progress."""
    strategy.state.load(path, model, optimizer)
    extra = torch.load(path / TRAINER_FILE, weights_only=True)
    scheduler.load_state_dict(extra["scheduler"])
    torch.set_rng_state(extra["rng"])
    return json.loads((path / STATE_FILE).read_text())


def saved_state(checkpoint: Folder) -> dict:
    """A checkpoint's progress (step, epoch, history, ...), without loading its tensors."""
    return json.loads(checkpoint.read_text(STATE_FILE))


def saved_step(checkpoint: Folder) -> int:
    return saved_state(checkpoint)["step"]


def is_complete(checkpoint: Folder) -> bool:
    """Whether the folder holds a checkpoint whose saving finished (its marker is written last)."""
    return checkpoint.is_file(STATE_FILE)


def kept_weights(checkpoint: Folder) -> dict | None:
    """The weights a run stopped at ``checkpoint`` keeps: its best evaluation's, else its last;
    None where the checkpoint holds sharded weights only (fsdp's sharded checkpoints, ZeRO-3's)."""
    with checkpoint.fetched() as local:
        whole = [local / name for name in (BEST, MODEL_FILE) if (local / name).is_file()]
        return load_weights(whole[0]) if whole else None
