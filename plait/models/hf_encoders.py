"""Text encoders from pretrained Hugging Face models (``auto_transformer``, ``bert``, ...).

The encoder reads the ids that ``hf_tokenizer`` stored (the tokenizer's plus one, 0 for padding:
plait.features.hf_tokens), runs the ``transformers`` model with an attention mask, and reduces its
last hidden states (or takes its pooler output) to one vector.

The model is built from the feature's metadata alone, which holds the model's config: a saved
plait model loads its weights into that skeleton without the pretrained folder. Only a model about
to be trained reads the pretrained weights (safetensors only, never pickled files).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import nn

from plait.errors import BackendError, ModelError
from plait.models.text_encoders import Reducer
from plait.models.torchvision_encoders import import_torchvision
from plait.utils.hf_models import MODEL_CONFIG, check_weights, model_folder, transformers_config
from plait.utils.ragged import pad
from plait.utils.tokens import ID_OFFSET

def import_transformers():
    """transformers, ready to use. It imports torchvision where that is installed, and a
    torchvision whose compiled operators cannot load (the CUDA wheel beside a CPU torch) would
    break that import: torchvision is imported first, the way plait's image encoders do."""
    if importlib.util.find_spec("torchvision") is not None:
        import_torchvision()
    try:
        import transformers
    except ImportError:
        raise BackendError("Hugging Face encoders need transformers: pip install plait[hf]") from None
    transformers.logging.set_verbosity_error()  # what plait needs to say about a load, it says itself
    transformers.logging.disable_progress_bar()
    return transformers


@functools.cache
def import_peft():
    """peft (adapters), imported after transformers as plait imports it."""
    import_transformers()
    try:
        import peft
    except ImportError:
        raise BackendError("adapters need peft: pip install plait[hf]") from None
    return peft


class HFTextEncoder(nn.Module):
    """A ``transformers`` model over stored token ids: [batch, length] -> [batch, output_size]
    (or [batch, length, width] with reduce_output null)."""

    def __init__(self, transformer: nn.Module, config, length: int):
        super().__init__()
        self.transformer = transformer
        self.trainable = config.trainable
        self.pad_id = transformer.config.pad_token_id if transformer.config.pad_token_id is not None else 0
        self.takes_mask = "attention_mask" in inspect.signature(transformer.forward).parameters
        self.length = length
        self.adapted = config.adapter is not None
        width = transformer.config.hidden_size
        self.pooled = config.reduce_output == "cls_pooled"
        self.reducer = None if self.pooled or config.reduce_output is None else Reducer(config.reduce_output, width,
                                                                                       length)
        if self.pooled:
            self.output_shape = (width,)
        elif self.reducer is None:
            self.output_shape = (length, width)
        else:
            self.output_shape = (self.reducer.output_size,)
        self.output_size = self.output_shape[-1]
        if not self.adapted:  # with an adapter, peft has frozen the model's own weights and not its own
            transformer.requires_grad_(self.trainable)
        self.train(self.training)

    @property
    def length_free(self) -> bool:
        """The attention mask keeps padding out, so a batch may stop at its longest row, except
        where the output's shape is the sequence's."""
        return self.reducer is not None and self.reducer.mode != "concat"

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens.long()
        if tokens.shape[1] < self.length and not self.length_free:
            tokens = nn.functional.pad(tokens, (0, self.length - tokens.shape[1]))
        mask = tokens > 0
        ids = torch.where(mask, tokens - ID_OFFSET, self.pad_id)
        kwargs = {"attention_mask": mask.long()} if self.takes_mask else {}
        outputs = self.transformer(input_ids=ids, **kwargs)
        if self.pooled:
            return outputs.pooler_output
        hidden = outputs.last_hidden_state
        if self.reducer is None:
            return hidden * mask.unsqueeze(-1)
        return self.reducer(hidden, mask)

    def train(self, mode: bool = True) -> HFTextEncoder:
        super().train(mode)
        if not self.trainable:
            self.transformer.eval()  # a frozen model's dropout stays off
        return self


