"""Permutation importance: how much the explained output's validation metric worsens when one
input's column is shuffled, on labelled rows (the same shuffle for every run of a seed). Metrics
come from plait's evaluation on the backend, as ``plait evaluate``'s do."""

from __future__ import annotations

import numpy as np

from plait.config.metrics import HIGHER_IS_BETTER
from plait.errors import UsageError

REPEATS = 3
"""Shuffles per input; the importance is their mean (one shuffle's figure is noisy on small data)."""


def validation_metric(config: dict, output: str) -> str:
    """The metric training watched for ``output`` (trainer.validation_metric when its field is this
    output), else the output's loss."""
    trainer = config.get("trainer", {})
    if trainer.get("validation_field") == output and trainer.get("validation_metric"):
        return trainer["validation_metric"]
    return "loss"


def permutation_importance(backend, spec, dataset, output: str, random_seed: int) -> dict:
    import pandas as pd

    from plait import inference
    from plait.data.reader import iter_chunks

    frame = pd.concat([chunk.to_pandas() for chunk in iter_chunks(dataset)], ignore_index=True)
    if output not in frame.columns:
        raise UsageError(f"permutation importance needs labelled rows: the data has no column {output!r}")
    metric = validation_metric(spec.config, output)
    sign = 1.0 if metric in HIGHER_IS_BETTER else -1.0
    reference = inference.evaluate(backend, spec, frame)[output][metric]
    rng = np.random.default_rng(random_seed)
    importance = {}
    for feature in spec.config["input_features"]:
        column = feature.get("column") or feature["name"]
        drops = []
        for _ in range(REPEATS):
            shuffled = frame.assign(**{column: frame[column].to_numpy()[rng.permutation(len(frame))]})
            drops.append(sign * (reference - inference.evaluate(backend, spec, shuffled)[output][metric]))
        importance[feature["name"]] = float(np.mean(drops))
    return {"metric": metric, "reference": reference, "repeats": REPEATS, "importance": importance,
            "ranking": sorted(importance, key=lambda name: -importance[name])}
