"""Input and output feature declarations, one class per feature type.

A feature names a column (``column``, default: its ``name``), how that column is preprocessed,
and how the model encodes it (inputs) or predicts it (outputs).
"""

from __future__ import annotations

from collections import deque
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from plait.config import decoders as d
from plait.config import encoders as e
from plait.config import preprocessing as p
from plait.config.augmentation import AugmentationOp, augmentation_list
from plait.config.image_encoders import UNetDecoder
from plait.config.layers import union
from plait.config.base import StrictModel, field_error, ludwig_only, ludwig_types_not_implemented, shown, suggest
from plait.config.encoder_settings import without_null_adapter
from plait.config.hf_encoders import NAMED_MODELS, is_hf_encoder

INPUT_TYPES = ("binary", "number", "category", "text", "set", "vector", "sequence", "date", "h3", "bag",
               "timeseries", "audio", "image")
OUTPUT_TYPES = ("binary", "category", "number", "set", "vector", "sequence", "text", "category_distribution",
                "timeseries", "image")


def _typed(value, default_type: str):
    """Accept ``encoder: dense`` and ``encoder: {...}`` without a type, as Ludwig does."""
    if value is None:
        return {"type": default_type}
    if isinstance(value, str):
        return {"type": value}
    if isinstance(value, dict) and "type" not in value:
        return {"type": default_type, **value}
    return value


class FeatureBase(StrictModel):
    name: str = Field(min_length=1)
    """The feature's name, used in outputs and metrics."""
    column: str | None = None
    """The dataset column to read; defaults to ``name``."""

    @model_validator(mode="before")
    @classmethod
    def _column_defaults_to_name(cls, data):
        if isinstance(data, dict) and data.get("column") is None and isinstance(data.get("name"), str):
            return {**data, "column": data["name"]}
        return data

    @property
    def source_column(self) -> str:
        return self.column or self.name


OUTPUT_ONLY_KEYS = frozenset({"decoder", "loss", "reduce_input", "reduce_dependencies", "dependencies", "threshold",
                              "top_k", "calibration", "clip", "class_similarities"})
"""Ludwig's keys of output features, refused on inputs by saying so."""


class InputFeatureBase(FeatureBase):
    tied: str | None = None
    """The name of another input feature of the same type whose encoder this one shares (one set
    of weights for both). An encoder given here must be of that feature's type; the settings used
    are that feature's. Text, category and set values are looked up in that feature's vocabulary, and
    a text input is cut or padded to that feature's sequence length."""
    active: Annotated[bool, ludwig_only(True, instead="remove the feature from input_features")] = True
    """Ludwig's switch of a feature in its model-building UI; plait accepts only true."""

    @field_validator("encoder", mode="before", check_fields=False)
    @classmethod
    def _encoder(cls, value, info):
        value = _typed(value, e.DEFAULT_ENCODER[cls.model_fields["type"].default])
        return without_null_adapter(value, takes_adapter=isinstance(value, dict) and value.get("type") in NAMED_MODELS)

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in OUTPUT_ONLY_KEYS:
            return "a setting of output features, not of input features"
        if key in e.ENCODER_FIELDS_ANY:
            return "an encoder setting: write it under encoder"
        return None


def resolve_tied(inputs: list) -> None:
    """``tied`` names another, untied, input feature of the same type; an encoder the tied feature
    names is of the same type. Other encoder settings are not compared (``defaults.<type>.encoder``
    fills them in): the tied feature's encoder becomes the other feature's, so that the resolved
    config shows the encoder it uses."""
    by_name = {f.name: (i, f) for i, f in enumerate(inputs)}
    for i, feature in enumerate(inputs):
        if feature.tied is None:
            continue
        path = f"input_features[{i}].tied"
        if feature.tied not in by_name or feature.tied == feature.name:
            names = [f.name for f in inputs if f.type == feature.type and f.name != feature.name]
            raise field_error(path, f"got {shown(feature.tied)}, which is no other input feature; "
                                    + (f"{feature.type} inputs to tie to: {', '.join(names)}" if names else
                                       f"there is no other {feature.type} input to tie to"))
        j, target = by_name[feature.tied]
        if target.type != feature.type:
            raise field_error(path, f"{feature.tied!r} is a {target.type} feature and {feature.name!r} a "
                                    f"{feature.type} one; only features of the same type share an encoder")
        if target.tied is not None:
            raise field_error(path, f"{feature.tied!r} is itself tied (to {target.tied!r}); tie to "
                                    f"{target.tied!r} directly")
        if "encoder" in feature.model_fields_set and feature.encoder.type != target.encoder.type:
            raise field_error(f"input_features[{i}].encoder.type",
                              f"got {feature.encoder.type!r}, but {feature.name!r} shares the {target.encoder.type} "
                              f"encoder of {feature.tied!r} (input_features[{j}]): remove it, or make it the same")
        feature.encoder = target.encoder.model_copy()


