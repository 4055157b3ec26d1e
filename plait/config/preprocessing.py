"""Preprocessing settings: per feature type, and the global split and sampling.

Each field's default here is the one plait uses; a value set under top-level
``preprocessing.<type>``, then ``defaults.<type>.preprocessing``, then the feature's own
``preprocessing`` overrides it, in that order.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import AfterValidator, Field, field_validator, model_validator

from plait.config.base import LUDWIG_DEFAULT, StrictModel, field_error, ludwig_only, shown, suggest

MissingValueStrategy = Literal[
    "fill_with_const", "fill_with_mean", "fill_with_mode", "fill_with_false", "fill_with_true", "drop_row",
    "bfill", "ffill",
]

ROW_ORDER_STRATEGIES = ("bfill", "ffill")
ROW_ORDER_ADVICE = (
    "plait preprocesses each row on its own, so that every engine (local, Dask, Modin) and every prediction "
    "chunk gives the same result; a fill from the neighbouring row depends on how rows are cut into partitions "
    "and chunks. Fill the column in your data first (pandas: df[col].ffill()), or use fill_with_mode, "
    "fill_with_mean (numbers) or fill_with_const"
)


def _refuse_row_order(strategy: str | None, field: str) -> None:
    if strategy in ROW_ORDER_STRATEGIES:
        raise field_error(field, f"got {strategy!r}; plait does not implement Ludwig's {strategy}: {ROW_ORDER_ADVICE}")


class FeaturePreprocessing(StrictModel):
    missing_value_strategy: MissingValueStrategy = "fill_with_const"
    """What to do with a missing value: fill with ``fill_value``, the training mean or most
    frequent value, or drop the row. Ludwig's bfill and ffill are refused (see the error)."""

    def check_strategy(self, allowed: tuple[str, ...]) -> None:
        _refuse_row_order(self.missing_value_strategy, "missing_value_strategy")
        if self.missing_value_strategy not in allowed:
            raise ValueError(
                f"missing_value_strategy {self.missing_value_strategy!r} does not apply to this "
                f"feature type; use one of {', '.join(allowed)}"
            )

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        """A preprocessing key of another of plait's feature types is named as such."""
        owners = [t for t, model in PREPROCESSING_BY_TYPE.items() if key in model.model_fields and model is not cls]
        if owners and key not in cls.model_fields:
            return f"a preprocessing setting of {' and '.join(owners)} features, not of this feature type"
        return None


NOT_CACHED = "plait computes every feature in the model while training; no embeddings are cached"
COMPUTED_FIELD_NOTE = "computed by Ludwig"


class BinaryPreprocessing(FeaturePreprocessing):
    missing_value_strategy: MissingValueStrategy = "fill_with_false"
    fill_value: bool | str | float | None = None
    """The value used by ``fill_with_const``: a boolean, a boolean word (yes, no, true, 1, ...) or
    one of the column's two labels."""
    fallback_true_label: str | None = None
    """For two labels that are not boolean words (yes/no, true/false, 1/0, ...): which is true.
    Unset, the label that sorts last is true."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_false", "fill_with_true", "fill_with_const", "fill_with_mode", "drop_row"))
        return self


class NumberSettings(FeaturePreprocessing):
    """What number inputs and outputs share."""

    fill_value: float = 0.0
    """The value used by ``fill_with_const``."""
    normalization: Literal["zscore", "minmax", "log1p", "iq", "quantile", "auto", "none"] | None = "zscore"
    """How values are scaled (inputs and outputs each say their default and choices)."""
    outlier_strategy: Literal["fill_with_const", "fill_with_mode", "fill_with_mean", "drop_row", "bfill", "ffill"] | None = None
    """What to do with a value farther than ``outlier_threshold`` training standard deviations from
    the training mean: the same choices as missing_value_strategy (a fill, or drop the row).
    Unset: outliers are kept."""
    outlier_threshold: float = Field(3.0, ge=0)
    """How many standard deviations from the mean make a value an outlier."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mean", "fill_with_mode", "drop_row"))
        _refuse_row_order(self.outlier_strategy, "outlier_strategy")
        return self


