"""Output decoder and loss settings, one class per type; each output feature type has a union of
the decoders and of the losses it takes (Ludwig 0.17's names, keys and defaults).

A decoder is a stack of fully connected layers (the ``fc_*`` keys, or ``fc_layers`` one layer at a
time) and then a projection to the output's logits (``use_bias``, ``weights_initializer``,
``bias_initializer``). plait's earlier spellings of the stack (``output_size``, ``activation``,
``dropout``, ``norm`` on a regressor or classifier) are still read, as the ``fc_*`` keys they
stand for, so that older plait configs and saved models load; the documented names are Ludwig's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from plait.config.base import (
    StrictModel,
    field_error,
    ludwig_only,
    ludwig_types_not_implemented,
    shown,
)
from plait.config.fully_connected import (LAYER_KEYS, Activation, BiasInitializer, FCLayer, FCStackSection,
                                          NoGhostNorm, WeightsInitializer)
from plait.config.layers import union

_GATED_ACTIVATIONS = ("swiglu", "geglu", "reglu", "sparsemax", "entmax15")
"""Ludwig's activations that plait's decoders do not implement."""

_OLD_FC_NAMES = {"output_size": "fc_output_size", "activation": "fc_activation", "dropout": "fc_dropout",
                 "norm": "fc_norm"}
"""plait's earlier names of a decoder's stack settings, read as the Ludwig names they stand for."""


class DecoderBase(FCStackSection):
    """The fully connected stack every decoder starts with, and the projection to the logits."""

    FC_NAMES = {**{key: f"fc_{key}" for key in LAYER_KEYS}, "num_fc_layers": "num_fc_layers"}

    fc_layers: list[FCLayer] | None = None
    """The stack layer by layer; when given, it sets the number of layers and ``num_fc_layers`` is not used."""
    num_fc_layers: int = Field(0, ge=0)
    """Number of fully connected layers before the projection (when ``fc_layers`` is not given)."""
    fc_output_size: int = Field(256, gt=0)
    """Width of each fully connected layer."""
    fc_use_bias: bool = True
    """Whether the fully connected layers add a bias."""
    fc_weights_initializer: WeightsInitializer = "xavier_uniform"
    """Initializer of the fully connected layers' weights: a name (xavier_uniform, kaiming_normal, normal, ...)
    or ``{type: name, <parameter>: value}``; null: torch's default for a linear layer."""
    fc_bias_initializer: BiasInitializer = "zeros"
    """Initializer of the fully connected layers' biases (zeros, ones, constant, uniform, normal); null:
    torch's default for a linear layer."""
    fc_norm: NoGhostNorm = None
    """Normalization after each layer's linear map: batch, layer, or null for none."""
    fc_norm_params: dict[str, Any] | None = None
    """Settings of that norm: batch takes eps, momentum, affine, track_running_stats; layer takes eps,
    elementwise_affine, bias."""
    fc_activation: Activation | None = "relu"
    """Activation after each fully connected layer (null: none)."""
    fc_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each fully connected layer (0: none)."""
    use_bias: bool = True
    """Whether the projection to the logits adds a bias."""
    weights_initializer: WeightsInitializer = "xavier_uniform"
    """Initializer of the projection's weights (Ludwig's default; measured as good as torch's:
    benchmarks/README.md); null: torch's default for a linear layer."""
    bias_initializer: BiasInitializer = "zeros"
    """Initializer of the projection's bias; null: torch's default for a linear layer."""

    @model_validator(mode="before")
    @classmethod
    def _read_old_names(cls, data: Any) -> Any:
        """Reads plait's earlier names of the stack settings as Ludwig's; both at once is ambiguous."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in _OLD_FC_NAMES.items():
            if old in data and old not in cls.model_fields:
                if new in data:
                    raise field_error(old, f"{old} is plait's earlier name of {new}, which is also set; keep only {new}")
                data[new] = data.pop(old)
        return data

    @field_validator("fc_activation", mode="before")
    @classmethod
    def _no_gated_activation(cls, value: Any) -> Any:
        if value in _GATED_ACTIVATIONS:
            raise ValueError(f"got {value!r}; plait's decoders do not implement Ludwig's {value}: use relu, gelu or silu")
        return value

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in ("multiplier", "clip"):
            return f"{key} is a setting of the projector decoder (vector outputs)"
        return None


class RegressorDecoder(DecoderBase):
    """One output (binary, number): the stack, then a linear map to one logit."""

    type: Literal["regressor"] = "regressor"


_CALIBRATION_ADVICE = ("Ludwig's classifier decoder reads this setting but applies no calibration; plait neither; "
                       "calibrate probabilities after training if you need them calibrated")


class ClassifierDecoder(DecoderBase):
    """One logit per class (category) or per item (set): the stack, then a linear map."""

    type: Literal["classifier"] = "classifier"
    calibration: Annotated[Literal["temperature_scaling"] | None, ludwig_only(None, instead=_CALIBRATION_ADVICE)] = None
    """Accepted for Ludwig compatibility: only null (no calibration)."""
    mc_dropout_samples: Annotated[int, ludwig_only(0, instead="plait predicts with one deterministic pass")] = Field(0, ge=0)
    """Accepted for Ludwig compatibility: only 0 (no Monte Carlo dropout at prediction)."""


class MLPClassifierDecoder(DecoderBase):
    """Ludwig's ``mlp_classifier`` (binary, category): the stack, then its own ``num_fc_layers``
    hidden layers of ``output_size`` (as Ludwig does, ``num_fc_layers`` sets both, and defaults to
    1 here), then a linear map to the logits."""

    type: Literal["mlp_classifier"] = "mlp_classifier"
    num_fc_layers: int = Field(1, ge=0)
    """Number of layers of the stack, and of hidden layers after it."""
    output_size: int = Field(256, gt=0)
    """Width of each hidden layer."""
    activation: Activation | None = "relu"
    """Activation after each hidden layer."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after each hidden layer."""
    calibration: Annotated[Literal["temperature_scaling"] | None, ludwig_only(None, instead=_CALIBRATION_ADVICE)] = None
    """Accepted for Ludwig compatibility: only null (no calibration)."""
    mc_dropout_samples: Annotated[int, ludwig_only(0, instead="plait predicts with one deterministic pass")] = Field(0, ge=0)
    """Accepted for Ludwig compatibility: only 0 (no Monte Carlo dropout at prediction)."""


