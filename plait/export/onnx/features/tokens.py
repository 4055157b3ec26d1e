"""The token matrix that text, set and bag inputs take: the runner (``plait_onnx.as_tokens``)
fills a missing cell with the feature's fill value and splits each cell with the feature's
tokenizer, exactly as plait does, into strings [rows, tokens] padded with ""; the graph looks the
tokens up. Standard ONNX splits on whitespace (StringSplit) but has no rule for space_punct's
punctuation, so the tokenizers run beside the graph, in plait_onnx.py (stdlib ``re``).

Supported: every word tokenizer (space, space_punct, comma, underscore, characters,
untokenized, stripped). The runner's reading of whitespace, word characters and lowercasing is
Python's (``str.split``, ``\\w``, ``str.lower``); plait's is Arrow's: the same on ASCII and on
letters, digits and common spaces, possibly not on rare characters (such as U+0130's lowercase).
"""

from __future__ import annotations

from onnx import TensorProto

from plait.export.onnx.graph import GraphBuilder

PAD = ""
"""What follows a row's last token (no tokenizer makes an empty token)."""
SUPPORTED_TOKENIZERS = ("space", "space_punct", "comma", "underscore", "characters", "untokenized", "stripped")


def token_reader(meta: dict, feature) -> dict:
    """export.json's note for the runner: how to fill and split this column."""
    return {"reader": "tokens", "tokenizer": feature.preprocessing.tokenizer,
            "lowercase": bool(feature.preprocessing.lowercase), "fill_value": meta.get("fill_value")}


def unsupported_tokenizer(meta: dict, feature) -> list[str]:
    tokenizer = feature.preprocessing.tokenizer
    if tokenizer in SUPPORTED_TOKENIZERS:
        return []
    return [f"tokenizer {tokenizer!r} has no ONNX form (supported: {', '.join(SUPPORTED_TOKENIZERS)})"]


def token_ids(g: GraphBuilder, tokens: str, vocabulary: list[str], unknown: int, pad: int) -> str:
    """int64 [rows, tokens]: each token's index in ``vocabulary``, ``unknown`` for any other, and
    ``pad`` after a row's last token."""
    vocabulary = [str(v) for v in vocabulary]
    return g.label_encoder(tokens, [*vocabulary, PAD], [*range(len(vocabulary)), pad], unknown)


def vocabulary_counts(g: GraphBuilder, ids: str, width: int, reduce: str) -> str:
    """float [rows, width]: for each vocabulary index, ``reduce`` (ReduceMax: present;
    ReduceSum: how often) over a row's ids (a padding id of -1 matches none)."""
    hits = g.op("Equal", g.op("Unsqueeze", ids, g.constant([2])), g.constant(list(range(width)), "int64"))
    return g.op(reduce, g.op("Cast", hits, to=TensorProto.FLOAT), g.constant([1]), keepdims=0)
