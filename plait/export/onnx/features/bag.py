"""Bag features: each row the count of every vocabulary item among the cell's tokens
(``plait.data.tensors``), from the runner's tokens (``tokens.py``). An unseen token counts
towards the unknown item, index 0, as in plait."""

from __future__ import annotations

from plait.export.onnx.features import exports_input
from plait.export.onnx.features.tokens import token_ids, token_reader, unsupported_tokenizer, vocabulary_counts
from plait.export.onnx.graph import GraphBuilder


@exports_input("bag", "string", ("tokens",), refuse=unsupported_tokenizer, reader=token_reader)
def bag_input(g: GraphBuilder, tokens: str, meta: dict, feature) -> str:
    vocabulary = meta["vocabulary"]
    ids = token_ids(g, tokens, vocabulary, unknown=0, pad=-1)
    return vocabulary_counts(g, ids, max(1, len(vocabulary)), "ReduceSum")
