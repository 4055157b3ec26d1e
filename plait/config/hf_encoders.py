"""Text encoder settings for pretrained Hugging Face models (Ludwig 0.17's ``auto_transformer`` and
its named ones: ``bert``, ``distilbert``, ``roberta``, ...).

Each encoder is one ``transformers`` model. The text reaching it is tokenized by the model's own
tokenizer (the feature's ``preprocessing.tokenizer`` becomes ``hf_tokenizer``, reading the same
``pretrained_model_name_or_path``, as in Ludwig). Weights and tokenizers are read from a local
folder or the local Hugging Face cache, never downloaded.

Ludwig writes a named encoder's architecture (``hidden_size``, ``num_hidden_layers``, ...) beside
its other settings; it only matters with ``use_pretrained: false``, where it builds the model.
plait gathers those keys into ``architecture``, passed to the model's config class.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model, field_validator, model_validator

from plait.config.adapters import AdapterSection
from plait.config.base import field_error
from plait.config.encoder_settings import EncoderBase
from plait.config.text_encoders import _reduction

HFReduction = Literal["cls_pooled", "sum", "mean", "avg", "max", "concat", "last", "attention"] | None


class HFNamedModel:
    """What plait needs to know of one of Ludwig's named encoders."""

    def __init__(self, default_path: str | None, reduce_output: str, model_class: str, model_type: str | None = None,
                 architecture: str = ""):
        self.default_path = default_path
        self.reduce_output = reduce_output
        self.model_class = model_class
        """The ``transformers`` class of the encoder."""
        self.model_type = model_type
        """transformers' name of the architecture (a config's model_type)."""
        self.architecture = frozenset(architecture.split())
        """Ludwig's architecture keys of this encoder."""


_BERT_LIKE = ("hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act hidden_dropout_prob "
              "attention_probs_dropout_prob max_position_embeddings type_vocab_size initializer_range layer_norm_eps "
              "pad_token_id gradient_checkpointing position_embedding_type classifier_dropout")
_T5_LIKE = ("d_model d_kv d_ff num_layers num_decoder_layers num_heads relative_attention_num_buckets dropout_rate "
            "layer_norm_eps layer_norm_epsilon initializer_factor feed_forward_proj is_encoder_decoder use_cache "
            "tokenizer_class tie_word_embeddings pad_token_id eos_token_id decoder_start_token_id")
_GPT_LIKE = ("n_positions n_ctx n_embd n_layer n_head n_inner afn activation_function resid_pdrop embd_pdrop attn_pdrop "
             "layer_norm_epsilon initializer_range scale_attn_weights")