class NumberPreprocessing(NumberSettings):
    """A number input's preprocessing."""

    normalization: Literal["zscore", "minmax", "log1p", "iq", "quantile", "auto", "none"] | None = Field(
        "auto", json_schema_extra={LUDWIG_DEFAULT: "zscore"})
    """zscore: (x - mean) / std; minmax: into [0, 1]; log1p: log(1 + x), for positive values only;
    iq: (x - median) / interquartile range; quantile (plait's): the value's rank among the training
    split's values as a standard normal score, so that sentinels such as 999999 and a long tail take
    no more room than any other rank; auto (plait's default; Ludwig's is zscore): quantile for a
    column whose training range spans over 20 interquartile ranges, zscore for the others
    (benchmarks/README.md, "Defaults on 25 datasets"); none (or null): raw values."""

    clip_to_training_range: bool = True
    """plait's setting (Ludwig has none): a value below the training split's smallest
    or above its largest is read as that bound, so a row far outside what the model saw (a typo, a
    sentinel such as 999999) cannot push its prediction anywhere (benchmarks/README.md, "Defaults
    on 25 datasets"). false: values are read as they are."""


class NumberOutputPreprocessing(NumberSettings):
    """A number output's preprocessing: plait normalizes the target (zscore) where Ludwig does not."""

    missing_value_strategy: MissingValueStrategy = "drop_row"
    normalization: Literal["zscore", "minmax", "log1p", "iq", "quantile", "auto", "none"] | None = Field(
        "zscore", json_schema_extra={LUDWIG_DEFAULT: None})
    """zscore, minmax, iq or none, as for inputs (quantile and auto are for inputs: ranks cannot
    be mapped back beyond the training range); predictions are mapped back to the column's scale."""

    @model_validator(mode="after")
    def _invertible(self):
        reasons = {"log1p": "plait does not map predictions back through log1p",
                   "quantile": "ranks cannot be mapped back to values beyond the training range",
                   "auto": "it may choose quantile, whose ranks cannot be mapped back beyond the training range"}
        if self.normalization in reasons:
            raise field_error("normalization", f"got {self.normalization!r}; {reasons[self.normalization]}, so "
                                               "an output takes zscore, minmax, iq or none (a log-scale target: "
                                               "take the log in your data first)")
        return self


class CategoryPreprocessing(FeaturePreprocessing):
    fill_value: str = "<UNK>"
    """The value used by ``fill_with_const``."""
    most_common: int | None = Field(10000, gt=0)
    """Vocabulary cap: the most frequent values are kept, the rest map to the unknown token
    (null: no cap)."""
    lowercase: bool = False
    """Lowercase the values before counting them, so that Red and red are one category."""
    cache_encoder_embeddings: Annotated[bool, ludwig_only(False, instead=NOT_CACHED)] = False
    """Ludwig's precomputed encoder outputs; plait accepts only false."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


WORD_TOKENIZERS = ("space", "space_punct", "characters", "underscore", "comma", "untokenized", "stripped")
"""Ludwig's rule-based tokenizers, which plait implements (text and set features)."""

_LANGUAGES = ("english", "italian", "spanish", "german", "french", "portuguese", "dutch", "greek", "norwegian",
              "lithuanian", "danish", "polish", "romanian", "japanese", "chinese", "multi")
_SPACY_TOKENIZERS = {f"{lang}_{kind}": "spaCy" for lang in _LANGUAGES for kind in (
    "tokenize", "tokenize_filter", "tokenize_remove_stopwords", "lemmatize", "lemmatize_filter", "lemmatize_remove_stopwords")}
_PRETRAINED_TOKENIZERS = {name: "a pretrained Hugging Face" for name in ("sentencepiece", "clip", "gpt2bpe", "bert")}
TOKENIZERS_NOT_IMPLEMENTED = {**_SPACY_TOKENIZERS, **_PRETRAINED_TOKENIZERS}
"""Ludwig's tokenizers that plait refuses, with the kind of tokenizer each is."""


def _tokenizer(value: str, implemented: tuple[str, ...]) -> str:
    """A tokenizer plait implements; Ludwig's others are refused with what to use instead."""
    if value in implemented:
        return value
    kind = TOKENIZERS_NOT_IMPLEMENTED.get(value)
    if kind == "spaCy":
        raise ValueError(f"Ludwig's {value!r} is not implemented in plait (it needs spaCy's language models); use "
                         f"space_punct with lowercase: true, or bpe to learn subwords from the training data")
    if value == "hf_tokenizer":
        raise ValueError("hf_tokenizer splits text into a model's subwords, for text features; use one of "
                         f"{', '.join(implemented)}")
    if kind:
        raise ValueError(f"Ludwig's {value!r} is not implemented in plait ({kind} tokenizer); use hf_tokenizer with "
                         f"pretrained_model_name_or_path (the tokenizer of a Hugging Face model folder), or bpe")
    raise ValueError(f"unknown tokenizer {shown(value)}; {suggest(value, implemented)}")


