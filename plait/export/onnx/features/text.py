"""Text inputs: the runner tokenizes (``tokens.py``: every word tokenizer, exactly as plait),
the graph looks the tokens up (unknown: 1, as ``plait.features.text``), keeps each row's first
``sequence_length`` ids and pads with 0 on the side the feature pads (``plait.data.tensors``).
The tokenizer thus runs without plait, inside the export folder.

Refused by name at export: BPE subwords (``tokenizer: bpe``) and Hugging Face tokenizers (and so
pretrained Hugging Face encoders), whose tokenizers have no ONNX or stdlib form here; cached
embeddings are refused with every input type.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from plait.export.onnx.features import exports_input
from plait.export.onnx.features.tokens import PAD, token_ids, token_reader, unsupported_tokenizer
from plait.export.onnx.graph import GraphBuilder

UNKNOWN_ID, PADDING_ID = 1, 0


def refuse_subwords(meta: dict, feature) -> list[str]:
    if "hf_tokenizer" in meta:
        return [f"its Hugging Face tokenizer ({feature.preprocessing.pretrained_model_name_or_path!r}) has no ONNX "
                "form; word tokenizers (space, space_punct, ...) export"]
    if "bpe" in meta:
        return ["its BPE subword tokenizer (tokenizer: bpe) has no ONNX form; word tokenizers (space, space_punct, "
                "...) export"]
    return unsupported_tokenizer(meta, feature)


@exports_input("text", "string", ("tokens",), refuse=refuse_subwords, reader=token_reader)
def text_input(g: GraphBuilder, tokens: str, meta: dict, feature) -> str:
    length = meta["sequence_length"]
    i64 = lambda v: g.constant(v, np.int64)  # noqa: E731
    ids = token_ids(g, tokens, meta["vocabulary"], unknown=UNKNOWN_ID, pad=PADDING_ID)
    real = g.op("Not", g.op("Equal", tokens, g.constant(PAD)))  # a token may be the padding symbol itself (id 0)
    # Each row's first ``length`` ids, padded on the right: the batch may have fewer or more columns.
    padding = g.op("Expand", i64([[PADDING_ID]]), g.op("Concat", g.op("Slice", g.op("Shape", tokens), i64([0]), i64([1])),
                                                      i64([length]), axis=0))
    ids = g.op("Slice", g.op("Concat", ids, padding, axis=1), i64([0]), i64([length]), i64([1]))
    if meta.get("padding", feature.preprocessing.padding) != "left":
        return ids
    # Left padding: a row of n tokens moves right by length - n.
    counts = g.op("ReduceSum", g.op("Cast", real, to=TensorProto.INT64), i64([1]), keepdims=1)
    kept = g.op("Min", counts, i64(length))
    source = g.op("Sub", i64(list(range(length))), g.op("Sub", i64(length), kept))  # [rows, length]
    moved = g.op("GatherElements", ids, g.op("Max", source, i64(0)), axis=1)
    return g.op("Where", g.op("Less", source, i64(0)), i64(PADDING_ID), moved)
