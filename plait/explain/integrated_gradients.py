"""Integrated gradients (Sundararajan et al., 2017) at the encoders' outputs.

Each input feature's encoding moves on a straight line from its baseline's encoding (each type's
baseline: ``baselines.py``) to the row's, all features together; the gradients of the explained
score along the line, integrated with Gauss-Legendre quadrature, times the encoding's change,
summed over the feature's encoding, are its attribution. Working at the encodings makes every
feature type alike (a category's embedding, a text encoder's output, a number's dense layer),
and the attributions of a row add up to score(row) - score(baseline) (completeness) up to the
quadrature's error, which the row's ``delta`` reports.

ReLU networks bend the line's gradients at kinks, where any fixed number of steps leaves an
error of about 1/steps: 50 steps left 14% of a test table's rows more than 1% off. A row whose
``delta`` exceeds ``TOLERANCE`` of its score's change (plus ``ABSOLUTE_FLOOR``) is integrated
again with ``REFINEMENT`` times the steps, up to ``MAX_STEPS``; ``steps`` reports each row's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from plait.explain.baselines import baseline_tensor

DEFAULT_STEPS = 50
TOLERANCE = 0.01
ABSOLUTE_FLOOR = 1e-4
"""A row's completeness error allowed beside TOLERANCE of its change: a change of 1e-3 or less
would otherwise ask for an error below float32's resolution of the scores."""
REFINEMENT = 4
MAX_STEPS = 3200
ROWS_PER_PASS = 8192
"""Interpolated rows in one forward and backward pass: the batch's rows times the steps, cut into
passes of this many; where what moves is larger than a vector (a text's token embeddings, an
image's pixels), of this many divided by its size in units of ``NUMBERS_PER_ROW``."""
NUMBERS_PER_ROW = 4096


