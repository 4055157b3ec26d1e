"""The token layout that text preprocessing writes and the models read.

Both sides need these numbers (the preprocessing in ``plait.features``, the encoders and heads in
``plait.models``); they live below both so that neither imports the other for them.
"""

from __future__ import annotations

PAD_ID, START_ID, STOP_ID = 0, 2, 3
"""Ids of padding, and of an output vocabulary's start and stop tokens (its entries 2 and 3,
after padding and unknown)."""

ID_OFFSET = 1
"""Stored ids of a Hugging Face tokenizer are its own plus this, so that 0 stays padding (see
``plait.features.hf_tokens``); a Hugging Face model subtracts it again."""

CACHED_EMBEDDING = "cached_embedding_size"
"""The metadata key of a text feature whose stored column is its frozen encoder's output (a
vector of this size per row), computed at preprocessing (cache_encoder_embeddings)."""