def build_hf_encoder(config, metadata: dict, load_pretrained: bool = True, name: str = "") -> HFTextEncoder:
    """The encoder of a text feature: its model built from the metadata's config, with the
    pretrained weights read where ``load_pretrained`` and use_pretrained say so."""
    transformers = import_transformers()
    if MODEL_CONFIG not in metadata:
        raise ModelError(f"input feature {name!r}: the {config.type} encoder's metadata has no model config; the text was "
                         f"preprocessed for another encoder. Preprocess it again (a new cache_dir, or skip_cache)")
    hf_config = transformers_config(transformers, metadata[MODEL_CONFIG], "encoder")
    model_class = _model_class(transformers, config, hf_config)
    if config.use_pretrained and load_pretrained:
        setting = f"input feature {name!r} encoder.pretrained_model_name_or_path"
        folder = model_folder(config.pretrained_model_name_or_path, setting)
        check_weights(folder, setting)
        transformer = model_class.from_pretrained(str(folder), config=hf_config, local_files_only=True,
                                                  use_safetensors=True, dtype=torch.float32,
                                                  **(config.pretrained_kwargs or {}))
    else:
        transformer = model_class.from_config(hf_config) if model_class is transformers.AutoModel else \
            model_class(hf_config)
    _check_pooler(transformer, config, name)
    if config.reduce_output != "cls_pooled" and getattr(transformer, "pooler", None) is not None:
        transformer.pooler = None  # unused: it would get no gradients, which DDP refuses
    if config.adapter is not None:  # built the same way for training and for a saved model's skeleton
        peft = import_peft()
        transformer = peft.get_peft_model(transformer, config.adapter.peft_config(peft, "FEATURE_EXTRACTION"))
    return HFTextEncoder(transformer, config, metadata["sequence_length"])


EMBEDDING_BATCH_ROWS = 64
"""Rows per forward pass when embeddings are computed at preprocessing."""


def output_width(config, metadata: dict) -> int:
    """The width of the encoder's output (not a sequence), from its model config."""
    hidden = transformers_config(import_transformers(), metadata[MODEL_CONFIG], "encoder").hidden_size
    return hidden * metadata["sequence_length"] if config.reduce_output == "concat" else hidden


def embed_tokens(config, metadata: dict, tokens: pa.ListArray, name: str) -> pa.FixedSizeListArray:
    """The frozen encoder's output for each row of stored ids (cache_encoder_embeddings), in
    batches, without gradients."""
    encoder = _frozen_encoder(type(config), config.model_dump_json(), json.dumps(
        {MODEL_CONFIG: metadata[MODEL_CONFIG], "sequence_length": metadata["sequence_length"]}), name)
    tokens = tokens.combine_chunks() if isinstance(tokens, pa.ChunkedArray) else tokens
    lengths = pc.list_value_length(tokens).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(tokens).to_numpy().astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    outputs = []
    with torch.inference_mode():
        for first in range(0, len(lengths), EMBEDDING_BATCH_ROWS):
            rows = slice(first, first + EMBEDDING_BATCH_ROWS)
            batch = pad(flat[starts[first]:starts[min(first + EMBEDDING_BATCH_ROWS, len(lengths))]], lengths[rows],
                        max(1, int(lengths[rows].max(initial=1))), 0, False, np.int64)
            outputs.append(encoder(torch.from_numpy(batch)).float().numpy())
    matrix = np.concatenate(outputs) if outputs else np.zeros((0, encoder.output_size), np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), encoder.output_size)


@functools.lru_cache(maxsize=2)
def _frozen_encoder(config_class: type, config_json: str, metadata_json: str, name: str) -> HFTextEncoder:
    """The pretrained encoder, once per process and feature."""
    encoder = build_hf_encoder(config_class.model_validate_json(config_json), json.loads(metadata_json), True, name)
    return encoder.eval()


def _model_class(transformers, config, hf_config):
    """The model class: the named encoder's, or for auto_transformer the architecture's base
    model (for an encoder-decoder such as T5, its encoder)."""
    if config.type != "auto_transformer":
        return getattr(transformers, config.named.model_class)
    if getattr(hf_config, "is_encoder_decoder", False):
        encoder_class = transformers.AutoModel._model_mapping[type(hf_config)]
        name = encoder_class.__name__.replace("Model", "EncoderModel")
        if hasattr(transformers, name):
            return getattr(transformers, name)
    return transformers.AutoModel


def _check_pooler(transformer: nn.Module, config, name: str) -> None:
    if config.reduce_output == "cls_pooled" and getattr(transformer, "pooler", None) is None:
        raise ModelError(f"input feature {name!r} encoder.reduce_output: cls_pooled takes the model's pooler "
                         f"output, and {type(transformer).__name__} has no pooler; use sum, mean, max or last")
