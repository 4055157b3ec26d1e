"""Settings several encoders share: fully connected layers after an encoder, embeddings,
initializers and activations, as Ludwig 0.17 names them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from plait.config.base import StrictModel, field_error, ludwig_only, shown
from plait.config.fully_connected import (INITIALIZER_PARAMETERS, Activation, BiasInitializer, FCLayer, FCStackSection,
                                          NoGhostNorm)

ENCODER_FIELDS: dict[str, set[str]] = {}
"""Each encoder's settings by its name ("rnn"; "category dense" where feature types share a
name), to say whose a misplaced key is; filled by plait.config.encoders."""

INITIALIZERS = (*INITIALIZER_PARAMETERS, "dirac")
"""Ludwig's initializer names (torch.nn.init's functions): a linear layer's, and dirac for a
convolution's weights."""


def _check_initializer(value: Any) -> Any:
    name = value.get("type") if isinstance(value, dict) else value
    if name not in INITIALIZERS:
        raise ValueError(f"got {shown(value)}; an initializer is one of {', '.join(INITIALIZERS)}, or a mapping "
                         f"{{type: <one of those>, <its torch.nn.init arguments>}}")
    return value


Initializer = Annotated[str | dict, AfterValidator(_check_initializer)]

EncoderActivation = Activation | None
"""An activation of an encoder's layers (None: no activation)."""

EMBEDDINGS_ON_CPU = ludwig_only(False, instead="plait keeps every weight on the training device; a large "
                                               "vocabulary fits with a smaller embedding_size")


def without_null_adapter(encoder: Any, takes_adapter: bool = False) -> Any:
    """Every Ludwig encoder has ``adapter`` (peft fine-tuning of pretrained encoders), and a config
    Ludwig rendered writes ``adapter: null``: that is dropped; an adapter on an encoder that does
    not take one (``takes_adapter``: the pretrained Hugging Face encoders do) is refused."""
    if not isinstance(encoder, dict) or "adapter" not in encoder or takes_adapter:
        return encoder
    if encoder["adapter"] is not None:
        raise field_error("adapter", f"got {shown(encoder['adapter'])}; an adapter fine-tunes a pretrained Hugging "
                                     f"Face encoder (auto_transformer, bert, roberta, ...), and the "
                                     f"{encoder.get('type')} encoder has no pretrained model to adapt: remove it, or "
                                     f"use one of those encoders with trainable: true")
    return {k: v for k, v in encoder.items() if k != "adapter"}


class EncoderBase(StrictModel):
    """What every Ludwig encoder accepts."""

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        owners = sorted(name for name, fields in ENCODER_FIELDS.items() if key in fields)
        if owners:
            kind = cls.model_fields["type"].default
            return (f"a setting of the {', '.join(owners)} encoder{'s' if len(owners) > 1 else ''}, not of the "
                    f"{kind} encoder")
        return None


class FCSettings(FCStackSection):
    """Fully connected layers after an encoder (Ludwig's FCStack): each layer is linear, norm,
    activation, dropout; a layer of ``fc_layers`` overrides the defaults set here."""

    fc_layers: list[FCLayer] | None = None
    """Per-layer settings; when given, its length is the number of layers."""
    output_size: int = Field(256, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    use_bias: bool = True
    """Whether the linear layers add a bias."""
    weights_initializer: Initializer = "xavier_uniform"
    """Initializer of the weights (a name, or {type: name, ...arguments})."""
    bias_initializer: BiasInitializer = "zeros"
    """Initializer of the biases: zeros, ones, constant, uniform or normal (a name, or {type: name,
    ...arguments})."""
    norm: NoGhostNorm = None
    """Normalization after each linear layer: batch, layer or null."""
    norm_params: dict | None = None
    """Keyword arguments of the norm (torch's BatchNorm1d or LayerNorm), e.g. {eps: 0.001}."""
    activation: EncoderActivation = "relu"
    """Activation after each layer (null: none)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each layer."""


class EmbeddingSettings(StrictModel):
    """A learned (or fixed) vector per vocabulary entry."""

    representation: Literal["dense", "sparse"] = "dense"
    """dense: learned vectors; sparse: fixed one-hot vectors (the width is the vocabulary size)."""
    embedding_size: int = Field(256, gt=0)
    """Width of a dense embedding (Ludwig caps it at the vocabulary size; plait does not)."""
    embeddings_trainable: bool = True
    """False: dense embeddings keep their initial (or pretrained) values (sparse ones always do)."""
    pretrained_embeddings: str | None = None
    """A GloVe-format text file (a word and its vector per line) to start dense embeddings from;
    its width replaces embedding_size, and words it lacks start random."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the embedding matrix in CPU memory; plait accepts only false."""