class RetrievalSettings(StrictModel):
    """Ludwig's retrieval of examples into an LLM prompt; plait accepts only the unset defaults."""

    type: Annotated[str | None, ludwig_only(None, instead="plait has no prompts (LLM preprocessing)")] = None
    index_name: Annotated[str | None, ludwig_only(None, instead="plait has no prompts (LLM preprocessing)")] = None
    model_name: Annotated[str | None, ludwig_only(None, instead="plait has no prompts (LLM preprocessing)")] = None
    k: Annotated[int, ludwig_only(0, instead="plait has no prompts (LLM preprocessing)")] = 0


class PromptSettings(StrictModel):
    """Ludwig's prompt for LLM features; plait accepts only the unset defaults."""

    template: Annotated[str | None, ludwig_only(None, instead="put the text in the column itself")] = None
    task: Annotated[str | None, ludwig_only(None, instead="put the text in the column itself")] = None
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)


class TextPreprocessing(FeaturePreprocessing):
    tokenizer: str = "space_punct"
    """space: split on whitespace; space_punct: words and punctuation marks as tokens; characters:
    one token per character; underscore, comma: split on that character (trimmed); untokenized: the
    whole text one token; stripped: the same, trimmed; bpe (plait's own): byte-pair-encoding subwords
    learned from the training split; hf_tokenizer: the tokenizer of the Hugging Face model in
    pretrained_model_name_or_path (a Hugging Face encoder sets both). Ludwig's spaCy tokenizers are
    refused."""
    lowercase: bool = False
    """Lowercase the text before tokenizing. Ludwig's default, false (lowercasing made no clear
    difference in benchmarks/text_defaults.py)."""
    most_common: int = Field(20000, gt=0)
    """Vocabulary cap (for bpe: the subword vocabulary size)."""
    vocab_file: str | None = None
    """A UTF-8 file with one token per line (the first space-separated word of each line): the
    vocabulary, in that order, instead of the most common training tokens."""
    sequence_length: int | None = Field(None, gt=0)
    """Every sequence padded or truncated to exactly this many tokens. Unset: the longest training
    text, at most ``max_sequence_length``."""
    max_sequence_length: int | None = Field(256, gt=0)
    """Longer texts are truncated (null: no cap). Sequences are padded to the longest training text,
    at most this."""
    padding: Literal["right", "left"] = "right"
    """Which side of a short sequence the padding goes."""
    padding_symbol: str = "<PAD>"
    """The padding token (vocabulary index 0)."""
    unknown_symbol: str = "<UNK>"
    """The token of words not in the vocabulary (index 1)."""
    fill_value: str = Field("", json_schema_extra={LUDWIG_DEFAULT: "<UNK>"})
    """The text used by ``fill_with_const`` (empty: a sequence of padding). plait tokenizes this
    text like any other, so Ludwig's ``<UNK>`` would become the tokens <, UNK and >: plait keeps
    the empty text, which means what Ludwig's default does (nothing known in the cell)."""
    ngram_size: int = Field(2, gt=0)
    """Read by Ludwig's ngram tokenizer, which Ludwig 0.17 does not register: no effect, there or here."""
    pretrained_model_name_or_path: str | None = None
    """The Hugging Face model (a folder, or a hub name in the local cache) whose tokenizer
    hf_tokenizer reads; a Hugging Face encoder sets it to its own model."""
    cache_encoder_embeddings: bool = False
    """With a frozen Hugging Face encoder (trainable: false) that reduces the sequence: run the
    encoder once, at preprocessing, and store its output, which training then reads. No effect on
    other encoders, or where the output would change in training (Ludwig's rule)."""
    compute_idf: Annotated[bool, ludwig_only(False, instead="plait's text encoders do not weight tokens by idf")] = False
    """Set by Ludwig for its tf-idf encoder; plait accepts only false."""
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    """Ludwig's LLM prompt; plait accepts only the unset defaults."""

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        return _tokenizer(value, (*WORD_TOKENIZERS, "bpe", "hf_tokenizer"))

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        if self.tokenizer == "hf_tokenizer" and self.vocab_file is not None:
            raise field_error("vocab_file", "hf_tokenizer uses the model's own vocabulary; drop vocab_file")
        if self.tokenizer == "bpe" and self.vocab_file is not None:
            raise field_error("vocab_file", "bpe learns its own subword vocabulary; use a word tokenizer "
                                            "(space_punct, space, ...) with a vocab_file, or drop vocab_file")
        return self



