"""Text tokenized by a Hugging Face model's own tokenizer (``tokenizer: hf_tokenizer``).

The tokenizer is read once, where the statistics are finalized, and stored in the feature's
metadata as its ``tokenizer.json``: the workers that transform the data, and a saved model on
another machine, need only that string and the ``tokenizers`` library, never the model folder.

Stored ids are the tokenizer's plus one, so that 0 stays padding: plait's batches pad token rows
with 0 and its encoders mask id 0, while a model's own padding id may be anything (RoBERTa's is
1, and its 0 is a real token). A Hugging Face encoder subtracts the one again.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from plait.utils.hf_models import context_length, model_folder, read_model_config, tokenizer_json
from plait.utils.tokens import ID_OFFSET

PADDING = "<PAD>"
DEFAULT_LENGTH = 512
"""The sequence cap of a model whose config states no context length, with no
max_sequence_length set."""


def sequence_cap(name_or_path: str, max_sequence_length: int | None, where: str) -> int:
    """The most tokens a row keeps: max_sequence_length, within the model's context."""
    folder = model_folder(name_or_path, where)
    context = context_length(read_model_config(folder, where)) if (folder / "config.json").is_file() else None
    caps = [c for c in (max_sequence_length, context) if c is not None]
    return min(caps) if caps else DEFAULT_LENGTH


@functools.lru_cache(maxsize=8)
def _tokenizer(serialized: str, truncate_at: int | None = None):
    """The tokenizer, never padding, cutting at ``truncate_at`` tokens (None: never). One object
    per setting, never changed after: engines call it from several threads at once."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(serialized)
    tokenizer.no_padding()
    if truncate_at is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(truncate_at)
    return tokenizer


def token_counts(texts: list[str], serialized: str, special_tokens: bool = True) -> np.ndarray:
    """Each text's number of tokens, uncut (with the model's special tokens, or bare)."""
    encodings = _tokenizer(serialized).encode_batch(texts, add_special_tokens=special_tokens)
    return np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))


def encode(texts: list[str], serialized: str, length: int) -> pa.ListArray:
    """Each text's ids (plus ID_OFFSET), at most ``length`` of them: a long text is cut by the
    tokenizer itself, so its closing special token ([SEP], </s>) is kept."""
    encodings = _tokenizer(serialized, length).encode_batch(texts)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
    flat = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int32, count=int(lengths.sum())) + ID_OFFSET
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.int32()))


def encode_ending(texts: list[str], serialized: str, length: int, stop_id: int) -> pa.ListArray:
    """Each text's ids (plus ID_OFFSET) without the model's special tokens, cut to leave room for
    ``stop_id`` (a stored id), which ends every row: what a language model learns to write."""
    encodings = _tokenizer(serialized).encode_batch(texts, add_special_tokens=False)
    lengths = np.fromiter((min(len(e.ids), length - 1) + 1 for e in encodings), dtype=np.int64, count=len(texts))
    flat = np.fromiter((i + ID_OFFSET for e in encodings for i in [*e.ids[:length - 1], stop_id - ID_OFFSET]),
                       dtype=np.int32, count=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.int32()))


def decode(rows: list[list[int]], serialized: str) -> list[str]:
    """Stored ids (plus ID_OFFSET) back to text, the model's special tokens left out."""
    return _tokenizer(serialized).decode_batch([[i - ID_OFFSET for i in row] for row in rows],
                                                skip_special_tokens=True)


def vocabulary(serialized: str) -> list[str]:
    """The tokens by stored id: padding, then the tokenizer's tokens in id order."""
    tokenizer = _tokenizer(serialized)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    return [PADDING] + [tokenizer.id_to_token(i) or "" for i in range(size)]


def finalize(name_or_path: str, max_sequence_length: int | None, where: str) -> dict:
    """The metadata of an hf_tokenizer feature."""
    serialized = tokenizer_json(name_or_path, where)
    return {"hf_tokenizer": serialized, "vocabulary": vocabulary(serialized),
            "sequence_length": sequence_cap(name_or_path, max_sequence_length, where), "padding": "right"}
