"""``safetensors``: the model's weights in safetensors, with its config and preprocessing metadata
in JSON: a plait model folder (``plait.Model.load`` reads it), which other tools read with the
``safetensors`` package alone."""

from __future__ import annotations

import json
from pathlib import Path

import plait
from plait.config.render import resolved_dict
from plait.models.saved import CONFIG, METADATA, WEIGHTS, write_model_files


def refusals(model) -> list[str]:
    return []


def write(model, folder: Path) -> None:
    write_model_files(folder, resolved_dict(model.config), model.metadata, model.module.state_dict())
    description = {"format": "safetensors", "plait_version": plait.__version__, "weights": WEIGHTS, "config": CONFIG,
                   "metadata": METADATA}
    (folder / "export.json").write_text(json.dumps(description, indent=2))