NAMED_MODELS: dict[str, HFNamedModel] = {
    "auto_transformer": HFNamedModel(None, "sum", "AutoModel"),
    "albert": HFNamedModel("albert-base-v2", "cls_pooled", "AlbertModel", "albert",
                           _BERT_LIKE + " embedding_size num_hidden_groups inner_group_num classifier_dropout_prob "
                                        "bos_token_id eos_token_id"),
    "bert": HFNamedModel("bert-base-uncased", "cls_pooled", "BertModel", "bert", _BERT_LIKE),
    "camembert": HFNamedModel("camembert-base", "sum", "CamembertModel", "camembert", _BERT_LIKE),
    "deberta": HFNamedModel("tasksource/deberta-base-long-nli", "sum", "DebertaV2Model", "deberta-v2",
                            "vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
                            "hidden_dropout_prob attention_probs_dropout_prob max_position_embeddings type_vocab_size "
                            "initializer_range layer_norm_eps relative_attention max_relative_positions "
                            "pad_token_id position_biased_input pos_att_type pooler_hidden_size pooler_dropout "
                            "pooler_hidden_act position_buckets share_att_key norm_rel_ebd"),
    "distilbert": HFNamedModel("distilbert-base-uncased", "sum", "DistilBertModel", "distilbert",
                               "dropout max_position_embeddings sinusoidal_pos_embds n_layers n_heads dim hidden_dim "
                               "attention_dropout activation initializer_range qa_dropout seq_classif_dropout"),
    "electra": HFNamedModel("google/electra-small-discriminator", "sum", "ElectraModel", "electra",
                            _BERT_LIKE + " embedding_size"),
    "gpt": HFNamedModel("openai-gpt", "sum", "OpenAIGPTModel", "openai-gpt", _GPT_LIKE),
    "gpt2": HFNamedModel("gpt2", "sum", "GPT2Model", "gpt2", _GPT_LIKE),
    "longformer": HFNamedModel("allenai/longformer-base-4096", "cls_pooled", "LongformerModel", "longformer",
                               "attention_window sep_token_id max_position_embeddings type_vocab_size"),
    "modernbert": HFNamedModel("answerdotai/ModernBERT-base", "cls_pooled", "ModernBertModel", "modernbert",
                               "hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
                               "hidden_dropout_prob max_position_embeddings initializer_range layer_norm_eps "
                               "pad_token_id"),
    "roberta": HFNamedModel("roberta-base", "cls_pooled", "RobertaModel", "roberta",
                            "pad_token_id bos_token_id eos_token_id"),
    "t5": HFNamedModel("t5-small", "sum", "T5EncoderModel", "t5", _T5_LIKE),
    "xlmroberta": HFNamedModel("xlm-roberta-base", "cls_pooled", "XLMRobertaModel", "xlm-roberta",
                               "pad_token_id bos_token_id eos_token_id max_position_embeddings type_vocab_size "
                               "add_pooling_layer"),
    "xlnet": HFNamedModel("xlnet-base-cased", "sum", "XLNetModel", "xlnet",
                          "d_model n_layer n_head d_inner ff_activation untie_r attn_type initializer_range "
                          "layer_norm_eps dropout mem_len reuse_len use_mems_eval use_mems_train bi_data clamp_len "
                          "same_length summary_type summary_use_proj summary_activation summary_last_dropout "
                          "start_n_top end_n_top pad_token_id bos_token_id eos_token_id"),
}
"""Ludwig's Hugging Face text encoders: the model each loads by default, its reduce_output, the
``transformers`` class plait builds, and the architecture keys Ludwig lists for it."""


class HFEncoderBase(EncoderBase):
    """What every Hugging Face text encoder accepts."""

    is_hf_model: ClassVar[bool] = True
    """Read by plait.utils.hf_models.is_hf_encoder, which needs no config import."""

    pretrained_model_name_or_path: str | None = None
    """A folder holding the model (config.json, safetensors weights, the tokenizer), or a Hugging
    Face hub name (bert-base-uncased) found in the local cache ($HF_HUB_CACHE, else
    $HF_HOME/hub, else ~/.cache/huggingface/hub). plait never downloads: a name missing from the
    cache fails with how to make it available offline."""
    use_pretrained: bool = True
    """Start from the model's pretrained weights. false: the same architecture with random weights
    (the named encoders take it from ``architecture``); the tokenizer is still the model's."""
    trainable: bool = False
    """Fine-tune the model's weights. false (Ludwig's default): the model is frozen (no gradients)
    and stays in eval mode, so dropout is off in it."""
    reduce_output: HFReduction = "sum"
    """How the token vectors become one: cls_pooled (the model's pooler output, for BERT-like
    models that have a pooler), sum, mean (avg), max, concat, last, attention, or null (the
    sequence, for the sequence combiners). Padding is left out; the tokenizer's special tokens
    ([CLS], [SEP], ...) are kept."""
    pretrained_kwargs: dict[str, Any] | None = None
    """More arguments of ``from_pretrained`` (revision, attn_implementation, ...). Code from the
    model folder is never run: trust_remote_code is refused."""
    max_sequence_length: int | None = Field(None, gt=0)
    """Set by Ludwig from the preprocessing; plait reads ``preprocessing.max_sequence_length``
    and accepts this with no effect."""
    vocab_size: int | None = Field(None, gt=0)
    """Set by Ludwig from the preprocessing; accepted with no effect (the vocabulary is the
    tokenizer's)."""
    vocab: list | None = None
    """Set by Ludwig from the preprocessing; accepted with no effect."""
    saved_weights_in_checkpoint: bool = False
    """Accepted with no effect: a saved plait model always holds the encoder's weights, and loading
    it never reads the pretrained folder again."""
    adapter: AdapterSection = None
    """A peft adapter (the same section as an LLM's: lora, ia3, loha, lokr, vera, tinylora): the
    model's own weights stay frozen and the adapter's few weights train. Needs trainable: true (as
    in Ludwig, which otherwise freezes the adapter with the model). The saved model holds the model
    and its adapter, so it predicts without the pretrained folder."""

    @model_validator(mode="after")
    def _adapter_trains(self):
        if self.adapter is None:
            return self
        if not self.trainable:
            raise field_error("trainable", "an adapter trains only in a trainable encoder (Ludwig freezes the whole "
                                           "encoder, adapter included, when trainable is false): set trainable: true")
        if self.adapter.postprocessor.merge_adapter_into_base_model:
            raise field_error("adapter.postprocessor.merge_adapter_into_base_model",
                              "an ECD model saves its encoder whole, adapter included, so there is nothing to merge "
                              "(the setting is an LLM's): remove it")
        return self

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        architecture = NAMED_MODELS[cls.model_fields["type"].default].architecture
        close = difflib.get_close_matches(key, sorted(architecture), n=1, cutoff=0.8)
        if close:
            return f"did you mean {close[0]}? (an architecture key of this encoder)"
        return super().unknown_field_reason(key)

    @field_validator("reduce_output", mode="before")
    @classmethod
    def _reduce_output_spelling(cls, value: Any) -> Any:
        return _reduction(value)

    @field_validator("pretrained_kwargs")
    @classmethod
    def _no_remote_code(cls, value: dict | None) -> dict | None:
        if value and value.get("trust_remote_code"):
            raise ValueError("trust_remote_code runs Python code from the model folder, which plait never does: "
                             "remove it, and use a model that transformers implements")
        return value

    @model_validator(mode="after")
    def _model_named(self):
        if self.pretrained_model_name_or_path is None:
            raise field_error("pretrained_model_name_or_path", f"the {self.type} encoder needs the model: a folder "
                              f"or a Hugging Face hub name in the local cache")
        return self

    @property
    def named(self) -> HFNamedModel:
        return NAMED_MODELS[self.type]

    @property
    def caches_embeddings(self) -> bool:
        """Whether the encoder's output can be computed once, at preprocessing: it never changes
        in training (Ludwig's rule, plus a reduction that keeps the sequence is not cached)."""
        return not self.trainable and self.reduce_output not in ("attention", None)


