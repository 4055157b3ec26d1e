"""Combiner settings (the ``combiner`` section), one class per combiner type.

Keys, types and defaults follow Ludwig 0.17's combiners, so a Ludwig config validates unchanged.
Where plait's default differs from Ludwig's, the field records Ludwig's under ``LUDWIG_DEFAULT``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from plait.config.base import LUDWIG_DEFAULT, StrictModel, field_error, ludwig_only, ludwig_types_not_implemented
from plait.config import text_encoders
from plait.config.base import shown
from plait.config.fully_connected import Activation, BiasInitializer, FCLayer, FCStackSection, Norm, WeightsInitializer
from plait.config.layers import check_heads, union

Reduction = Literal["sum", "mean", "avg", "max", "concat", "last", "attention", "attention_pooling", "none", "None"] | None


class CombinerSettings(StrictModel):
    """What every combiner section has: a check against the config's input features."""

    def input_features_problem(self, names: list[str]) -> tuple[str, str] | None:
        """(field, message) when the section does not fit the input feature names (in order)."""
        return None


class FCLayerSettings(CombinerSettings, FCStackSection):
    """The fully connected stack after a combiner (Ludwig's FCStack keys), but its activation and
    dropout, whose names differ between combiners. The section's norm and dropout also apply to
    the stack's input."""

    TAKES_GHOST_NORM = True

    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the combination (when fc_layers is not given)."""
    output_size: int = Field(256, gt=0)
    """Width of each fully connected layer."""
    fc_layers: list[FCLayer] | None = None
    """Each layer's settings, one entry per layer; replaces num_fc_layers. Keys left out take
    the values of the same name above."""
    use_bias: bool = True
    """Whether the fully connected layers add a bias."""
    weights_initializer: WeightsInitializer = "xavier_uniform"
    """Initializer of the weights: a name (xavier_uniform, kaiming_normal, ...) or
    ``{type: name, <argument>: value}``."""
    bias_initializer: BiasInitializer = "zeros"
    """Initializer of the biases: zeros, ones, constant, uniform or normal (a name, or {type: name,
    <argument>: value})."""
    norm: Norm = None
    """Normalization of the stack's input and of each layer: batch, layer, ghost (batch norm
    over virtual batches) or null."""
    norm_params: dict[str, Any] | None = None
    """Arguments of the norm (batch: eps, momentum; layer: eps; ghost: virtual_batch_size,
    momentum, epsilon)."""


class FCSettings(FCLayerSettings):
    activation: Activation = "relu"
    """Activation of each fully connected layer."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout of the stack's input and after each layer."""