class BinaryInputFeature(InputFeatureBase):
    type: Literal["binary"] = "binary"
    preprocessing: p.BinaryPreprocessing = Field(default_factory=p.BinaryPreprocessing)
    encoder: e.BinaryEncoder = Field(default_factory=e.PassthroughEncoder)


class NumberInputFeature(InputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberPreprocessing = Field(default_factory=p.NumberPreprocessing)
    encoder: e.NumberEncoder = Field(default_factory=e.PassthroughEncoder)


class CategoryInputFeature(InputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=p.CategoryPreprocessing)
    encoder: e.CategoryEncoder = Field(default_factory=e.CategoryEmbedEncoder)


class TextInputFeature(InputFeatureBase):
    type: Literal["text"] = "text"
    preprocessing: p.TextPreprocessing = Field(default_factory=p.TextPreprocessing)
    encoder: e.TextEncoder = Field(default_factory=e.ParallelCNNEncoder)
    """How the text is encoded; unset: parallel_cnn, as in Ludwig (with plait's widths for it, which
    trained better than Ludwig's: benchmarks/text_defaults.py)."""

    @model_validator(mode="after")
    def _tokenizer_of_the_model(self):
        """A Hugging Face encoder reads its own model's tokens, whatever the preprocessing says
        (as in Ludwig); a tokenizer: hf_tokenizer elsewhere needs to be told whose."""
        pp = self.preprocessing
        if is_hf_encoder(self.encoder):
            if pp.tokenizer != "hf_tokenizer" or pp.pretrained_model_name_or_path != self.encoder.pretrained_model_name_or_path:
                self.preprocessing = pp.model_copy(update={
                    "tokenizer": "hf_tokenizer", "pretrained_model_name_or_path": self.encoder.pretrained_model_name_or_path})
        elif pp.tokenizer == "hf_tokenizer" and pp.pretrained_model_name_or_path is None:
            raise field_error("preprocessing.pretrained_model_name_or_path", "tokenizer hf_tokenizer reads the "
                              "tokenizer of a Hugging Face model: give its folder, or its hub name in the local cache")
        return self


class SetInputFeature(InputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=p.SetPreprocessing)
    encoder: e.SetEncoder = Field(default_factory=e.SetEmbedEncoder)


class VectorInputFeature(InputFeatureBase):
    type: Literal["vector"] = "vector"
    preprocessing: p.VectorPreprocessing = Field(default_factory=p.VectorPreprocessing)
    encoder: e.VectorEncoder = Field(default_factory=e.DenseEncoder)


class SequenceInputFeature(InputFeatureBase):
    type: Literal["sequence"] = "sequence"
    preprocessing: p.SequencePreprocessing = Field(default_factory=p.SequencePreprocessing)
    encoder: e.SequenceEncoder = Field(default_factory=e.TextEmbedEncoder)
    """How the tokens are encoded: the text encoders, or passthrough (the ids as numbers); unset: embed, as in
    Ludwig."""


class DateInputFeature(InputFeatureBase):
    type: Literal["date"] = "date"
    preprocessing: p.DatePreprocessing = Field(default_factory=p.DatePreprocessing)
    encoder: e.DateEncoder = Field(default_factory=e.DateEmbedEncoder)


class H3InputFeature(InputFeatureBase):
    type: Literal["h3"] = "h3"
    preprocessing: p.H3Preprocessing = Field(default_factory=p.H3Preprocessing)
    encoder: e.H3Encoder = Field(default_factory=e.H3EmbedEncoder)


class BagInputFeature(InputFeatureBase):
    type: Literal["bag"] = "bag"
    preprocessing: p.BagPreprocessing = Field(default_factory=p.BagPreprocessing)
    encoder: e.BagEncoder = Field(default_factory=e.BagEmbedEncoder)


class TimeseriesInputFeature(InputFeatureBase):
    type: Literal["timeseries"] = "timeseries"
    preprocessing: p.TimeseriesPreprocessing = Field(default_factory=p.TimeseriesPreprocessing)
    encoder: e.TimeseriesEncoder = Field(default_factory=e.ParallelCNNEncoder)
    """How the series is encoded: passthrough, dense, or a text encoder reading one number per step
    (its embedding settings unused; the transformer projects each step to hidden_size, unset:
    embedding_size); unset: parallel_cnn, as in Ludwig."""


class AudioInputFeature(InputFeatureBase):
    type: Literal["audio"] = "audio"
    preprocessing: p.AudioPreprocessing = Field(default_factory=p.AudioPreprocessing)
    encoder: e.AudioEncoder = Field(default_factory=e.ParallelCNNEncoder)
    """How the clip is encoded: a text encoder reading each frame's features (its embedding
    settings unused); unset: parallel_cnn, as in Ludwig."""


class ImageInputFeature(InputFeatureBase):
    type: Literal["image"] = "image"
    preprocessing: p.ImagePreprocessing = Field(default_factory=p.ImagePreprocessing)
    encoder: e.ImageEncoder = Field(default_factory=e.ImageStackedCNNEncoder)
    """How the image is encoded: stacked_cnn (Ludwig's default), mlp_mixer, unet (for a segmentation
    output), or a torchvision model (resnet, efficientnet, vit, ...)."""
    augmentation: list[AugmentationOp] = Field(default_factory=list)
    """Random changes to training images (flips, rotation, blur, brightness, contrast), each image
    drawn anew in every batch, while training only; true: Ludwig's default list (a horizontal flip
    and a rotation); false or []: none."""

    @field_validator("augmentation", mode="before")
    @classmethod
    def _augmentation(cls, value):
        return augmentation_list(value)


Reduction = Literal["sum", "mean", "avg", "max", "concat", "last", "attention", "attention_pooling", "none", "None"] | None
"""Ludwig's ways of reducing a sequence [rows, steps, width] to one vector per row."""


class OutputFeatureBase(FeatureBase):
    dependencies: list[str] = Field(default_factory=list)
    """Other output features whose decoder hidden state this output's decoder also reads (concatenated to the
    combiner's output), so that this prediction can build on theirs."""
    reduce_input: Reduction = "sum"
    """How a combiner output with a sequence dimension [rows, steps, width] becomes one vector per row before
    the decoder: sum, mean (avg), max, last, concat (the steps side by side) or attention_pooling. Unused when
    the combiner gives one vector per row."""
    reduce_dependencies: Reduction = "sum"
    """The same for the hidden states of ``dependencies`` that have a sequence dimension (plait's outputs
    have none, so it is accepted and unused)."""
    active: Annotated[bool, ludwig_only(True, instead="remove the feature from output_features")] = True
    """Ludwig's switch of a feature in its model-building UI; plait accepts only true."""

    @field_validator("decoder", mode="before", check_fields=False)
    @classmethod
    def _decoder(cls, value):
        return _typed(value, d.DEFAULT_DECODER[cls.model_fields["type"].default])

    @field_validator("loss", mode="before", check_fields=False)
    @classmethod
    def _loss(cls, value):
        return _typed(value, d.DEFAULT_LOSS[cls.model_fields["type"].default])

    @field_validator("preprocessing", mode="before", check_fields=False)
    @classmethod
    def _output_preprocessing(cls, value):
        """Settings given for an output (its own, or from defaults) keep the output default of
        dropping rows whose target is missing, unless they name a missing_value_strategy."""
        if isinstance(value, dict):
            return {**p.OUTPUT_PREPROCESSING_DEFAULTS, **value}
        return value

    @field_validator("dependencies")
    @classmethod
    def _no_repeated_dependency(cls, value):
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"got {shown(value)}; each dependency once: {', '.join(repeated)} repeated")
        return value

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        owners = [t for t, keys in _OUTPUT_ONLY_KEYS.items() if key in keys]
        if owners and cls.model_fields["type"].default not in owners:
            return f"{key} is a setting of {' and '.join(owners)} output features, not of {cls.model_fields['type'].default} ones"
        if key == "encoder":
            return "encoder is a setting of input features; an output feature has a decoder"
        return None


