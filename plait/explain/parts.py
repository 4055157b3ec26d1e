"""Attributions inside one input: each token of a text or sequence input, each pixel of an image.

The feature-level method (``integrated_gradients.py``) moves every input's encoding at once. Here
one input moves on its own, the OTHER INPUTS HELD AT THE ROW'S VALUES, so a part's attribution
answers "how much does this token (this pixel) of the row move the score, given the rest of the
row". Each is integrated gradients with the same quadrature and refinement (a row is integrated
again with more steps while its completeness error exceeds TOLERANCE of its change).

- Tokens: integrated gradients at the encoder's token embeddings. Every real token's embedding
  moves from the embedding of padding (id 0) to its own, at its place; a token's attribution is
  the sum over its embedding's dimensions. The positions stay those of real tokens along the line
  (the encoder's mask of real tokens is read from the ids, which do not move), so the tokens'
  attributions add up to score(row) - score(the row's tokens each replaced by padding's embedding,
  still counted as tokens). What is left of the input's whole contribution, score(row) -
  score(the input all padding, no tokens), is ``length_attribution``: the score's change from the
  positions being counted as tokens at all (the reduction's sum or mean over more positions, the
  length the model sees). Tokens + length = ``change_alone`` + ``delta``.
  An encoder with no token table plait can reach (a pretrained Hugging Face encoder, whose
  tokenizer and embeddings are its own; an input whose encoder ran at preprocessing, cached) gets
  none, and the summary says why.
- Images: integrated gradients at the pixels, from black (every pixel 0, the feature-level
  baseline) to the image, fed to the encoder as floats in [0, 255] (the image input scales them as
  it scales the stored bytes); a pixel's attribution is the sum over its channels, a [height,
  width] heat map per row, which adds up to ``change_alone`` + ``delta``, where ``change_alone``
  is score(row) - score(the image black).

Cost: one more integral per text, sequence or image input (and per class explained), each step
running that input's encoder, the combiner and the heads on the interpolated rows; the other
inputs' encodings are computed once.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from plait.explain.baselines import baseline_tensor
from plait.explain.integrated_gradients import integrate, score_of
from plait.models.encoders import TiedInput

TOKEN_TYPES = ("text", "sequence")
NO_TOKEN_TABLE = ("no token attributions: its encoder has no token embedding plait can reach (a pretrained "
                  "Hugging Face encoder, or embeddings cached at preprocessing)")


def token_table(encoder: nn.Module) -> nn.Embedding | None:
    """The embedding an input's encoder looks its token ids up in (a tied input's: its target's),
    or None where it has none: see the module."""
    if isinstance(encoder, TiedInput):
        encoder = encoder.shared
    table = getattr(encoder, "embedding", None)
    return table if isinstance(table, nn.Embedding) else None


def described(types: dict[str, str], columns) -> dict[str, str]:
    """What each text, sequence and image input is explained by, inside itself, for the summary:
    read from the rows table's ``columns``, which have a text input's tokens only where its
    encoder has a token table."""
    found = {}
    for name, kind in types.items():
        if kind == "image":
            found[name] = "heat map: each pixel's attribution, summed over channels, against black"
        elif kind in TOKEN_TYPES:
            found[name] = (f"each token's attribution, against padding's embedding at its place; "
                           f"{name}_length_attribution: the rest of the input's change alone"
                           if f"{name}_tokens" in columns else NO_TOKEN_TABLE)
    return found


def part_attributions(module, inputs: dict[str, torch.Tensor], types: dict[str, str], output: str,
                      found: dict, steps: int) -> dict[str, dict]:
    """For each text, sequence (with a token table) and image input of the batch: ``parts``
    (tokens [rows, positions] or pixels [rows, height, width]), ``change_alone``, ``delta``,
    ``steps`` and, for tokens, ``length`` (see the module). ``found``: the feature-level result
    for the same rows and classes (``integrated_gradients``)."""
    results = {}
    for name, kind in types.items():
        if kind == "image":
            results[name] = _pixels(module, inputs, name, output, found, steps)
        elif kind in TOKEN_TYPES and token_table(module.encoder(name)) is not None:
            results[name] = _tokens(module, inputs, name, output, found, steps)
    return results


def _tokens(module, inputs, name, output, found, steps) -> dict:
    encoder, table, ids = module.encoder(name), token_table(module.encoder(name)), inputs[name]
    with torch.no_grad():
        with _replaced(table, None) as seen:
            encoder(ids)
        end = seen["output"]
        start = table(torch.zeros_like(seen["ids"]))  # padding's embedding at every place

    def encode(mixed, rows, repeats):
        with _replaced(table, mixed):
            return encoder(ids[rows].repeat(repeats, 1)), None

    scores = _scores(module, name, encode, output, found)
    everyone = torch.arange(len(ids), device=ids.device)
    with torch.no_grad():
        at_start = scores({name: start}, everyone, 1)
        alone = _score_without(module, inputs, name, "text", output, found)
    attributions, delta, used = integrate(scores, {name: start}, {name: end}, found["score"] - at_start, steps,
                                          lambda product: product.sum(-1))
    return {"parts": attributions[name], "length": at_start - alone, "change_alone": found["score"] - alone,
            "delta": delta, "steps": used}


def _pixels(module, inputs, name, output, found, steps) -> dict:
    encoder = module.encoder(name)
    end = inputs[name].float()
    start = torch.zeros_like(end)  # black: the feature-level baseline

    def encode(mixed, rows, repeats):
        encoding = encoder(mixed)
        return encoding if getattr(encoder, "returns_state", False) else (encoding, None)

    scores = _scores(module, name, encode, output, found)
    with torch.no_grad():
        alone = _score_without(module, inputs, name, "image", output, found)
    attributions, delta, used = integrate(scores, {name: start}, {name: end}, found["score"] - alone, steps,
                                          lambda product: product.sum(1))
    return {"parts": attributions[name], "change_alone": found["score"] - alone, "delta": delta, "steps": used}


def _scores(module, name, encode, output, found):
    """The ``Scores`` of ``integrate`` (integrated_gradients.py) when only input ``name`` moves:
    ``encode(mixed, rows, repeats)`` gives its encoding (and an encoder's state, or None); the
    other inputs keep the rows' encodings."""
    encoded, state, classes = found["encoded"], found["state"], found["classes"]

    def scores(mixed, rows, repeats):
        encoding, own_state = encode(mixed[name], rows, repeats)
        moved = {n: encoding if n == name else _repeat(e[rows], repeats) for n, e in encoded.items()}
        states = own_state if own_state is not None else _repeat(_select(state, rows), repeats)
        return score_of(module, module.decoded(moved, states), output,
                        None if classes is None else classes[rows].repeat(repeats))
    return scores


def _score_without(module, inputs, name, kind, output, found) -> torch.Tensor:
    """Each row's score with input ``name`` at its baseline and the others at the row's values."""
    encoding = module.encoder(name)(baseline_tensor(kind, inputs[name]))
    state = found["state"]
    if getattr(module.encoder(name), "returns_state", False):
        encoding, state = encoding
    moved = {**found["encoded"], name: encoding}
    return score_of(module, module.decoded(moved, state), output, found["classes"])


@contextmanager
def _replaced(table: nn.Embedding, replacement: torch.Tensor | None):
    """While open, the table's output is ``replacement`` (None: its own); ``seen`` holds the ids it
    was last given and its own output."""
    seen = {}

    def hook(_module, args, own_output):
        seen["ids"], seen["output"] = args[0], own_output
        return replacement

    handle = table.register_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def _repeat(value, repeats: int):
    """``value`` (a tensor, or a list, tuple or dict of them; None) stacked ``repeats`` times on
    the rows' dimension, as ``integrate`` lays out the steps."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.repeat(repeats, *([1] * (value.dim() - 1)))
    if isinstance(value, dict):
        return {k: _repeat(v, repeats) for k, v in value.items()}
    return type(value)(_repeat(v, repeats) for v in value)


def _select(value, rows: torch.Tensor):
    if value is None or isinstance(value, torch.Tensor):
        return None if value is None else value[rows]
    if isinstance(value, dict):
        return {k: _select(v, rows) for k, v in value.items()}
    return type(value)(_select(v, rows) for v in value)


def part_columns(name: str, kind: str, result: dict, ids: torch.Tensor | None, vocabulary) -> dict[str, pa.Array]:
    """The rows table's columns for one input's parts: ``<input>_tokens`` and
    ``<input>_token_attributions`` (the real tokens, padding and any cut by a tied target's shorter
    length left out) with ``<input>_length_attribution``; or ``<input>_heat_map`` [height][width];
    both with ``<input>_change_alone``, ``<input>_parts_delta`` and ``<input>_parts_steps``."""
    parts = result["parts"].detach().cpu().numpy().astype(np.float32)
    columns = {}
    if kind == "image":
        rows, height, width = parts.shape
        columns[f"{name}_heat_map"] = pa.FixedSizeListArray.from_arrays(
            pa.FixedSizeListArray.from_arrays(pa.array(parts.reshape(-1)), width), height)
    else:
        own = ids.cpu().numpy()[:, :parts.shape[1]]
        words = np.asarray(vocabulary, dtype=object)
        real = [row != 0 for row in own]
        columns[f"{name}_tokens"] = pa.array([list(words[row[keep]]) for row, keep in zip(own, real)],
                                             pa.list_(pa.string()))
        columns[f"{name}_token_attributions"] = pa.array([p[: len(keep)][keep] for p, keep in zip(parts, real)],
                                                         pa.list_(pa.float32()))
        columns[f"{name}_length_attribution"] = pa.array(result["length"].detach().cpu().numpy())
    columns[f"{name}_change_alone"] = pa.array(result["change_alone"].detach().cpu().numpy())
    columns[f"{name}_parts_delta"] = pa.array(result["delta"].detach().cpu().numpy())
    columns[f"{name}_parts_steps"] = pa.array(result["steps"].detach().cpu().numpy().astype(np.int32))
    return columns