class SequencePreprocessing(TextPreprocessing):
    """Sequence features: tokens, as text features read them, split on whitespace by default."""

    tokenizer: str = "space"
    """How a cell is split into tokens (Ludwig's sequence default, space; any text tokenizer)."""


class CategoryDistributionPreprocessing(FeaturePreprocessing):
    vocab: list[str] | None = Field(None, min_length=1)
    """The class of each position of the distributions, in order (Ludwig's vocab); unset: the
    positions' numbers, 0, 1, ..."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("drop_row",))
        return self

class SetPreprocessing(FeaturePreprocessing):
    tokenizer: str = "space"
    """How one cell is split into set elements: space, comma, underscore, or any word tokenizer of
    text features (space_punct, characters, ...)."""
    lowercase: bool = False
    """Lowercase the elements before counting them."""
    most_common: int | None = Field(10000, gt=0)
    """Vocabulary cap: the most frequent elements are kept (null: no cap)."""
    fill_value: str = Field("", json_schema_extra={LUDWIG_DEFAULT: "<UNK>"})
    """The value used by ``fill_with_const`` (empty: the empty set)."""

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        return _tokenizer(value, WORD_TOKENIZERS)

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


class VectorPreprocessing(FeaturePreprocessing):
    vector_size: int | None = Field(None, gt=0)
    """Expected length of every vector; unset, it is taken from the training data."""
    fill_value: float | str = 0.0
    """``fill_with_const`` fills a missing vector with this value in every position, or with the
    vector a string of space-separated numbers gives (Ludwig's form; empty: zeros)."""

    @field_validator("fill_value")
    @classmethod
    def _numbers(cls, value):
        if isinstance(value, str):
            try:
                [float(x) for x in value.split()]
            except ValueError:
                raise ValueError(f"got {shown(value)}; give a number, or space-separated numbers such as "
                                 f"'0 0.5 1'") from None
        return value

    def fill_vector(self, size: int) -> list[float]:
        """The vector ``fill_with_const`` gives a missing value, for vectors of ``size``."""
        if isinstance(self.fill_value, str) and self.fill_value.strip():
            return [float(x) for x in self.fill_value.split()]
        value = 0.0 if isinstance(self.fill_value, str) else float(self.fill_value)
        return [value] * size

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mean", "drop_row"))
        return self


class DatePreprocessing(FeaturePreprocessing):
    datetime_format: str | None = None
    """The strptime format of the column's text (such as ``%d/%m/%Y %H:%M``); a value it does not
    fit is read as if unset, as in Ludwig. Unset: each value on its own is read as ISO-8601
    (2024-05-01, 2024-05-01T12:30:00, fractional seconds dropped), or as 05/01/2024,
    01.05.2024, 20240501, 1 May 2024 and the like, or as a Unix timestamp (seconds;
    milliseconds and finer are scaled down, as Ludwig does). Slash dates are read in one order
    for the whole column, decided from the training rows and kept with the model: day-first
    when some can only be day-first (13/05/2024), else month-first (with a warning when some
    read both ways); a column with dates of both orders is an error. Columns of Arrow dates and
    timestamps are read as they are. A time with a zone (an offset such as +02:00, or a
    timestamp type with a time zone) is read in UTC, as Arrow's CSV reader reads it, so that a
    dataset gives the same dates in any file format (Ludwig keeps the time as written)."""
    fill_value: str = ""
    """The date ``fill_with_const`` gives a missing value, written as the column's dates are.
    Empty: 1970-01-01 00:00:00 (Ludwig uses the time of preprocessing, which changes with every
    run)."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "drop_row"))
        return self


H3_LUDWIG_FILL = 576495936675512319
"""Ludwig's fill value: the resolution-0 cell of base cell 0 (hex 8001fffffffffff)."""


class H3Preprocessing(FeaturePreprocessing):
    fill_value: int | str = H3_LUDWIG_FILL
    """The H3 cell ``fill_with_const`` gives a missing value: an integer, or its hex string."""

    @field_validator("fill_value")
    @classmethod
    def _an_index(cls, value: int | str) -> int | str:
        text = str(value).strip().lower()
        digits = text[2:] if text.startswith("0x") else text
        base = 10 if isinstance(value, int) or (digits.isdigit() and len(digits) > 16) else 16
        try:
            number = int(digits, base)
        except ValueError:
            number = -1
        if not 0 <= number < 2**63:
            raise ValueError(f"got {shown(value)}; give an H3 cell index, as an integer (622236723497533439) "
                             f"or a hex string (8a2a1072b59ffff)")
        return value

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "fill_with_mode", "drop_row"))
        return self