class ProjectorDecoder(DecoderBase):
    """Vector and timeseries outputs: the stack, then a linear map to every value of the vector."""

    type: Literal["projector"] = "projector"
    output_size: int | None = Field(None, gt=0)
    """Computed by Ludwig from the data (the vector's length); plait reads it from the data too."""
    activation: Activation | None = None
    """Activation on the projection (null: none, the values as they are)."""
    multiplier: float = 1.0
    """The projection (after its activation) is multiplied by this."""
    clip: tuple[float, float] | None = None
    """``[low, high]``: the projection is clipped to this range. null: not clipped."""


class SequenceDecoderBase(DecoderBase):
    """What Ludwig's sequence decoders share: sizes Ludwig computes from the data, which plait reads
    from the data as well (accepted, not used)."""

    input_size: int = Field(256, gt=0)
    """Computed: the width of the combiner's output (accepted as Ludwig writes it)."""
    vocab_size: int | None = Field(None, gt=0)
    """Computed: the output's vocabulary size (accepted as Ludwig writes it)."""
    max_sequence_length: int | None = Field(None, gt=0)
    """Computed: the output's sequence length, from its preprocessing (accepted as Ludwig writes it)."""


class SequenceGeneratorDecoder(SequenceDecoderBase):
    """Autoregressive generation: the stack's output is the initial state of a recurrent decoder
    that reads the previous token (the true one in training, its own prediction otherwise) and
    predicts the next, until the stop token."""

    type: Literal["generator"] = "generator"
    cell_type: Literal["rnn", "lstm", "gru"] = "gru"
    """The recurrent cell."""
    num_layers: int = Field(1, gt=0)
    """Stacked recurrent layers."""
    reduce_input: Literal["sum", "mean", "avg", "max", "concat", "last"] = "sum"
    """Accepted as Ludwig writes it; the feature's own reduce_input is what plait reads."""
    teacher_forcing_decay: Annotated[str, ludwig_only("none", instead="plait trains on the true previous token at "
                                                                       "every step")] = "none"
    """Ludwig's schedule of feeding back the model's own tokens in training; plait accepts only none."""
    teacher_forcing_decay_rate: Annotated[float, ludwig_only(0.01, instead="teacher_forcing_decay is none")] = 0.01
    """Read by Ludwig's teacher_forcing_decay only; accepted at its default."""
    beam_length_penalty: Annotated[float, ludwig_only(1.0, instead="beam search ranks sequences by their "
                                                                   "probability")] = 1.0
    """Ludwig's length normalization of beam scores; plait accepts only 1.0."""
    beam_width: int = Field(1, gt=0)
    """Predictions and evaluations keep this many candidate sequences at each step and return the
    likeliest (beam search); 1: the likeliest token at each step (greedy). Training reads the true
    previous tokens either way."""