class ConcatCombiner(FCSettings):
    """Concatenate every encoder output, then fully connected layers."""

    type: Literal["concat"] = "concat"
    num_fc_layers: int = Field(1, ge=0, json_schema_extra={LUDWIG_DEFAULT: 0})
    """Hidden layers after the concatenation. One suits small tabular data (there it matches
    logistic/ridge regression and gradient boosting); more can pay off on large data."""
    output_size: int = Field(128, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    dropout: float = Field(0.1, ge=0, lt=1, json_schema_extra={LUDWIG_DEFAULT: 0.0})
    norm: Norm = None
    """Normalization in each hidden layer; none by default: layer norm makes each row's hidden
    vector scale-free, which costs accuracy on regression."""
    flatten_inputs: bool = False
    """Flatten sequence outputs ([batch, length, width]) of encoders into vectors before the
    concatenation; without it such an output is refused (reduce it in its encoder instead)."""
    residual: bool = False
    """Add each layer's input to its output where their widths match."""
    batch_ensemble: Annotated[bool, ludwig_only(False, instead="train several models, or use num_fc_layers "
                                                "for more capacity")] = False
    num_ensemble_members: int = Field(4, gt=0)
    """Used only with batch_ensemble, which plait does not implement."""


class TransformerSettings(FCLayerSettings):
    """Ludwig's settings shared by the transformer-based combiners."""

    FC_NAMES = {**FCLayerSettings.FC_NAMES, "activation": "fc_activation", "dropout": "fc_dropout"}

    hidden_size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the tokens: each feature's encoding is projected to it."""
    num_layers: int = Field(2, gt=0, json_schema_extra={LUDWIG_DEFAULT: 1})
    num_heads: int = Field(4, gt=0, json_schema_extra={LUDWIG_DEFAULT: 8})
    """Attention heads; each attends over hidden_size / num_heads dimensions."""
    transformer_output_size: int = Field(128, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    """Width of the feed-forward layer inside each transformer block."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Dropout inside the transformer blocks."""
    num_fc_layers: int = Field(1, ge=0, json_schema_extra={LUDWIG_DEFAULT: 0})
    """Fully connected layers after the reduction (none when reduce_output is null)."""
    output_size: int = Field(128, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})
    fc_dropout: float = Field(0.1, ge=0, lt=1, json_schema_extra={LUDWIG_DEFAULT: 0.0})
    """Dropout of the fully connected layers after the reduction."""
    fc_activation: Activation = "relu"
    """Activation of the fully connected layers after the reduction."""
    fc_residual: bool = False
    """Residual connections in the fully connected layers where widths match."""

    @model_validator(mode="after")
    def _heads_divide_width(self):
        check_heads(self.hidden_size, "hidden_size", self.num_heads)
        return self


class TransformerCombiner(TransformerSettings):
    """Each feature's encoding becomes one token; a transformer mixes them (tabular transformer
    style); the tokens are pooled and passed through fully connected layers."""

    type: Literal["transformer"] = "transformer"
    reduce_output: Reduction = "mean"
    """How the feature tokens are pooled: mean, sum, max, concat, last, attention,
    attention_pooling, or null to pass the tokens on ([batch, features, hidden_size])."""


class FTTransformerCombiner(TransformerSettings):
    """FT-Transformer (Gorishniy et al., 2021): each feature's encoding becomes one token, a learned
    [CLS] token is put in front, and after the transformer the [CLS] token alone goes on to the fully
    connected layers. Ludwig 0.17 picks it when a config with three or more inputs names no
    combiner; plait's default stays concat."""

    type: Literal["ft_transformer"] = "ft_transformer"


class TabTransformerCombiner(TransformerSettings):
    """TabTransformer (Huang et al., 2020): the non-numeric features' encodings go through a
    transformer; number and binary encodings skip it (layer-normalized) and join at the end."""

    type: Literal["tabtransformer"] = "tabtransformer"
    embed_input_feature_name: Literal["add"] | Annotated[int, Field(gt=0)] | None = None
    """A learned embedding of each feature's identity: `add` adds one of hidden_size to its
    token; an integer N concatenates one of width N (the projection then gives hidden_size - N)."""
    reduce_output: Reduction = "concat"
    """How the transformer's tokens are pooled (as in the transformer combiner)."""

    @model_validator(mode="after")
    def _feature_embedding_fits(self):
        size = self.embed_input_feature_name
        if isinstance(size, int) and size >= self.hidden_size:
            raise field_error("embed_input_feature_name", f"got {size}; must be smaller than hidden_size "
                                                          f"({self.hidden_size}), or `add`")
        return self


class TabNetCombiner(CombinerSettings):
    """TabNet (Arik and Pfister, 2019): sequential attention chooses, at each decision step, a
    sparse subset of the inputs; a feature transformer processes it; the steps' outputs add up."""

    type: Literal["tabnet"] = "tabnet"
    size: int = Field(32, gt=0)
    """Width of the attention part of each step's output (N_a in the paper)."""
    output_size: int = Field(128, gt=0)
    """Width of the decision part of each step's output and of the result (N_d in the paper)."""
    num_steps: int = Field(3, ge=1)
    """Decision steps (N_steps in the paper)."""
    num_total_blocks: int = Field(4, ge=1)
    """Gated linear blocks in each step's feature transformer, shared ones included."""
    num_shared_blocks: int = Field(2, ge=0)
    """Of those, the first blocks whose linear layers all steps share."""
    relaxation_factor: float = Field(1.5, ge=1)
    """gamma in the paper: 1 lets each input be chosen in one step only; larger values allow reuse."""
    bn_epsilon: float = Field(1e-3, gt=0)
    bn_momentum: float = Field(0.05, gt=0, le=1)
    """Weight of the current batch in the running statistics (PyTorch's convention)."""
    bn_virtual_bs: int | None = Field(1024, gt=0)
    """Ghost batch normalization: statistics over virtual batches of this many rows (B_v in the
    paper); null: over the whole batch."""
    sparsity: float = Field(1e-4, ge=0)
    """Weight of the sparsity loss (the masks' mean entropy) in the training loss (lambda_sparse)."""
    entmax_mode: Literal["sparsemax", "entmax15", "constant", "adaptive"] = "sparsemax"
    """The attention's sparse normalization: sparsemax, entmax15 (alpha 1.5), or constant
    (entmax with alpha = entmax_alpha). adaptive is refused (see the error)."""
    entmax_alpha: float = Field(1.5, ge=1, le=2)
    """alpha of entmax with entmax_mode constant: 1 is softmax, 2 is sparsemax."""
    dropout: float = Field(0.05, ge=0, lt=1)
    """Dropout on TabNet's output."""

    @field_validator("entmax_mode")
    @classmethod
    def _adaptive_is_refused(cls, value: str) -> str:
        if value == "adaptive":
            raise ValueError("got 'adaptive'; plait does not learn alpha (Ludwig 0.17 keeps it fixed at its initial "
                             "value too): use entmax_mode: constant with entmax_alpha")
        return value

    @model_validator(mode="after")
    def _shared_within_total(self):
        if self.num_shared_blocks > self.num_total_blocks:
            raise field_error("num_shared_blocks", f"got {self.num_shared_blocks}; at most num_total_blocks "
                                                   f"({self.num_total_blocks})")
        return self


class ComparatorCombiner(FCSettings):
    """Compares two entities, each a group of input features: each group is concatenated and
    passed through its own fully connected layers, then the two results are compared (product,
    dot product, absolute difference and a learned bilinear form)."""

    type: Literal["comparator"] = "comparator"
    entity_1: list[str] = Field(min_length=1)
    """The input feature names that make the first entity."""
    entity_2: list[str] = Field(min_length=1)
    """The input feature names that make the second entity."""
    num_fc_layers: int = Field(1, ge=0)

    @model_validator(mode="after")
    def _has_layers(self):
        if self.num_fc_layers == 0 and not self.fc_layers:
            raise field_error("num_fc_layers", "got 0; the comparator needs at least one fully connected layer: "
                                               "set num_fc_layers >= 1 or fc_layers")
        return self

    def input_features_problem(self, names: list[str]) -> tuple[str, str] | None:
        for entity in ("entity_1", "entity_2"):
            missing = [n for n in getattr(self, entity) if n not in names]
            if missing:
                return entity, f"{', '.join(missing)} is not an input feature; input features are: {', '.join(names)}"
        both = set(self.entity_1) & set(self.entity_2)
        if both:
            return "entity_2", f"{', '.join(sorted(both))} is in both entities; put each feature in one"
        unused = [n for n in names if n not in self.entity_1 and n not in self.entity_2]
        if unused:  # Ludwig refuses these too: the comparator has no place for them
            return "entity_1", f"input features {', '.join(unused)} are in neither entity; add each to one"
        return None


class ProjectAggregateCombiner(FCSettings):
    """Projects each encoder output to projection_size, averages the projections, then fully
    connected layers."""

    type: Literal["project_aggregate"] = "project_aggregate"
    projection_size: int = Field(128, gt=0)
    """Width every encoder output is projected to before the average."""
    residual: bool = True
    """Add each layer's input to its output where their widths match."""
    num_fc_layers: int = Field(2, ge=0)
    output_size: int = Field(128, gt=0)
    norm: Norm = "layer"


class SequenceSettings(CombinerSettings):
    main_sequence_feature: str | None = None
    """The input feature whose sequence output ([batch, length, width]) the others are joined
    to along the width; unset: the first input feature with a sequence output. Other sequence
    outputs must have the same length; vector outputs are repeated along the sequence."""
    reduce_output: Reduction = None
    """How the joined sequence is reduced (as in the transformer combiner); null: passed on as a
    sequence, which the output features reduce with their reduce_input."""

    def input_features_problem(self, names: list[str]) -> tuple[str, str] | None:
        if self.main_sequence_feature is not None and self.main_sequence_feature not in names:
            return "main_sequence_feature", (f"got {self.main_sequence_feature!r}, not an input feature; "
                                             f"input features are: {', '.join(names)}")
        return None


class SequenceConcatCombiner(SequenceSettings):
    """Joins every encoder output to the main sequence feature's output, position by position."""

    type: Literal["sequence_concat"] = "sequence_concat"


SEQUENCE_ENCODERS = ("rnn", "gru", "lstm", "parallel_cnn", "stacked_cnn", "stacked_parallel_cnn", "cnnrnn",
                     "transformer", "embed", "passthrough", "tcn", "mamba")


_RENDERED_ENCODER_FIELDS = {"skip": False, "adapter": None, "should_embed": True, "max_sequence_length": None,
                            "vocab": None, "vocab_size": None}
"""Fields Ludwig renders into every sequence encoder section that plait's encoder classes lack
(computed ones, and ones for pretrained models), at the values Ludwig renders."""


def _ludwig_encoder_defaults(encoder_class: type | None) -> dict[str, Any]:
    """Each setting of an encoder at Ludwig's default (recorded where plait's differs)."""
    fields = encoder_class.model_fields if encoder_class is not None else {}
    defaults = {name: (field.json_schema_extra or {}).get(LUDWIG_DEFAULT, field.get_default(call_default_factory=True))
                for name, field in fields.items() if name != "type"
                if isinstance(field.json_schema_extra or {}, dict)}
    return {**_RENDERED_ENCODER_FIELDS, **defaults}


class SequenceCombinerEncoder(StrictModel):
    """The encoder of the joined sequence. As in Ludwig, only its type is used (with that
    encoder's defaults)."""

    type: Literal["parallel_cnn", "rnn", "passthrough"] = "parallel_cnn"
    """parallel_cnn (convolutions of widths 2 to 5, 256 filters each), rnn (one LSTM layer of
    256) or passthrough."""

    @model_validator(mode="before")
    @classmethod
    def _only_ludwig_defaults(cls, data: Any) -> Any:
        """Ludwig renders this section with every setting of the encoder at its default (its docs
        do too). Those validate and are dropped: the encoder is built with exactly those defaults.
        Any other value would be ignored by Ludwig; plait refuses it rather than ignore it."""
        if not isinstance(data, dict) or data.get("type") not in _SEQUENCE_COMBINER_ENCODERS:
            return data
        defaults = _ludwig_encoder_defaults(_SEQUENCE_COMBINER_ENCODERS[data["type"]])
        for key, value in data.items():
            if key != "type" and key in defaults and value != defaults[key]:
                raise field_error(key, f"got {shown(value)}; Ludwig's sequence combiner builds its encoder from "
                                       f"`type` alone, with that encoder's defaults ({key}: {defaults[key]!r}), and "
                                       f"would ignore this value; plait refuses it rather than ignore it: remove it")
        return {key: value for key, value in data.items() if key not in defaults}

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        return (f"not a setting of this encoder; Ludwig's sequence combiner builds its encoder from `type` alone, "
                f"with that encoder's defaults: remove {key}")


class SequenceCombiner(SequenceSettings):
    """sequence_concat followed by a sequence encoder over the joined sequence."""

    type: Literal["sequence"] = "sequence"
    encoder: SequenceCombinerEncoder = Field(default_factory=SequenceCombinerEncoder)

    @field_validator("encoder", mode="before")
    @classmethod
    def _known_sequence_encoder(cls, value: Any) -> Any:
        kind = value.get("type") if isinstance(value, dict) else None
        if kind in SEQUENCE_ENCODERS and kind not in ("parallel_cnn", "rnn", "passthrough"):
            raise ValueError(f"Ludwig's {kind!r} encoder is not implemented for the sequence combiner in plait; "
                             "use parallel_cnn or rnn, or type: transformer as the combiner")
        return value


ludwig_types_not_implemented("combiner", {
    "cross_attention": "use type: transformer, whose self-attention lets every feature attend to the others",
    "perceiver": "use type: transformer",
    "gated_fusion": "use type: project_aggregate or concat",
    "hypernetwork": "use type: concat or transformer",
    "tabpfn_v2": "use type: tabnet or concat (plait runs no pretrained foundation models)",
})

_SEQUENCE_COMBINER_ENCODERS = {"parallel_cnn": text_encoders.ParallelCNNEncoder, "rnn": text_encoders.RNNEncoder,
                               "passthrough": None}

COMBINER_TYPES = (ConcatCombiner, TransformerCombiner, FTTransformerCombiner, TabNetCombiner, TabTransformerCombiner,
                  ComparatorCombiner, ProjectAggregateCombiner, SequenceConcatCombiner, SequenceCombiner)
CombinerConfig = union(*COMBINER_TYPES)
