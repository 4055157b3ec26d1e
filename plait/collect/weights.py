"""collect_weights: named tensors of a trained model (its state dict's: parameters and buffers)."""

from __future__ import annotations

import difflib

import numpy as np

from plait.errors import UsageError


def collect_weights(model, tensors: list[str]) -> list[tuple[str, np.ndarray]]:
    """``(name, array)`` for each name in ``tensors`` (a key of the model's state dict, as
    ``plait collect_summary`` lists them), in float32 where the weight is a float."""
    model.require_trained()
    state = model.module.state_dict()
    unknown = [name for name in tensors if name not in state]
    if unknown:
        raise UsageError(f"--tensors: {unknown_names(unknown, list(state))}; plait collect_summary -m MODEL lists "
                         f"every weight's name")
    return [(name, _array(state[name])) for name in tensors]


def unknown_names(unknown: list[str], known: list[str]) -> str:
    """``'x' is not a name of this model (did you mean 'y'?)``, for each of ``unknown``."""
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        said.append(f"{name!r} is not a name of this model" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return "; ".join(said)


def _array(tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.is_floating_point() else tensor).numpy()