def quadrature(steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss-Legendre points in (0, 1) and their weights (which sum to 1)."""
    points, weights = np.polynomial.legendre.leggauss(steps)
    return torch.tensor((points + 1) / 2, dtype=torch.float32), torch.tensor(weights / 2, dtype=torch.float32)


def score_of(module, logits: dict[str, torch.Tensor], output: str, classes: torch.Tensor | None) -> torch.Tensor:
    """The explained score of each row: the probability of ``classes`` (one class index per row)
    for a category or binary output, the prediction for a number."""
    predicted = module.head(output).predict(logits[output])
    if "probabilities" in predicted:
        return predicted["probabilities"].gather(1, classes.view(-1, 1)).squeeze(1)
    if "probability" in predicted:  # binary: class 1 is true
        p = predicted["probability"]
        return torch.where(classes.bool(), p, 1 - p)
    return predicted["prediction"]


def predicted_classes(module, logits: dict[str, torch.Tensor], output: str) -> torch.Tensor | None:
    """Each row's predicted class (None for a number output)."""
    predicted = module.head(output).predict(logits[output])
    if "prediction" in predicted and predicted["prediction"].dtype in (torch.bool, torch.int64):
        return predicted["prediction"].long()
    return None


def integrated_gradients(module, inputs: dict[str, torch.Tensor], types: dict[str, str], output: str,
                         classes: torch.Tensor | None = None, steps: int = DEFAULT_STEPS) -> dict[str, torch.Tensor]:
    """For a batch of ``inputs`` (model-ready tensors; ``types``: each input's feature type):
    ``attributions`` {input: [rows]}, ``score`` and ``baseline_score`` [rows], ``delta`` (the
    attributions' sum minus the scores' difference), ``classes`` (the explained class of each
    row: ``classes`` if given, else the predicted one) and ``steps`` (each row's, after refinement);
    ``encoded`` and ``state``, the rows' encodings, for explanations that hold them fixed."""
    module.eval()
    with torch.no_grad():
        encoded, state = module.encoded(inputs)
        baseline, _ = module.encoded({name: baseline_tensor(types[name], t) for name, t in inputs.items()})
        logits = module.decoded(encoded, state)
        classes = predicted_classes(module, logits, output) if classes is None else classes
        score = score_of(module, logits, output, classes)
        baseline_score = score_of(module, module.decoded(baseline, state), output, classes)

    def scores(mixed: dict[str, torch.Tensor], rows: torch.Tensor, repeats: int) -> torch.Tensor:
        return score_of(module, module.decoded(mixed, state), output,
                        None if classes is None else classes[rows].repeat(repeats))

    attributions, delta, used = integrate(scores, baseline, encoded, score - baseline_score, steps,
                                          lambda product: product.flatten(1).sum(1))
    return {"attributions": attributions, "score": score, "baseline_score": baseline_score, "delta": delta,
            "classes": classes, "steps": used, "encoded": encoded, "state": state}


Scores = Callable[[dict[str, torch.Tensor], torch.Tensor, int], torch.Tensor]
"""``scores(mixed, rows, repeats)``: the explained score of each of ``mixed``'s rows, which are
``repeats`` interpolations of each of ``rows`` (indices into the batch), step by step: row
``s * len(rows) + i`` is step ``s`` of ``rows[i]``."""


def integrate(scores: Scores, start: dict[str, torch.Tensor], end: dict[str, torch.Tensor], change: torch.Tensor,
              steps: int, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None
              ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Integrated gradients of ``scores`` on the straight lines from ``start`` to ``end`` (tensors
    whose first dimension is the batch's rows), refined where a row's completeness error exceeds
    the tolerance (see the module): each tensor's attributions (``(end - start) * gradients``
    through ``reduce``, which keeps the rows' dimension), the rows' ``delta`` (the attributions'
    sum minus ``change``, the scores' difference between the ends) and steps."""
    reduce = reduce or (lambda product: product)
    rows = torch.arange(len(change), device=change.device)
    attributions = _attributions(scores, start, end, rows, steps, reduce)
    delta = _total(attributions) - change
    used = torch.full_like(change, steps)
    while steps < MAX_STEPS:
        off = torch.nonzero(delta.abs() > TOLERANCE * change.abs() + ABSOLUTE_FLOOR).flatten()
        if len(off) == 0:
            break
        steps = min(steps * REFINEMENT, MAX_STEPS)
        again = _attributions(scores, _rows(start, off), _rows(end, off), off, steps, reduce)
        for name in attributions:
            attributions[name][off] = again[name]
        delta[off], used[off] = _total(again) - change[off], steps
    return attributions, delta, used


def _attributions(scores, start, end, rows, steps, reduce) -> dict[str, torch.Tensor]:
    gradients = _integrated_gradients(scores, start, end, rows, steps)
    return {name: reduce((end[name] - start[name]) * gradients[name]) for name in end}


def _total(attributions: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.stack([a.reshape(len(a), -1).sum(1) for a in attributions.values()]).sum(0)


def _rows(tensors: dict[str, torch.Tensor], rows: torch.Tensor) -> dict[str, torch.Tensor]:
    return {name: tensor[rows] for name, tensor in tensors.items()}


def _integrated_gradients(scores, start, end, rows, steps) -> dict[str, torch.Tensor]:
    """The quadrature-weighted sum of the score's gradients along each row's line, per tensor."""
    first = next(iter(end.values()))
    points, weights = (t.to(first.device) for t in quadrature(steps))
    count = len(first)
    per_row = max(1, first[0].numel() // NUMBERS_PER_ROW) if first.dim() > 2 else 1
    steps_per_pass = max(1, ROWS_PER_PASS // max(count * per_row, 1))
    sums = {name: torch.zeros_like(value, dtype=torch.float32) for name, value in end.items()}
    for begin in range(0, steps, steps_per_pass):
        alphas, alpha_weights = points[begin:begin + steps_per_pass], weights[begin:begin + steps_per_pass]
        # Every step's interpolations of every row in one batch: [steps x rows, ...].
        mixed = {name: _along(start[name], end[name], alphas).requires_grad_() for name in end}
        score = scores(mixed, rows, len(alphas))
        gradients = torch.autograd.grad(score.sum(), list(mixed.values()))
        for name, gradient in zip(mixed, gradients):
            per_step = gradient.view(len(alphas), count, *gradient.shape[1:])
            sums[name] += torch.einsum("s,s...->...", alpha_weights, per_step)
    return sums


def _along(start: torch.Tensor, end: torch.Tensor, alphas: torch.Tensor) -> torch.Tensor:
    """``start + alpha * (end - start)`` for each alpha, stacked on the row dimension."""
    start, end = start.float(), end.float()
    shape = (len(alphas),) + (1,) * end.dim()
    return (start.unsqueeze(0) + alphas.view(shape) * (end - start).unsqueeze(0)).reshape(-1, *end.shape[1:])
