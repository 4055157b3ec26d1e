"""The baseline each feature type is explained against: what "absent" means for it, in the
model-ready tensor (``plait.data.tensors``). One table, stated in the README:

- number: 0 after normalization (the training mean under zscore, the median under quantile, the
  minimum under minmax);
- binary: false; category: the unknown value (<UNK>, index 0);
- set and bag: empty; text and sequence: all padding (no tokens);
- vector, timeseries, audio: zeros; image: black (every pixel 0);
- date and h3: every part 0.
"""

from __future__ import annotations

import torch

BASELINES = {
    "number": "0 after normalization (the training mean under zscore, the median under quantile)",
    "binary": "false",
    "category": "the unknown value <UNK>",
    "set": "the empty set",
    "bag": "the empty bag",
    "text": "no tokens (all padding)",
    "sequence": "no tokens (all padding)",
    "vector": "zeros",
    "timeseries": "zeros",
    "audio": "silence (zeros)",
    "image": "black (every pixel 0)",
    "date": "every part 0",
    "h3": "every part 0",
}
"""What each input type is compared against, as the summary states it."""


def baseline_tensor(feature_type: str, tensor: torch.Tensor) -> torch.Tensor:
    """The baseline rows for a batch of ``tensor`` (a feature's model-ready tensor): zeros of its
    shape and type, which is each type's baseline in that layout (category index 0 is <UNK>,
    token id 0 padding)."""
    if feature_type not in BASELINES:
        raise KeyError(f"no baseline for feature type {feature_type!r}")
    return torch.zeros_like(tensor)