class BagPreprocessing(SetPreprocessing):
    """A set's settings, read as counts (the tokenizer and vocabulary checks are the set's)."""

    tokenizer: str = "space"
    """How a cell is split into tokens, each counted: space, comma, underscore, or any word
    tokenizer of text features (space_punct, characters, ...)."""
    lowercase: bool = False
    """Lowercase the tokens before counting them."""
    most_common: int | None = Field(10000, gt=0)
    """Vocabulary cap: the most frequent tokens are kept, the others count as the unknown token
    (null: no cap)."""
    fill_value: str = "<UNK>"
    """The text ``fill_with_const`` gives a missing value, tokenized like any other: the default
    counts one unknown token (with the space tokenizer), as in Ludwig."""


SERIES_TOKENIZERS = ("space", "comma")
"""How a timeseries cell is split into its numbers (Ludwig's other tokenizers split words)."""


class TimeseriesPreprocessing(FeaturePreprocessing):
    """A series of numbers per row: a list column, or a string the tokenizer splits into numbers."""

    tokenizer: str = "space"
    """How a string cell is split into numbers: space or comma (a list column is read as it is)."""
    timeseries_length_limit: int = Field(256, gt=0)
    """Longer series are cut to this many steps. Series are padded to the longest training series,
    at most this."""
    padding_value: float = 0.0
    """The value of padded steps, and of steps that are not finite (nan, inf) inside a series."""
    padding: Literal["right", "left"] = "right"
    """Which side of a short series the padding goes."""
    fill_value: str = ""
    """The series ``fill_with_const`` gives a missing cell, split by the tokenizer (empty: a series
    of padding only)."""
    window_size: int = Field(0, ge=0)
    """Ludwig's window of the previous rows' values of a number column; plait accepts only 0 (see
    the error)."""

    @field_validator("tokenizer")
    @classmethod
    def _series_tokenizer(cls, value: str) -> str:
        if value not in SERIES_TOKENIZERS:
            raise ValueError(f"got {shown(value)}; a series is split into numbers by {' or '.join(SERIES_TOKENIZERS)} "
                             f"(a list column is read as it is)")
        return value

    @field_validator("window_size")
    @classmethod
    def _no_window(cls, value: int) -> int:
        if value:
            raise ValueError(f"got {value}; plait does not build a series from the previous rows of a number column: "
                             f"that depends on the row order, which partitions and prediction chunks do not keep, so "
                             f"engines would disagree. Put each row's series in one column (a list of numbers, or a "
                             f"string of them: its last {value} values), and leave window_size at 0")
        return value

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "drop_row"))
        separator = "," if self.tokenizer == "comma" else None
        try:
            [float(x) for x in self.fill_value.split(separator) if x.strip()]
        except ValueError:
            raise field_error("fill_value", f"got {shown(self.fill_value)}; give numbers split as the tokenizer "
                                            f"({self.tokenizer}) splits them, such as '0 0.5 1', or '' (padding "
                                            f"only)") from None
        return self


class TimeseriesOutputPreprocessing(TimeseriesPreprocessing):
    horizon: int = Field(0, ge=0)
    """Ludwig's forecasting horizon, which builds each row's future series from the following rows
    of a number column; plait accepts only 0: each row's output column holds its future series."""

    @field_validator("horizon")
    @classmethod
    def _no_horizon(cls, value: int) -> int:
        if value:
            raise ValueError(f"got {value}; plait does not build a series from the following rows of a column: that "
                             f"depends on the row order, which partitions and prediction chunks do not keep. Put each "
                             f"row's next {value} values in the output column (a list of numbers, or a string of "
                             f"them), and leave horizon at 0")
        return value


AUDIO_FEATURES = Literal["fbank", "group_delay", "raw", "stft", "stft_phase"]