class SequenceTaggerDecoder(SequenceDecoderBase):
    """One label per input step: the combiner's output must be a sequence (a sequence or text input
    with ``reduce_output: null``, through the sequence_concat or sequence combiner)."""

    type: Literal["tagger"] = "tagger"
    use_attention: bool = False
    """A multi-head self-attention layer over the steps before the labels."""
    attention_embedding_size: int = Field(256, gt=0)
    """Width of that attention layer."""
    attention_num_heads: int = Field(8, gt=0)
    """Its heads; attention_embedding_size must be a multiple of it."""

    @model_validator(mode="after")
    def _heads_divide_width(self):
        if self.use_attention and self.attention_embedding_size % self.attention_num_heads:
            raise field_error("attention_num_heads", f"got {self.attention_num_heads}, which does not divide "
                                                     f"attention_embedding_size {self.attention_embedding_size}")
        return self


BinaryDecoder = union(RegressorDecoder, MLPClassifierDecoder)
CategoryDecoder = union(ClassifierDecoder, MLPClassifierDecoder)
NumberDecoder = union(RegressorDecoder)
SetDecoder = union(ClassifierDecoder)
VectorDecoder = union(ProjectorDecoder)
SequenceDecoder = union(SequenceGeneratorDecoder, SequenceTaggerDecoder)
CategoryDistributionDecoder = union(ClassifierDecoder)

DEFAULT_DECODER = {"binary": "regressor", "number": "regressor", "category": "classifier", "set": "classifier",
                   "vector": "projector", "sequence": "generator", "text": "generator",
                   "category_distribution": "classifier", "timeseries": "projector", "image": "unet"}

ludwig_types_not_implemented("decoder", {
    "passthrough": "use regressor (binary, number), classifier (category, set) or projector (vector)",
    "fpn": "the feature pyramid decoder of image outputs is not implemented; use unet (with the unet encoder, as "
           "Ludwig's segmentation example does)",
})

# ---- losses ------------------------------------------------------------------------------------


def _non_negative_weights(weights):
    values = weights.values() if isinstance(weights, dict) else weights or []
    if any(w < 0 for w in values):
        raise ValueError(f"got {shown(weights)}; class weights must be 0 or more (0 ignores a class)")
    return weights


ClassWeights = Annotated[list[float] | dict[str, float] | None, AfterValidator(_non_negative_weights)]


class LossBase(StrictModel):
    weight: float = Field(1.0, ge=0)
    """This output's weight in the total loss."""