def _gather_architecture(known: frozenset[str]):
    """A before-validator moving Ludwig's architecture keys into ``architecture``."""

    def gather(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        keys = [key for key in data if key in known]
        if not keys:
            return data
        architecture = dict(data.get("architecture") or {})
        architecture.update({key: data[key] for key in keys})
        return {**{k: v for k, v in data.items() if k not in known}, "architecture": architecture}

    return classmethod(gather)


class _NamedEncoderBase(HFEncoderBase):
    """The base of the classes below, made by create_model: their fields carry their descriptions."""


def _encoder_class(name: str, spec: HFNamedModel) -> type[HFEncoderBase]:
    fields: dict[str, Any] = {"type": (Literal[name], name)}
    base = HFEncoderBase.model_fields
    if spec.default_path is not None:
        fields["pretrained_model_name_or_path"] = (
            str | None, Field(spec.default_path, description=base["pretrained_model_name_or_path"].description))
    if spec.reduce_output != "sum":
        fields["reduce_output"] = (HFReduction, Field(spec.reduce_output,
                                                      description=base["reduce_output"].description))
    if spec.architecture:
        fields["architecture"] = (dict[str, Any], Field(
            default_factory=dict, description=f"Arguments of the model's config class, used with use_pretrained: "
            f"false. Ludwig writes them beside the other settings ({', '.join(sorted(spec.architecture)[:4])}, "
            f"...): plait gathers them here."))
    validators = {"_architecture": model_validator(mode="before")(_gather_architecture(spec.architecture))}
    cls = create_model(f"HF{name.title().replace('_', '')}Encoder", __base__=_NamedEncoderBase, __module__=__name__,
                       __validators__=validators if spec.architecture else None, **fields)
    what = "Any Hugging Face model" if name == "auto_transformer" else f"Ludwig's {name} encoder"
    cls.__doc__ = (f"{what} (transformers' {spec.model_class})"
                   + (f", by default {spec.default_path}." if spec.default_path else "."))
    return cls


HF_ENCODER_CLASSES = [_encoder_class(name, spec) for name, spec in NAMED_MODELS.items()]
HF_ENCODER_TYPES = frozenset(NAMED_MODELS)


def is_hf_encoder(encoder: Any) -> bool:
    return isinstance(encoder, HFEncoderBase)