class FilePreprocessing(FeaturePreprocessing):
    """What audio and image features share: a file per row, decoded once while preprocessing;
    Ludwig's settings of when files are read are accepted and have no effect."""

    in_memory: bool = True
    """Ludwig's choice of reading files while training; accepted, no effect: plait decodes every
    file once, while preprocessing, and caches the result (Ludwig's eager mode)."""
    mode: Literal["eager", "lazy", "lazy_cached"] = "lazy"
    """Ludwig's decoding schedule; accepted, no effect (plait always decodes while preprocessing)."""
    prefetch_size: int | None = Field(None, ge=0)
    """Ludwig's batches decoded ahead; accepted, no effect."""
    lazy_cache_dir: str | None = None
    """Ludwig's folder for decoded in-memory files; accepted, no effect."""

    @model_validator(mode="after")
    def _strategy(self):
        self.check_strategy(("fill_with_const", "drop_row"))
        return self


class AudioPreprocessing(FilePreprocessing):
    """WAV or FLAC files (a path per row, or the file's bytes), as features per time window."""

    missing_value_strategy: MissingValueStrategy = Field("fill_with_const", json_schema_extra={LUDWIG_DEFAULT: "bfill"})
    """fill_with_const: a missing file reads as a clip without frames (padding only, which the
    encoders leave out); drop_row. Ludwig's default, bfill, is refused (see the error)."""
    fill_value: Annotated[float | None, ludwig_only(
        None, instead="a missing file reads as a clip without frames")] = None
    """Ludwig's number for a missing file; plait accepts only null."""
    audio_file_length_limit_in_s: float = Field(7.5, gt=0)
    """Longer files are cut to this many seconds. Clips are padded to the longest training file,
    at most this."""
    padding_value: float = 0.0
    """The value of the features of padded frames."""
    norm: Literal["per_file"] | None = None
    """per_file: each feature scaled to mean 0 and standard deviation 1 over the file's frames; null: none."""
    type: AUDIO_FEATURES = "fbank"
    """Features per window: fbank (log mel filterbank energies, num_filter_bands per window), stft
    (spectrum magnitudes), stft_phase (phases, then magnitudes), group_delay, or raw (the samples,
    one per step)."""
    window_length_in_s: float = Field(0.04, gt=0)
    """Length of a window (unused by raw)."""
    window_shift_in_s: float = Field(0.02, gt=0)
    """Step between the starts of two windows (unused by raw)."""
    num_fft_points: int | None = Field(None, gt=0)
    """Points of each window's Fourier transform, at least its samples; null: its samples."""
    window_type: Literal["bartlett", "blackman", "hamming", "hann"] = "hamming"
    """The window each frame is weighted with before its Fourier transform."""
    num_filter_bands: int = Field(80, gt=0)
    """Mel filters of fbank (its features per window)."""


IMAGE_STANDARDIZATIONS = Literal["imagenet1k"]


class ImagePreprocessing(FilePreprocessing):
    """Image files (a path per row: relative to the dataset's folder, absolute, or an fsspec URL),
    the files' bytes (a binary column), or arrays; decoded, converted to ``num_channels`` and
    resized once, while preprocessing, and cached as fixed-size uint8 tensors."""

    missing_value_strategy: MissingValueStrategy = Field("fill_with_const", json_schema_extra={LUDWIG_DEFAULT: "bfill"})
    """For an empty cell: fill_with_const (an image of ``fill_value`` in every pixel) or drop_row.
    A path whose file is missing or empty is dropped with drop_row, and is an error otherwise (an
    image that cannot be read is not quietly replaced). Ludwig's default, bfill, is refused."""
    fill_value: float | None = Field(None, ge=0, le=255)
    """The pixel value (0-255, every channel) of a missing image; null: 0."""
    computed_fill_value: Annotated[float | None, ludwig_only(None, instead=COMPUTED_FIELD_NOTE)] = None
    """Computed by Ludwig; plait accepts only null."""
    height: int | None = Field(None, gt=0)
    """Height the images are resized to; null: inferred (``infer_image_dimensions``), or the first image's."""
    width: int | None = Field(None, gt=0)
    """Width the images are resized to; null: inferred (``infer_image_dimensions``), or the first image's."""
    num_channels: int | None = Field(None, ge=1, le=4)
    """1 (grayscale), 2 (grayscale and alpha), 3 (RGB) or 4 (RGBA): every image is converted to it;
    null: inferred from a sample of the training images (``infer_image_num_channels``)."""
    resize_method: Literal["interpolate", "crop_or_pad"] = "interpolate"
    """interpolate: scaled to the size (bilinear, antialiased); crop_or_pad: cut or padded around the
    centre (padding repeats the edge pixels)."""
    infer_image_num_channels: bool = True
    """Without ``num_channels``: use the channels most of the sampled training images have (RGB on a tie)."""
    infer_image_dimensions: bool = True
    """Without ``height`` and ``width``: use the mean size of the sampled training images, at most
    ``infer_image_max_height`` by ``infer_image_max_width``. false: the first training image's size,
    and an image of another size is an error."""
    infer_image_max_height: int = Field(256, gt=0)
    """Largest inferred height."""
    infer_image_max_width: int = Field(256, gt=0)
    """Largest inferred width."""
    infer_image_sample_size: int = Field(100, gt=0)
    """How many training images (the first, in row order) the inferred size and channels come from."""
    standardize_image: IMAGE_STANDARDIZATIONS | None = None
    """imagenet1k: each channel minus ImageNet's mean, over its standard deviation (what pretrained
    torchvision encoders expect; RGB images only). null: pixel values scaled to [0, 1]."""
    requires_equal_dimensions: bool = False
    """Square images: height and width both become the smaller of the two (as Ludwig does for encoders
    that need square inputs)."""
    num_processes: int = Field(1, gt=0)
    """Ludwig's decoding processes. plait decodes on every core a preprocessing task may use
    (OMP_NUM_THREADS where set, as Ray sets it for its tasks), or on this many if more: in forked
    processes, or in threads within a Ray process, where forking is unsafe."""
    num_classes: int | None = Field(None, ge=2)
    """Image outputs (segmentation masks): how many classes their pixels have; null: inferred from
    the training masks' distinct pixel values. Unused by inputs."""
    infer_image_num_classes: bool = False
    """Ludwig's switch for inferring num_classes from a sample; plait counts the distinct pixel
    values of every training mask when num_classes is null (an exact count, on every engine)."""


