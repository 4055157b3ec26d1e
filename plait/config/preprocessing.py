"""Preprocessing settings: per feature type, and the global split and sampling.

Each field's default here is the one plait uses; a value set under top-level
``preprocessing.<type>``, then ``defaults.<type>.preprocessing``, then the feature's own
``preprocessing`` overrides it, in that order.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from plait.config.base import StrictModel

MissingValueStrategy = Literal[
    "fill_with_const", "fill_with_mean", "fill_with_mode", "fill_with_false", "fill_with_true", "drop_row"
]


class FeaturePreprocessing(StrictModel):
    missing_value_strategy: MissingValueStrategy = "fill_with_const"
    """What to do with a missing value: fill with ``fill_value``, the training mean or most
    frequent value, or drop the row."""

    def check_strategy(self, allowed: tuple[str, ...]) -> None:
        if self.missing_value_strategy not in allowed:
            raise ValueError(
                f"missing_value_strategy {self.missing_value_strategy!r} does not apply to this "
                f"feature type; use one of {', '.join(allowed)}"
            )


class BinaryPreprocessing(FeaturePreprocessing):
    missing_value_strategy: MissingValueStrategy = "fill_with_false"
    fill_value: bool | str | int | None = None
    """The value used by ``fill_with_const``."""
    fallback_true_label: str | None = None
    """For two labels that are not boolean words (yes/no, true/false, 1/0, ...): which is true.
    Unset, the label that sorts last is true."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_false", "fill_with_true", "fill_with_const", "fill_with_mode", "drop_row"))
        return self


class NumberPreprocessing(FeaturePreprocessing):
    fill_value: float = 0.0
    """The value used by ``fill_with_const``."""
    normalization: Literal["zscore", "minmax", "iq", "none"] | None = "zscore"
    """zscore: (x - mean) / std; minmax: into [0, 1]; iq: (x - median) / interquartile range;
    none (or null): raw values."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mean", "fill_with_mode", "drop_row"))
        return self


class CategoryPreprocessing(FeaturePreprocessing):
    fill_value: str = "<UNK>"
    """The value used by ``fill_with_const``."""
    most_common: int = Field(10000, gt=0)
    """Vocabulary cap: the most frequent values are kept, the rest map to the unknown token."""
    lowercase: bool = False

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


class TextPreprocessing(FeaturePreprocessing):
    tokenizer: Literal["space", "space_punct", "bpe"] = "space_punct"
    """space: split on whitespace; space_punct: words and punctuation marks as tokens; bpe:
    byte-pair-encoding subwords learned from the training split."""
    lowercase: bool = True
    most_common: int = Field(20000, gt=0)
    """Vocabulary cap (for bpe: the subword vocabulary size)."""
    max_sequence_length: int = Field(256, gt=0)
    """Longer texts are truncated. Sequences are padded to the longest training text, at most this."""
    padding: Literal["right", "left"] = "right"
    padding_symbol: str = "<PAD>"
    unknown_symbol: str = "<UNK>"
    fill_value: str = ""
    """The text used by ``fill_with_const`` (empty: a sequence of padding)."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


class SetPreprocessing(FeaturePreprocessing):
    tokenizer: Literal["space", "comma"] = "space"
    """How one cell is split into set elements."""
    lowercase: bool = False
    most_common: int = Field(10000, gt=0)
    fill_value: str = ""
    """The value used by ``fill_with_const`` (empty: the empty set)."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


class VectorPreprocessing(FeaturePreprocessing):
    vector_size: int | None = Field(None, gt=0)
    """Expected length of every vector; unset, it is taken from the training data."""
    fill_value: float = 0.0
    """``fill_with_const`` fills a missing vector with this value in every position."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mean", "drop_row"))
        return self


PREPROCESSING_BY_TYPE: dict[str, type[FeaturePreprocessing]] = {
    "binary": BinaryPreprocessing,
    "number": NumberPreprocessing,
    "category": CategoryPreprocessing,
    "text": TextPreprocessing,
    "set": SetPreprocessing,
    "vector": VectorPreprocessing,
}

# Output features drop rows whose target is missing, unless the user says otherwise.
OUTPUT_PREPROCESSING_DEFAULTS = {"missing_value_strategy": "drop_row"}


def _probabilities(value: list[float]) -> list[float]:
    if len(value) != 3 or any(p < 0 for p in value) or abs(sum(value) - 1.0) > 1e-6:
        raise ValueError(
            f"probabilities must be three non-negative numbers (training, validation, test) "
            f"that sum to 1, such as [0.7, 0.1, 0.2]; got {value}"
        )
    return value


class RandomSplit(StrictModel):
    type: Literal["random"] = "random"
    probabilities: list[float] = [0.7, 0.1, 0.2]
    """Fractions of rows for training, validation and test. Seeded by the run's random seed."""
    _check = field_validator("probabilities")(classmethod(lambda cls, v: _probabilities(v)))


class FixedSplit(StrictModel):
    type: Literal["fixed"] = "fixed"
    column: str = "split"
    """A column holding 0/1/2 or training/validation/test for each row."""


class StratifySplit(StrictModel):
    type: Literal["stratify"] = "stratify"
    column: str
    """Rows are split so that every value of this column keeps its share in each split."""
    probabilities: list[float] = [0.7, 0.1, 0.2]
    _check = field_validator("probabilities")(classmethod(lambda cls, v: _probabilities(v)))


SplitConfig = Annotated[Union[RandomSplit, FixedSplit, StratifySplit], Field(discriminator="type")]


class GlobalPreprocessing(StrictModel):
    split: SplitConfig = Field(default_factory=RandomSplit)
    """How the dataset is split into training, validation and test sets."""
    sample_ratio: float = Field(1.0, gt=0, le=1)
    """Keep this fraction of rows (seeded), for quick experiments on big data."""
    binary: BinaryPreprocessing | None = None
    number: NumberPreprocessing | None = None
    category: CategoryPreprocessing | None = None
    text: TextPreprocessing | None = None
    set: SetPreprocessing | None = None
    vector: VectorPreprocessing | None = None

    @field_validator("split", mode="before")
    @classmethod
    def _default_split_type(cls, value):
        if isinstance(value, dict) and "type" not in value:
            return {"type": "random", **value}
        return value