_OUTPUT_ONLY_KEYS = {"binary": ("threshold", "calibration"), "category": ("top_k", "calibration"),
                     "number": ("clip",), "set": ("threshold",)}

_CALIBRATION = ludwig_only(False, instead="plait does not fit a temperature after training; its probabilities "
                                          "are the model's own")


class BinaryOutputFeature(OutputFeatureBase):
    type: Literal["binary"] = "binary"
    preprocessing: p.BinaryPreprocessing = Field(default_factory=lambda: p.BinaryPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.BinaryDecoder = Field(default_factory=d.RegressorDecoder)
    loss: d.BinaryLoss = Field(default_factory=d.BinaryCrossEntropyLoss)
    threshold: float = Field(0.5, ge=0, le=1)
    """Probability at or above which the prediction is true."""
    calibration: Annotated[bool, _CALIBRATION] = False
    """Accepted for Ludwig compatibility: only false (no temperature scaling after training)."""


class CategoryOutputFeature(OutputFeatureBase):
    type: Literal["category"] = "category"
    preprocessing: p.CategoryPreprocessing = Field(default_factory=lambda: p.CategoryPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.CategoryDecoder = Field(default_factory=d.ClassifierDecoder)
    loss: d.CategoryLoss = Field(default_factory=d.SoftmaxCrossEntropyLoss)
    top_k: int = Field(3, gt=0)
    """k of the hits_at_k metric."""
    calibration: Annotated[bool, _CALIBRATION] = False
    """Accepted for Ludwig compatibility: only false (no temperature scaling after training)."""


class NumberOutputFeature(OutputFeatureBase):
    type: Literal["number"] = "number"
    preprocessing: p.NumberOutputPreprocessing = Field(default_factory=p.NumberOutputPreprocessing)
    decoder: d.NumberDecoder = Field(default_factory=d.RegressorDecoder)
    loss: d.NumberLoss = Field(default_factory=d.MeanSquaredErrorLoss)
    clip: tuple[float, float] | None = None
    """``[low, high]``: predictions are clipped to this range (in the data's units). null: not clipped."""

    @field_validator("clip")
    @classmethod
    def _clip_is_a_range(cls, value):
        if value is not None and value[0] > value[1]:
            raise ValueError(f"got {shown(list(value))}; give [low, high] with low at most high")
        return value


class SetOutputFeature(OutputFeatureBase):
    type: Literal["set"] = "set"
    preprocessing: p.SetPreprocessing = Field(default_factory=lambda: p.SetPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.SetDecoder = Field(default_factory=d.ClassifierDecoder)
    loss: d.SetLoss = Field(default_factory=d.SigmoidCrossEntropyLoss)
    threshold: float = Field(0.5, ge=0, le=1)
    """Probability at or above which an item is predicted in the set."""


class VectorOutputFeature(OutputFeatureBase):
    type: Literal["vector"] = "vector"
    preprocessing: p.VectorPreprocessing = Field(default_factory=lambda: p.VectorPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.VectorDecoder = Field(default_factory=d.ProjectorDecoder)
    loss: d.VectorLoss = Field(default_factory=d.MeanSquaredErrorLoss)


class TimeseriesOutputFeature(OutputFeatureBase):
    type: Literal["timeseries"] = "timeseries"
    preprocessing: p.TimeseriesOutputPreprocessing = Field(
        default_factory=lambda: p.TimeseriesOutputPreprocessing(missing_value_strategy="drop_row"))
    """Each cell the series that follows the row (padded with padding_value to the longest training
    series, at most timeseries_length_limit)."""
    decoder: d.VectorDecoder = Field(default_factory=d.ProjectorDecoder)
    loss: d.VectorLoss = Field(default_factory=d.MeanSquaredErrorLoss)


class SequenceOutputFeature(OutputFeatureBase):
    type: Literal["sequence"] = "sequence"
    preprocessing: p.SequencePreprocessing = Field(default_factory=lambda: p.SequencePreprocessing(missing_value_strategy="drop_row"))
    decoder: d.SequenceDecoder = Field(default_factory=d.SequenceGeneratorDecoder)
    loss: d.SequenceLoss = Field(default_factory=d.SequenceSoftmaxCrossEntropyLoss)


class TextOutputFeature(OutputFeatureBase):
    type: Literal["text"] = "text"
    preprocessing: p.TextPreprocessing = Field(default_factory=lambda: p.TextPreprocessing(missing_value_strategy="drop_row"))
    decoder: d.SequenceDecoder = Field(default_factory=d.SequenceGeneratorDecoder)
    loss: d.SequenceLoss = Field(default_factory=d.SequenceSoftmaxCrossEntropyLoss)

    @model_validator(mode="after")
    def _word_tokens(self):
        if self.preprocessing.tokenizer in ("bpe", "hf_tokenizer"):
            raise field_error("preprocessing.tokenizer", f"got {self.preprocessing.tokenizer!r}; a text output of an "
                                                         f"ECD model is predicted word by word: use a word tokenizer "
                                                         f"(space_punct, space, characters, ...)")
        return self


class CategoryDistributionOutputFeature(OutputFeatureBase):
    type: Literal["category_distribution"] = "category_distribution"
    preprocessing: p.CategoryDistributionPreprocessing = Field(
        default_factory=lambda: p.CategoryDistributionPreprocessing(missing_value_strategy="drop_row"))
    """Each cell a distribution over the classes: a list of probabilities, or a string of
    space-separated ones, in the order of ``vocab``."""
    decoder: d.CategoryDistributionDecoder = Field(default_factory=d.ClassifierDecoder)
    loss: d.CategoryDistributionLoss = Field(default_factory=d.SoftmaxCrossEntropyLoss)


class ImageOutputFeature(OutputFeatureBase):
    """A segmentation mask: a class per pixel, each distinct pixel value of the training masks a class."""

    type: Literal["image"] = "image"
    preprocessing: p.ImagePreprocessing = Field(
        default_factory=lambda: p.ImagePreprocessing(missing_value_strategy="drop_row"))
    decoder: union(UNetDecoder) = Field(default_factory=UNetDecoder)
    """unet: the expanding half of a U-Net, reading the skip connections of the unet encoder of the
    image input."""
    loss: d.ImageLoss = Field(default_factory=d.SoftmaxCrossEntropyLoss)
    """Softmax cross-entropy per pixel, a row's loss the mean over its pixels."""
    reduce_input: Reduction = None
    """Unused: the decoder reads the combiner's output as the U-Net's bottleneck."""


def output_order(outputs: list) -> list[str]:
    """The output features' names, each after those it depends on (a head reads their hidden states).

    Raises ValueError for a dependency that is no output feature, or for dependencies in a cycle."""
    names = [f.name for f in outputs]
    known = set(names)
    if not any(f.dependencies for f in outputs):
        return names
    waiting_on = {f.name: set(f.dependencies) for f in outputs}
    dependents: dict[str, list[str]] = {}
    for feature in outputs:
        for dependency in feature.dependencies:
            if dependency == feature.name:
                raise DependencyProblem(feature.name, f"got {dependency!r}, the feature itself; an output can only "
                                                      f"depend on other outputs")
            if dependency not in known:
                others = [n for n in names if n != feature.name]
                raise DependencyProblem(feature.name, f"got {dependency!r}, which is no output feature; "
                                                      f"{suggest(dependency, others) if others else 'there is no other output'}")
            dependents.setdefault(dependency, []).append(feature.name)
    # Kahn's order, iterative (a long chain of dependencies must not exhaust the stack); ties keep config order.
    ready = deque(n for n in names if not waiting_on[n])
    order: list[str] = []
    while ready:
        name = ready.popleft()
        order.append(name)
        for dependent in dependents.get(name, []):
            waiting_on[dependent].discard(name)
            if not waiting_on[dependent]:
                ready.append(dependent)
    if len(order) < len(names):
        placed = set(order)
        stuck = [n for n in names if n not in placed]
        raise DependencyProblem(stuck[0], f"output features {', '.join(stuck)} depend on each other in a cycle (or "
                                          f"on such features); remove one of those dependencies")
    return order


class DependencyProblem(ValueError):
    """A dependency between output features that cannot be built, and the feature that declares it."""

    def __init__(self, feature: str, message: str):
        super().__init__(message)
        self.feature = feature


def check_dependencies(outputs: list) -> None:
    """Every dependency names another output feature, and none is circular."""
    try:
        output_order(outputs)
    except DependencyProblem as problem:
        index = next(i for i, f in enumerate(outputs) if f.name == problem.feature)
        raise field_error(f"output_features[{index}].dependencies", str(problem)) from None


INPUT_FEATURE_CLASSES = (BinaryInputFeature, NumberInputFeature, CategoryInputFeature, TextInputFeature,
                         SetInputFeature, VectorInputFeature, SequenceInputFeature, DateInputFeature,
                         H3InputFeature, BagInputFeature,
                         TimeseriesInputFeature, AudioInputFeature, ImageInputFeature)
OUTPUT_FEATURE_CLASSES = (BinaryOutputFeature, CategoryOutputFeature, NumberOutputFeature, SetOutputFeature,
                          VectorOutputFeature, SequenceOutputFeature, TextOutputFeature,
                          CategoryDistributionOutputFeature, TimeseriesOutputFeature, ImageOutputFeature)
"""Every feature class; a new feature type adds its class here (and its name to INPUT_TYPES, OUTPUT_TYPES)."""

ludwig_types_not_implemented("output_features", {
    "anomaly": "one-class anomaly outputs (Deep SVDD, Deep SAD, DROCC, with an anomaly score and a threshold) are not "
               "implemented; with labelled anomalies, use a binary output (loss.positive_class_weight for rare ones)",
})

InputFeature = Annotated[Union[INPUT_FEATURE_CLASSES], Field(discriminator="type")]
OutputFeature = Annotated[Union[OUTPUT_FEATURE_CLASSES], Field(discriminator="type")]
AnyFeature = Union[INPUT_FEATURE_CLASSES + OUTPUT_FEATURE_CLASSES]
