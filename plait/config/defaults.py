"""The ``defaults`` section: per feature type, the settings every feature of that type starts from.

As in Ludwig, ``defaults.<type>.encoder`` applies to the input features of that type only, and
``defaults.<type>.decoder`` and ``.loss`` to its output features only. ``preprocessing`` applies
to both (Ludwig applies it to input features only; plait has always given it to outputs too).
A feature's own setting wins over the default, and an encoder (decoder, loss) default is used only
where the feature picks the same type, or none.

Each section is checked against the very settings the features of that type take, whether or not
any feature has that type: a misspelt key is reported at ``defaults.<type>.encoder.<key>``.
Every feature type Ludwig has is one plait has, so every section is checked.
"""

from __future__ import annotations

import functools
import typing
from typing import Any, Optional

from pydantic import Field, ValidationError, create_model, field_validator

from plait.config import decoders as d
from plait.config import encoders as e
from plait.config.augmentation import AugmentationOp, augmentation_list
from plait.config.base import StrictModel, _literal_values, _tagged_member, _union_members
from plait.config.encoder_settings import without_null_adapter
from plait.config.hf_encoders import NAMED_MODELS
from plait.config.features import InputFeature, OutputFeature


def _classes_by_type(union: Any) -> dict[str, type]:
    return {value: member for member in _union_members(union) for value in _literal_values(member)}


INPUT_CLASSES: dict[str, type] = _classes_by_type(InputFeature)
"""The input feature class of each feature type plait has."""
OUTPUT_CLASSES: dict[str, type] = _classes_by_type(OutputFeature)
"""The output feature class of each feature type plait can predict."""

MODULE_DEFAULT_TYPES = {
    "encoder": e.DEFAULT_ENCODER,
    "decoder": d.DEFAULT_DECODER,
    "loss": {ftype: cls.model_fields["loss"].get_default(call_default_factory=True).type
             for ftype, cls in OUTPUT_CLASSES.items()},
}
"""The encoder (decoder, loss) type a feature gets when its config names none."""


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def module_class(feature_cls: type, module: str, module_type: Any) -> type | None:
    """The settings class of a feature's ``module`` (encoder, decoder) of type ``module_type``."""
    hint = _type_hints(feature_cls).get(module)
    while typing.get_origin(hint) is typing.Annotated:  # a union of one member is that member
        hint = typing.get_args(hint)[0]
    if isinstance(hint, type) and module_type in _literal_values(hint):
        return hint
    return _tagged_member(hint, module_type)


def with_type(value: Any, default_type: str | None) -> Any:
    """``encoder: rnn`` and ``encoder: {...}`` without a type, as the section they stand for."""
    if isinstance(value, str):
        return {"type": value}
    if isinstance(value, dict) and "type" not in value and default_type is not None:
        return {"type": default_type, **value}
    return value


class TypeDefaults(StrictModel):
    """``defaults.<type>`` for a feature type plait has."""


class UncheckedTypeDefaults(StrictModel):
    """``defaults.<type>`` for a Ludwig feature type plait has no feature for: accepted as Ludwig
    writes it, and unchecked, because no feature of this config can have that type."""

    preprocessing: dict | None = None
    """Unchecked: applies to no feature."""
    encoder: dict | str | None = None
    """Unchecked: applies to no feature."""
    decoder: dict | str | None = None
    """Unchecked: applies to no feature."""
    loss: dict | None = None
    """Unchecked: applies to no feature."""


def _filled_type(module: str, ftype: str):
    def fill(cls, value):
        value = with_type(value, MODULE_DEFAULT_TYPES[module].get(ftype))
        if module != "encoder":
            return value
        # As a feature's encoder: only the pretrained Hugging Face encoders take an adapter.
        return without_null_adapter(value, takes_adapter=isinstance(value, dict) and value.get("type") in NAMED_MODELS)

    return fill


