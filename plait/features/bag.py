"""Bag features: each cell a bag of words, every token counted (Ludwig's bag type).

Preprocessing is the set input's: a vocabulary of the most common training tokens after the
unknown token (id 0), and each cell the list of its tokens' ids, one entry per occurrence, so
"a b a" is [1, 2, 1]. That list is the column the set and text inputs write too; the counts are
taken where the column becomes a tensor (``plait.data.tensors``), one row of counts per cell.
"""

from __future__ import annotations

from plait.features.set import SetProcessor


class BagProcessor(SetProcessor):
    """A set input whose repeated tokens are kept: the same steps, the same column."""

    type = "bag"
