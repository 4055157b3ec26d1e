"""The saved-model directory: config and preprocessing metadata in JSON, weights in safetensors.

A directory a user can move anywhere. Loading reads JSON and safetensors only, never a pickle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import plait
from plait.errors import ModelError
from plait.utils.fs import atomic_folder, local_fs

MODEL_FORMAT_VERSION = 1
DESCRIPTION = "plait_model.json"
CONFIG = "model_hyperparameters.json"
METADATA = "training_set_metadata.json"
WEIGHTS = "model_weights.safetensors"


def save_model(path: str | os.PathLike, config_dict: dict, metadata: dict, state_dict: dict) -> Path:
    from safetensors.torch import save_file

    final = Path(path)
    # Built beside its final place and published whole: an older model there is replaced, and a
    # failed save leaves it as it was. The description, written last, marks a complete model.
    with atomic_folder(local_fs(), str(final), marker=DESCRIPTION) as tmp:
        folder = Path(tmp)
        (folder / CONFIG).write_text(json.dumps(config_dict, indent=2))
        (folder / METADATA).write_text(json.dumps(metadata, indent=2))
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(folder / WEIGHTS))
        (folder / DESCRIPTION).write_text(json.dumps({"format_version": MODEL_FORMAT_VERSION, "plait_version": plait.__version__}, indent=2))
    return final


def read_model(path: str | os.PathLike) -> tuple[dict, dict, dict]:
    """(config dict, metadata, weights) of a saved model, after checking it is one."""
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_dir():
        raise ModelError(f"model path {str(path)!r} does not exist or is not a directory")
    description = path / DESCRIPTION
    if not description.is_file():
        hint = " (it looks like a run directory: use its model/ folder)" if (path / "model" / DESCRIPTION).is_file() else ""
        raise ModelError(f"{str(path)!r} is not a plait model: it has no {DESCRIPTION}{hint}")
    try:
        info = json.loads(description.read_text())
        version = info["format_version"]
        if version != MODEL_FORMAT_VERSION:
            raise ModelError(
                f"the model at {str(path)!r} has format version {version}, but this plait "
                f"({plait.__version__}) reads version {MODEL_FORMAT_VERSION}; retrain it, or use the "
                f"plait version that saved it ({info.get('plait_version', 'unknown')})"
            )
        config = json.loads((path / CONFIG).read_text())
        metadata = json.loads((path / METADATA).read_text())
        weights = load_file(str(path / WEIGHTS))
    except ModelError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise ModelError(f"the model at {str(path)!r} is incomplete or damaged: {exc}") from None
    return config, metadata, weights
