"""The saved-model directory: config and preprocessing metadata in JSON, weights in safetensors.

A directory a user can move anywhere: a local path, or object storage (any fsspec URL, such as
``s3://bucket/results/run_0/model``). Loading reads JSON and safetensors only, never a pickle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import plait
from plait.errors import ModelError
from plait.models.migrate import FORMAT_VERSION as MODEL_FORMAT_VERSION
from plait.models.migrate import upgrade
from plait.utils.folder import Folder, built_locally

DESCRIPTION = "plait_model.json"
CONFIG = "model_hyperparameters.json"
METADATA = "training_set_metadata.json"
WEIGHTS = "model_weights.safetensors"


def save_model(path: str | os.PathLike | Folder, config_dict: dict, metadata: dict, state_dict: dict) -> Folder:
    """Write the model folder at ``path``, replacing an older model there; a failed save leaves
    that one as it was. The description, written last, marks a complete model."""
    final = path if isinstance(path, Folder) else Folder(path)
    with built_locally(final, marker=DESCRIPTION) as folder:
        write_model_files(folder, config_dict, metadata, state_dict)
    return final


def write_model_files(folder: Path, config_dict: dict, metadata: dict, state_dict: dict) -> None:
    from safetensors.torch import save_file

    (folder / CONFIG).write_text(json.dumps(config_dict, indent=2))
    (folder / METADATA).write_text(json.dumps(metadata, indent=2))
    save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(folder / WEIGHTS))
    (folder / DESCRIPTION).write_text(json.dumps({"format_version": MODEL_FORMAT_VERSION, "plait_version": plait.__version__}, indent=2))


def read_model(path: str | os.PathLike | Folder) -> tuple[dict, dict, dict]:
    """(config dict, metadata, weights) of a saved model, after checking it is one."""
    folder = path if isinstance(path, Folder) else Folder(path)
    if folder.is_local:
        return _read_model_files(folder.local(), folder.url)
    if not folder.is_file(DESCRIPTION):
        raise ModelError(f"{folder.url!r} is not a plait model: it has no {DESCRIPTION} (or the location does not exist)")
    with folder.fetched() as local:
        return _read_model_files(local, folder.url)


def _read_model_files(path: Path, shown: str) -> tuple[dict, dict, dict]:
    """Read the model folder at the local ``path`` (named ``shown`` in messages)."""
    if not path.is_dir():
        raise ModelError(f"model path {shown!r} does not exist or is not a directory")
    description = path / DESCRIPTION
    if not description.is_file():
        hint = " (it looks like a run directory: use its model/ folder)" if (path / "model" / DESCRIPTION).is_file() else ""
        raise ModelError(f"{shown!r} is not a plait model: it has no {DESCRIPTION}{hint}")
    version = _check_version(read_json_part(path, DESCRIPTION, shown), shown)
    config = read_json_part(path, CONFIG, shown)
    metadata = read_json_part(path, METADATA, shown)
    if not isinstance(metadata.get("features"), dict):
        raise ModelError(damaged(shown, METADATA, "has no 'features' object"))
    # A model saved in an older layout is read in today's (plait/models/migrate.py).
    return upgrade(version, config, metadata, _read_weights(path, shown))


def read_description(path: str | os.PathLike) -> tuple[dict, dict]:
    """(config dict, metadata) of a local saved model, in today's layout, without its weights
    (to read a model's classes and data split where its weights are not needed)."""
    path = Path(path)
    if not (path / DESCRIPTION).is_file():
        raise ModelError(f"{str(path)!r} is not a plait model: it has no {DESCRIPTION}")
    version = _check_version(read_json_part(path, DESCRIPTION), path)
    config, metadata, _ = upgrade(version, read_json_part(path, CONFIG), read_json_part(path, METADATA), {})
    if not isinstance(metadata.get("features"), dict):
        raise ModelError(damaged(path, METADATA, "has no 'features' object"))
    return config, metadata


def damaged(path: Path | str, file: str, what: str) -> str:
    """The message for a damaged file of a saved model: which file, what is wrong, what to do."""
    return (f"the model at {str(path)!r} is incomplete or damaged: {file} {what}; restore the model folder "
            f"from a copy, or train and save the model again")


def read_json_part(path: Path, file: str, shown: str | None = None) -> dict:
    """One of a model's JSON files, which must hold a JSON object (``shown``: the model's name in
    messages, where ``path`` is a local copy)."""
    shown = shown or str(path)
    try:
        value = json.loads((path / file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(damaged(shown, file, "is missing")) from None
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ModelError(damaged(shown, file, f"is not valid JSON ({str(exc).splitlines()[0]})")) from None
    if not isinstance(value, dict):
        raise ModelError(damaged(shown, file, f"holds a JSON {type(value).__name__}, not an object"))
    return value


def _check_version(info: dict, path: Path | str) -> int:
    """The model's format version, which this plait must be able to read (it reads every older one)."""
    version = info.get("format_version")
    if version is None:
        raise ModelError(damaged(path, DESCRIPTION, "has no format_version"))
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MODEL_FORMAT_VERSION:
        raise ModelError(
            f"the model at {str(path)!r} has format version {version}, but this plait "
            f"({plait.__version__}) reads version {MODEL_FORMAT_VERSION} and older; retrain it, or use the "
            f"plait version that saved it ({info.get('plait_version', 'unknown')})"
        )
    return version


def _read_weights(path: Path, shown: str) -> dict:
    """The weights, read as safetensors only (never a pickle): a truncated or foreign file fails here."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not (path / WEIGHTS).is_file():
        raise ModelError(damaged(shown, WEIGHTS, "is missing"))
    try:
        return load_file(str(path / WEIGHTS))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelError(damaged(shown, WEIGHTS, f"is not readable as safetensors ({str(exc).splitlines()[0]})")) from None


def weight_differences(expected: dict, weights: dict) -> tuple[list[str], list[str], list[str]]:
    """The names of the tensors ``expected`` (a state dict) has and ``weights`` lacks, those
    ``weights`` has beyond it, and those of another shape in ``weights``."""
    shapes = {k: tuple(v.shape) for k, v in expected.items()}
    missing = sorted(set(shapes) - set(weights))
    unexpected = sorted(set(weights) - set(shapes))
    resized = sorted(k for k in set(shapes) & set(weights) if tuple(weights[k].shape) != shapes[k])
    return missing, unexpected, resized


def load_weights_into(module, weights: dict, source: str) -> None:
    """Load ``weights`` into ``module``, or say how they differ from what it holds: weights of
    another model (other features, other sizes) must not fail deep inside torch."""
    missing, unexpected, resized = weight_differences(module.state_dict(), weights)
    resized = [key for key in resized if key not in getattr(module, "resizable_weights", ())]
    problems = [f"{len(keys)} {what} (first: {keys[0]})" for keys, what in
                ((missing, "tensors missing"), (unexpected, "unexpected tensors"), (resized, "tensors of another shape"))
                if keys]
    if problems:
        raise ModelError(
            f"{source} do not fit its config: {'; '.join(problems)}. They were saved by another model, or the "
            f"folder is damaged: restore the model folder from a copy, or train again"
        )
    module.load_state_dict(weights)