def _type_defaults_model(ftype: str) -> type[TypeDefaults]:
    """``defaults.<ftype>``: each section typed as the features of that type type it."""
    inputs = typing.get_type_hints(INPUT_CLASSES[ftype], include_extras=True)
    output_cls = OUTPUT_CLASSES.get(ftype)
    outputs = typing.get_type_hints(output_cls, include_extras=True) if output_cls else {}
    unchecked = f"Unchecked: plait has no {ftype} output feature, so this applies to no feature."
    fields = {
        "preprocessing": (Optional[inputs["preprocessing"]], Field(None, description=(
            f"Preprocessing every {ftype} feature starts from" + (", input or output." if outputs else ".")))),
        "encoder": (Optional[inputs["encoder"]], Field(None, description=(
            f"The encoder every {ftype} input feature starts from (a type name, or settings)."))),
        "decoder": (Optional[outputs["decoder"]] if outputs else Optional[dict | str], Field(None, description=(
            f"The decoder every {ftype} output feature starts from." if outputs else unchecked))),
        "loss": (Optional[outputs["loss"]] if outputs else Optional[dict], Field(None, description=(
            f"The loss every {ftype} output feature starts from." if outputs else unchecked))),
    }
    validators = {f"_{module}_type": field_validator(module, mode="before")(_filled_type(module, ftype))
                  for module in ("encoder", "decoder", "loss") if outputs or module == "encoder"}
    name = f"{ftype.capitalize()}TypeDefaults"
    return create_model(name, __base__=TypeDefaults, __validators__=validators, __module__=__name__, **fields)


BinaryTypeDefaults = _type_defaults_model("binary")
NumberTypeDefaults = _type_defaults_model("number")
CategoryTypeDefaults = _type_defaults_model("category")
TextTypeDefaults = _type_defaults_model("text")
SetTypeDefaults = _type_defaults_model("set")
VectorTypeDefaults = _type_defaults_model("vector")
SequenceTypeDefaults = _type_defaults_model("sequence")
DateTypeDefaults = _type_defaults_model("date")
H3TypeDefaults = _type_defaults_model("h3")
BagTypeDefaults = _type_defaults_model("bag")
TimeseriesTypeDefaults = _type_defaults_model("timeseries")
AudioTypeDefaults = _type_defaults_model("audio")


class ImageTypeDefaults(_type_defaults_model("image")):
    augmentation: list[AugmentationOp] | None = None
    """The augmentation every image input feature starts from (``true``: Ludwig's default list); a
    feature's own list replaces it."""

    @field_validator("augmentation", mode="before")
    @classmethod
    def _augmentation(cls, value):
        return None if value is None else augmentation_list(value)

_NO_FEATURE = "Ludwig's {} feature type; plait has no {} feature, so these defaults apply to no feature (unchecked)."


class Defaults(StrictModel):
    """Per feature type, the settings its features start from."""

    binary: BinaryTypeDefaults | None = None
    """What binary features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    number: NumberTypeDefaults | None = None
    """What number features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    category: CategoryTypeDefaults | None = None
    """What category features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    text: TextTypeDefaults | None = None
    """What text features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    set: SetTypeDefaults | None = None
    """What set features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    vector: VectorTypeDefaults | None = None
    """What vector features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    sequence: SequenceTypeDefaults | None = None
    """What sequence features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""
    audio: AudioTypeDefaults | None = None
    """What audio input features start from: preprocessing and encoder (decoder and loss: unchecked)."""
    date: DateTypeDefaults | None = None
    """What date input features start from: preprocessing and encoder (decoder and loss: unchecked)."""
    h3: H3TypeDefaults | None = None
    """What h3 input features start from: preprocessing and encoder (decoder and loss: unchecked)."""
    bag: BagTypeDefaults | None = None
    """What bag input features start from: preprocessing and encoder (decoder and loss: unchecked)."""
    image: ImageTypeDefaults | None = None
    """What image features start from: preprocessing, encoder and augmentation (inputs), decoder and loss
    (outputs)."""
    timeseries: TimeseriesTypeDefaults | None = None
    """What timeseries features start from: preprocessing, encoder (inputs), decoder and loss (outputs)."""


TYPE_DEFAULTS: dict[str, type[TypeDefaults]] = {
    ftype: typing.get_args(Defaults.model_fields[ftype].annotation)[0] for ftype in INPUT_CLASSES
}
"""The ``defaults.<type>`` model of each feature type plait has."""

APPLIES_TO = {"input": ("preprocessing", "encoder", "augmentation"), "output": ("preprocessing", "decoder", "loss")}
"""Which sections of ``defaults.<type>`` reach input features, and which reach output features."""


def valid_section(ftype: str, section: str, value: Any) -> bool:
    """Whether ``defaults.<ftype>.<section>`` validates on its own (an invalid one is reported
    once, at its own path, instead of again in every feature it would reach)."""
    model = TYPE_DEFAULTS.get(ftype)
    if model is None:
        return False
    try:
        model.model_validate({section: value})
    except ValidationError:
        return False
    return True