PREPROCESSING_BY_TYPE: dict[str, type[FeaturePreprocessing]] = {
    "binary": BinaryPreprocessing,
    "number": NumberPreprocessing,
    "category": CategoryPreprocessing,
    "text": TextPreprocessing,
    "set": SetPreprocessing,
    "vector": VectorPreprocessing,
    "timeseries": TimeseriesPreprocessing,
    "audio": AudioPreprocessing,
    "image": ImagePreprocessing,
    "sequence": SequencePreprocessing,
    "category_distribution": CategoryDistributionPreprocessing,
    "date": DatePreprocessing,
    "h3": H3Preprocessing,
    "bag": BagPreprocessing,
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


Probabilities = Annotated[list[float], AfterValidator(_probabilities)]


class RandomSplit(StrictModel):
    type: Literal["random"] = "random"
    probabilities: Probabilities = [0.7, 0.1, 0.2]
    """Fractions of rows for training, validation and test. Seeded by the run's random seed."""


class FixedSplit(StrictModel):
    type: Literal["fixed"] = "fixed"
    column: str = "split"
    """A column holding 0/1/2 or training/validation/test for each row."""


class StratifySplit(StrictModel):
    type: Literal["stratify"] = "stratify"
    column: str
    """Rows are split so that every value of this column keeps its share in each split."""
    probabilities: Probabilities = [0.7, 0.1, 0.2]


class DatetimeSplit(StrictModel):
    """Oldest rows for training, then validation, newest for test: a model is checked on a future
    it has not seen."""

    type: Literal["datetime"] = "datetime"
    column: str
    """A column of dates or times (a date or timestamp type, or text such as 2024-05-01 12:00)."""
    probabilities: Probabilities = [0.7, 0.1, 0.2]
    """Fractions of rows, in time order, for training, validation and test (ties in time are
    ordered by row)."""


class HashSplit(StrictModel):
    """Each row's split follows from a hash of its value in ``column`` (an id): a row keeps its
    split when rows are added, and rows with the same id share one."""

    type: Literal["hash"] = "hash"
    column: str
    """The column whose value (say, a user id) decides each row's split."""
    probabilities: Probabilities = [0.7, 0.1, 0.2]
    """Expected fractions of distinct values for training, validation and test; not seeded."""


class KFoldSplit(StrictModel):
    """One fold of k as the test rows, the others for training (no validation rows, as in Ludwig's
    k-fold): each row's fold is drawn by a seeded hash of its row number, so every backend makes
    the same folds. What ``plait experiment --k_fold`` gives each fold's run."""

    type: Literal["kfold"] = "kfold"
    folds: int = Field(ge=2)
    """How many folds the rows are dealt into."""
    fold: int = Field(ge=0)
    """Which of them (from 0) is the test set."""

    @model_validator(mode="after")
    def _fold_exists(self):
        if self.fold >= self.folds:
            raise field_error("fold", f"is {self.fold}, but there are {self.folds} folds (0 to {self.folds - 1})")
        return self


SplitConfig = Annotated[Union[RandomSplit, FixedSplit, StratifySplit, DatetimeSplit, HashSplit, KFoldSplit],
                        Field(discriminator="type")]

BALANCING_KEYS = ("oversample_minority", "undersample_majority")
"""The settings that resample the training split (Ludwig's class balancing)."""


class GlobalPreprocessing(StrictModel):
    split: SplitConfig = Field(default_factory=RandomSplit)
    """How the dataset is split into training, validation and test sets."""
    sample_ratio: float = Field(1.0, gt=0, le=1)
    """Keep this fraction of rows (seeded), for quick experiments on big data."""
    sample_size: int | None = Field(None, ge=0)
    """Keep exactly this many rows (seeded; all of them when the data has fewer). Not together
    with a sample_ratio below 1."""
    oversample_minority: float | None = None
    """Repeat training rows of the rarer class of the binary output until it has this many rows
    per row of the commoner class (0.5: one to two), within one row: every rare row the same number
    of times, and a seeded choice of them once more. Only the training split is resampled; only
    with one output feature, a binary one; at most 1; null or 0: off. A split that already has
    that ratio is left as it is."""
    undersample_majority: float | None = None
    """Keep a seeded choice of the training rows of the commoner class of the binary output, so
    that the rarer class has this many rows per kept row (0.5: one to two), within one row. Only
    the training split is resampled; only with one output feature, a binary one; at most 1; not
    together with oversample_minority; null or 0: off. A split that already has that ratio is left
    as it is."""
    global_max_sequence_length: Annotated[int | None, ludwig_only(
        None, instead="it applies to LLM models; use preprocessing.max_sequence_length of each text feature")] = None
    """Ludwig's cap on an LLM's merged input and target; plait accepts only null."""
    binary: BinaryPreprocessing | None = None
    number: NumberPreprocessing | None = None
    category: CategoryPreprocessing | None = None
    text: TextPreprocessing | None = None
    set: SetPreprocessing | None = None
    vector: VectorPreprocessing | None = None
    timeseries: TimeseriesPreprocessing | None = None
    audio: AudioPreprocessing | None = None
    image: ImagePreprocessing | None = None
    date: DatePreprocessing | None = None
    h3: H3Preprocessing | None = None
    bag: BagPreprocessing | None = None

    @field_validator("split", mode="before")
    @classmethod
    def _default_split_type(cls, value):
        if isinstance(value, dict) and "type" not in value:
            return {"type": "random", **value}
        return value

    @field_validator(*BALANCING_KEYS)
    @classmethod
    def _a_class_ratio(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= 1:
            raise ValueError(f"got {value}; give the share of rare-class rows per common-class row wanted in "
                             f"the training split, from 0 to 1 (1: as many of each; null or 0: off)")
        return value

    @property
    def balancing(self) -> dict[str, float]:
        """The class-balancing setting in effect, as {key: ratio}; empty when off (null or 0,
        which Ludwig also reads as off)."""
        return {key: getattr(self, key) for key in BALANCING_KEYS if getattr(self, key)}

    def balancing_target_problem(self, output_types: list[str]) -> tuple[str, str] | None:
        """(key, what is wrong) when class balancing is set without exactly one output, a binary
        one (its two classes are the ones balanced); None when all is well."""
        if not self.balancing or output_types == ["binary"]:
            return None
        key = next(iter(self.balancing))
        return key, (f"got {self.balancing[key]} with output features of type {', '.join(output_types)}; class "
                     f"balancing needs exactly one output feature, a binary one. Set it to null, or weight the "
                     f"classes in the loss instead (loss.positive_class_weight of a binary output, "
                     f"loss.class_weights of a category output)")

    @model_validator(mode="after")
    def _one_balancing(self):
        if len(self.balancing) > 1:
            raise field_error("undersample_majority", f"got {self.undersample_majority} with oversample_minority "
                                                      f"{self.oversample_minority}; give one of them (oversampling "
                                                      f"repeats rare rows, undersampling drops common ones)")
        return self

    @model_validator(mode="after")
    def _one_sampling(self):
        if self.sample_size is not None and self.sample_ratio < 1:
            raise field_error("sample_size", f"got {self.sample_size} with sample_ratio {self.sample_ratio}; "
                                             f"give one of them (sample_size keeps a number of rows, sample_ratio a share)")
        return self