class RobustLossBase(LossBase):
    robust_lambda: float = Field(0.0, ge=0, le=1)
    """For noisy labels: each row's loss becomes ``(1 - robust_lambda) * loss + robust_lambda / c``, c the
    number of classes (2 for binary). 0: off."""
    confidence_penalty: float = Field(0.0, ge=0)
    """Against overconfidence: adds ``confidence_penalty * (log c - H(p)) / log c`` per row, H the entropy
    of the row's predicted distribution. 0: off."""


class BinaryCrossEntropyLoss(RobustLossBase):
    type: Literal["binary_weighted_cross_entropy"] = "binary_weighted_cross_entropy"
    positive_class_weight: float | None = Field(None, gt=0)
    """Weight of the positive class's term (for imbalanced data); null: 1."""


class SoftmaxCrossEntropyLoss(RobustLossBase):
    type: Literal["softmax_cross_entropy"] = "softmax_cross_entropy"
    class_weights: ClassWeights = None
    """Per-class weights, as a list in vocabulary order or a mapping from label to weight (missing labels: 1).
    A row's loss counts with its label's weight."""
    class_similarities: list[list[float]] | None = None
    """A c x c matrix (vocabulary order) of how similar the classes are. With
    ``class_similarities_temperature`` above 0, a row of class i is trained towards the softmax of row i of
    this matrix divided by the temperature, rather than towards class i alone."""
    class_similarities_temperature: float = Field(0.0, ge=0)
    """Temperature of that softmax; 0: class_similarities are not used."""

    @model_validator(mode="after")
    def _similarities_are_square(self):
        rows = self.class_similarities
        if rows is not None and any(len(row) != len(rows) for row in rows):
            raise field_error("class_similarities", f"got rows of {sorted({len(r) for r in rows})} values for "
                                                    f"{len(rows)} rows; give a square matrix, one row and column per class")
        if self.class_similarities_temperature > 0 and rows is None:
            raise field_error("class_similarities_temperature", f"got {self.class_similarities_temperature}, but "
                                                                 f"class_similarities is not set; set it or use 0")
        return self


class FocalLoss(LossBase):
    """Cross-entropy scaled by ``(1 - p_t) ** gamma``, p_t the probability of the true class."""

    type: Literal["focal"] = "focal"
    alpha: float = Field(0.25, ge=0, le=1)
    """Binary outputs: the positive rows' weight (negatives weigh ``1 - alpha``). Category outputs do not use it, as in Ludwig."""
    gamma: float = Field(2.0, ge=0)
    """How much easy rows are discounted; 0: plain cross-entropy."""


class PolyLoss(LossBase):
    """Cross-entropy plus ``epsilon * (1 - p_t)``, p_t the probability of the true class."""

    type: Literal["poly"] = "poly"
    epsilon: float = Field(1.0, ge=0)
    """Weight of the polynomial term; 0: plain cross-entropy."""


class MeanSquaredErrorLoss(LossBase):
    type: Literal["mean_squared_error"] = "mean_squared_error"


class MeanAbsoluteErrorLoss(LossBase):
    type: Literal["mean_absolute_error"] = "mean_absolute_error"


class MeanAbsolutePercentageErrorLoss(LossBase):
    """Mean of ``|y - prediction| / |y|``, in the data's units."""

    type: Literal["mean_absolute_percentage_error"] = "mean_absolute_percentage_error"


class RootMeanSquaredErrorLoss(LossBase):
    """Square root of the mean squared error (of the batch; of the whole data in the reported loss)."""

    type: Literal["root_mean_squared_error"] = "root_mean_squared_error"


class RootMeanSquaredPercentageErrorLoss(LossBase):
    """Square root of the mean of ``((y - prediction) / y) ** 2``, in the data's units."""

    type: Literal["root_mean_squared_percentage_error"] = "root_mean_squared_percentage_error"


