"""Preprocessed columns as tensors."""

from __future__ import annotations

import torch

from plait.data.tensors import trim_padding


def test_trim_padding_cuts_after_the_longest_row_and_keeps_one_column_of_empty_rows():
    batch = {"t": torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]]), "e": torch.zeros(2, 3, dtype=torch.long)}
    trimmed = trim_padding(batch, ["t", "e"])
    assert trimmed["t"].tolist() == [[5, 6], [7, 0]] and trimmed["e"].shape == (2, 1)