class HuberLoss(LossBase):
    type: Literal["huber"] = "huber"
    delta: float = Field(1.0, gt=0)
    """Huber's threshold between the squared and the absolute part."""


class SigmoidCrossEntropyLoss(LossBase):
    type: Literal["sigmoid_cross_entropy"] = "sigmoid_cross_entropy"
    class_weights: ClassWeights = None
    """Per-item weights of each item's positive term, as a list in vocabulary order or a mapping from
    item to weight (missing items: 1)."""


class SequenceSoftmaxCrossEntropyLoss(LossBase):
    """Cross-entropy of each target token (the stop token included, padding left out), averaged
    over the tokens of the batch."""

    type: Literal["sequence_softmax_cross_entropy"] = "sequence_softmax_cross_entropy"
    class_weights: Annotated[ClassWeights, ludwig_only(None, instead="tokens all weigh 1")] = None
    """Ludwig's per-token weights; plait accepts only null."""
    robust_lambda: Annotated[float, ludwig_only(0.0, instead="no robust loss for sequences")] = 0.0
    """Accepted as Ludwig writes it: only 0."""
    confidence_penalty: Annotated[float, ludwig_only(0.0, instead="no confidence penalty for sequences")] = 0.0
    """Accepted as Ludwig writes it: only 0."""
    class_similarities: Annotated[list | None, ludwig_only(None, instead="tokens are not smoothed")] = None
    """Accepted as Ludwig writes it: only null."""
    class_similarities_temperature: Annotated[float, ludwig_only(0.0, instead="tokens are not smoothed")] = 0.0
    """Accepted as Ludwig writes it: only 0."""
    unique: Annotated[bool, ludwig_only(False, instead="every target token counts")] = False
    """Ludwig's sampled-loss setting; plait accepts only false."""


BinaryLoss = union(BinaryCrossEntropyLoss, FocalLoss)
CategoryLoss = union(SoftmaxCrossEntropyLoss, FocalLoss, PolyLoss)
NumberLoss = union(MeanSquaredErrorLoss, MeanAbsoluteErrorLoss, MeanAbsolutePercentageErrorLoss,
                   RootMeanSquaredErrorLoss, RootMeanSquaredPercentageErrorLoss, HuberLoss)
SetLoss = union(SigmoidCrossEntropyLoss)
VectorLoss = union(MeanSquaredErrorLoss, MeanAbsoluteErrorLoss, HuberLoss)
SequenceLoss = union(SequenceSoftmaxCrossEntropyLoss)
CategoryDistributionLoss = union(SoftmaxCrossEntropyLoss)
ImageLoss = union(SoftmaxCrossEntropyLoss)

DEFAULT_LOSS = {"binary": "binary_weighted_cross_entropy", "category": "softmax_cross_entropy",
                "number": "mean_squared_error", "set": "sigmoid_cross_entropy", "vector": "mean_squared_error",
                "sequence": "sequence_softmax_cross_entropy", "text": "sequence_softmax_cross_entropy",
                "category_distribution": "softmax_cross_entropy", "timeseries": "mean_squared_error",
                "image": "softmax_cross_entropy"}

ludwig_types_not_implemented("loss", {
    "sampled_softmax_cross_entropy": "plait computes the full softmax over the vocabulary; use "
                                     "sequence_softmax_cross_entropy",
    "corn": "plait does not implement ordinal (CORN) outputs; use softmax_cross_entropy",
    "sparsemax": "plait's category outputs predict with a softmax; use softmax_cross_entropy",
    "entmax15": "plait's category outputs predict with a softmax; use softmax_cross_entropy",
    "entropic_open_set": "plait does not implement open-set losses; use softmax_cross_entropy (category) or "
                         "binary_weighted_cross_entropy (binary)",
    "objectosphere": "plait does not implement open-set losses; use softmax_cross_entropy (category) or "
                     "binary_weighted_cross_entropy (binary)",
})
