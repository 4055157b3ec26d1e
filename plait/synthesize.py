"""Random data that fits a config, so that any config can be tried at once (Ludwig's
``synthesize_dataset``).

Every input and output feature gets a column (its ``column``, which defaults to its name) of
values its preprocessing reads as they are: numbers, booleans (or the two labels a binary's
``fallback_true_label`` implies), category words, texts and sets of words joined the way the
tokenizer splits them, vectors of ``vector_size`` numbers, dates (in ``datetime_format``), H3 cell
indexes, bags of repeating words, series of numbers (noisy lines) and the paths of short WAV
files of tones (written to the temporary folder). A fixed or hash split's column is added too.
Unlike Ludwig's, the data is learnable: each output is a noisy function of a mix of all the
inputs, so that a few epochs of training show the model learning.

The same config, row count and seed give the same data.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from plait.config import PlaitConfig, load_config
from plait.errors import UsageError

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor",
         "whiskey", "xray", "yankee", "zulu")
"""Lowercase letters only: every tokenizer keeps them whole, and lowercasing changes nothing."""

CATEGORY_VALUES = 5
TEXT_VOCABULARY = 20
TEXT_WORDS = (3, 12)
"""Words per text: at least, at most (and never more than max_sequence_length)."""
SET_ELEMENTS = 6
VECTOR_SIZE = 10
"""Ludwig's size for a vector whose preprocessing does not set vector_size."""
OUTPUT_NOISE = 0.3
"""The noise added to an output's signal, in units of the signal's standard deviation."""

SEPARATORS = {"comma": ",", "underscore": "_"}
"""How a tokenizer that does not split on spaces splits a cell (the others: on spaces)."""
WHOLE_CELL = {"untokenized", "stripped"}
"""Tokenizers that keep a cell whole: one token (a set of one element) per cell."""


def synthesize_dataset(config: str | os.PathLike | dict | PlaitConfig, rows: int, seed: int = 42) -> pd.DataFrame:
    """``rows`` rows of random data that fit ``config`` (a path, a dict or a PlaitConfig): one
    column per feature column, outputs that depend on the inputs, the same data for the same seed."""
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise UsageError(f"rows: got {rows!r}; give the number of rows, at least 1")
    config = load_config(config)
    rng = np.random.default_rng(seed)
    columns: dict[str, Any] = {}
    signals = []
    for feature in config.input_features:
        if feature.column not in columns:  # features reading the same column share its values
            values, signal = INPUTS[feature.type](feature, int(rows), rng)
            columns[feature.column] = values
            signals.append(_standardized(signal))
    for feature in config.output_features:
        mix = _mix(signals, rng, int(rows))
        columns[feature.column] = OUTPUTS[feature.type](feature, mix + OUTPUT_NOISE * rng.normal(size=int(rows)), rng)
    _add_split_column(config, columns, int(rows), rng)
    return pd.DataFrame(columns)


def write_dataset(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """``frame`` at ``path`` (a local path or an fsspec URL) as CSV, TSV or Parquet by the name's
    suffix; the file appears whole or not at all."""
    from plait.utils.fs import atomic_open, ensure_dir, resolve

    path = os.fspath(path)
    kind = next((k for k in ("csv", "tsv", "parquet") if path.lower().endswith(f".{k}")), None)
    if kind is None:
        raise UsageError(f"--output {path!r}: name a .csv, .tsv or .parquet file")
    fs, target = resolve(path)
    if "/" in target.rstrip("/"):
        ensure_dir(fs, target.rsplit("/", 1)[0])
    if kind == "parquet":
        with atomic_open(fs, target, "wb") as handle:
            frame.to_parquet(handle, index=False)
        return
    with atomic_open(fs, target, "w") as handle:
        frame.to_csv(handle, index=False, sep="\t" if kind == "tsv" else ",")


# ---- inputs: (values, signal) --------------------------------------------------------------------------

def _number(feature, rows: int, rng) -> tuple:
    values = np.round(rng.normal(size=rows), 4)
    return values, values


def _binary(feature, rows: int, rng) -> tuple:
    on = rng.random(rows) < 0.5
    return _binary_labels(feature, on), np.where(on, 1.0, -1.0)


def _category(feature, rows: int, rng) -> tuple:
    vocabulary = _vocabulary(feature, CATEGORY_VALUES)
    index = rng.integers(len(vocabulary), size=rows)
    weights = rng.normal(size=len(vocabulary))
    return np.asarray(vocabulary, dtype=object)[index], weights[index]


def _text(feature, rows: int, rng) -> tuple:
    preprocessing = feature.preprocessing
    vocabulary = _vocabulary(feature, TEXT_VOCABULARY)
    if getattr(preprocessing, "tokenizer", "space") in WHOLE_CELL:
        index = rng.integers(len(vocabulary), size=rows)
        weights = rng.normal(size=len(vocabulary))
        return np.asarray(vocabulary, dtype=object)[index], weights[index]
    longest = max(1, min(TEXT_WORDS[1], getattr(preprocessing, "max_sequence_length", None) or TEXT_WORDS[1]))
    lengths = rng.integers(min(TEXT_WORDS[0], longest), longest + 1, size=rows)
    words = rng.integers(len(vocabulary), size=(rows, longest))
    used = np.arange(longest)[None, :] < lengths[:, None]
    # The signal: how often the first two words occur, less the next two.
    signal = (used & (words < 2)).sum(1) - (used & (words >= 2) & (words < 4)).sum(1)
    separator = _separator(preprocessing)
    texts = [separator.join(vocabulary[w] for w in row[:n]) for row, n in zip(words, lengths)]
    return np.asarray(texts, dtype=object), signal.astype(float)


def _set(feature, rows: int, rng) -> tuple:
    vocabulary = _vocabulary(feature, SET_ELEMENTS)
    present = _one_or_more(rng.random((rows, len(vocabulary))) < 0.4, rng)
    signal = present[:, 0].astype(float) - present[:, min(1, len(vocabulary) - 1)]
    return _joined_sets(feature, vocabulary, present), signal


def _vector(feature, rows: int, rng) -> tuple:
    size = getattr(feature.preprocessing, "vector_size", None) or VECTOR_SIZE
    values = np.round(rng.normal(size=(rows, size)), 4)
    return np.asarray([" ".join(map(str, row)) for row in values], dtype=object), values[:, 0]


def _date(feature, rows: int, rng) -> tuple:
    """Times over four years; the signal is a weight per weekday."""
    times = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 4 * 365 * 86400, size=rows), unit="s")
    fmt = getattr(feature.preprocessing, "datetime_format", None) or "%Y-%m-%d %H:%M:%S"
    weights = rng.normal(size=7)
    return times.strftime(fmt).to_numpy(dtype=object), weights[times.dayofweek.to_numpy()]


H3_BASE_CELLS = 8
H3_RESOLUTION = 5


def _h3(feature, rows: int, rng) -> tuple:
    """Cells of resolution 5 over a few base cells; the signal is a weight per base cell."""
    base = rng.integers(H3_BASE_CELLS, size=rows).astype(np.int64) * 7  # spread over the 122 base cells
    digits = rng.integers(7, size=(rows, 15)).astype(np.int64)
    digits[:, H3_RESOLUTION:] = 7
    index = (1 << 59) | (H3_RESOLUTION << 52) | (base << 45)
    for i in range(15):
        index |= digits[:, i] << (42 - 3 * i)
    weights = rng.normal(size=H3_BASE_CELLS)
    return index, weights[base // 7]


def _bag(feature, rows: int, rng) -> tuple:
    """Texts whose words repeat; the signal is how often the first word occurs less the second."""
    vocabulary = _vocabulary(feature, TEXT_VOCABULARY)
    lengths = rng.integers(TEXT_WORDS[0], TEXT_WORDS[1] + 1, size=rows)
    words = rng.integers(len(vocabulary), size=(rows, TEXT_WORDS[1]))
    used = np.arange(TEXT_WORDS[1])[None, :] < lengths[:, None]
    signal = (used & (words == 0)).sum(1) - (used & (words == 1)).sum(1)
    separator = _separator(feature.preprocessing)
    texts = [separator.join(vocabulary[w] for w in row[:n]) for row, n in zip(words, lengths)]
    return np.asarray(texts, dtype=object), signal.astype(float)


SERIES_STEPS = (8, 16)
"""Steps per synthetic series: at least, at most (and never more than timeseries_length_limit)."""


def _timeseries(feature, rows: int, rng) -> tuple:
    """Noisy lines; the signal is the slope (how fast the series rises or falls)."""
    longest = max(1, min(SERIES_STEPS[1], feature.preprocessing.timeseries_length_limit))
    lengths = rng.integers(min(SERIES_STEPS[0], longest), longest + 1, size=rows)
    slopes = rng.normal(size=rows)
    values = np.round(slopes[:, None] * np.arange(longest) / longest + 0.2 * rng.normal(size=(rows, longest)), 4)
    separator = "," if feature.preprocessing.tokenizer == "comma" else " "
    series = [separator.join(map(str, row[:n])) for row, n in zip(values, lengths)]
    return np.asarray(series, dtype=object), slopes


AUDIO_TONES_HZ = (220.0, 440.0, 880.0, 1760.0)
AUDIO_RATE = 8000
AUDIO_SECONDS = 0.25


def _audio(feature, rows: int, rng) -> tuple:
    """Paths of a few short WAV files of pure tones (written once, in the temporary folder); the
    signal is the pitch."""
    paths = np.asarray(_tone_files(), dtype=object)
    index = rng.integers(len(AUDIO_TONES_HZ), size=rows)
    return paths[index], np.log2(AUDIO_TONES_HZ)[index]


def _tone_files() -> list[str]:
    try:
        import soundfile
    except ImportError:
        raise UsageError("synthetic audio needs `pip install plait[audio]` (soundfile is not installed)") from None

    def write(path: str, hz: float) -> None:
        seconds = np.arange(int(AUDIO_RATE * AUDIO_SECONDS)) / AUDIO_RATE
        soundfile.write(path, 0.5 * np.sin(2 * np.pi * hz * seconds), AUDIO_RATE, format="WAV")

    return _files_once("plait-synthetic-audio", {f"tone_{hz:g}hz.wav": hz for hz in AUDIO_TONES_HZ}, write)


IMAGE_LEVELS = (30, 90, 150, 210)
"""The grey levels of the synthetic images (the signal is the level)."""


def _image(feature, rows: int, rng) -> tuple:
    """Paths of a few small PNG files, each a grey level with a bright diagonal (written once, in
    the temporary folder); the signal is the level."""
    from PIL import Image

    def write(path: str, level: int) -> None:
        pixels = np.full((16, 16, 3), level, np.uint8)
        pixels[np.arange(16), np.arange(16)] = 255
        Image.fromarray(pixels).save(path, format="PNG")

    paths = np.asarray(_files_once("plait-synthetic-images", {f"grey_{v}.png": v for v in IMAGE_LEVELS}, write),
                       dtype=object)
    index = rng.integers(len(IMAGE_LEVELS), size=rows)
    return paths[index], np.asarray(IMAGE_LEVELS, dtype=float)[index] / 100


def _files_once(folder_name: str, files: dict, write) -> list[str]:
    """The files ``{name: what to write}`` in a fixed folder of the temporary directory, so that
    the same seed gives the same paths; each is written whole (to a temporary name, then renamed)
    unless it is there already."""
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), folder_name)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name, content in files.items():
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            partial = f"{path}.{os.getpid()}.tmp"
            write(partial, content)
            os.replace(partial, path)
        paths.append(path)
    return paths


INPUTS = {"number": _number, "binary": _binary, "category": _category, "text": _text, "set": _set, "vector": _vector,
          "date": _date, "h3": _h3, "bag": _bag,
          "timeseries": _timeseries, "audio": _audio, "image": _image}


# ---- outputs: values from a signal ---------------------------------------------------------------------

def _number_output(feature, signal, rng):
    return np.round(3.0 * signal + 10.0, 4)


def _binary_output(feature, signal, rng):
    return _binary_labels(feature, signal > np.median(signal))


def _category_output(feature, signal, rng):
    """Classes by quantile of the signal: about as many rows in each."""
    vocabulary = _vocabulary(feature, CATEGORY_VALUES)
    edges = np.quantile(signal, np.linspace(0, 1, len(vocabulary) + 1)[1:-1])
    return np.asarray(vocabulary, dtype=object)[np.searchsorted(edges, signal)]


def _set_output(feature, signal, rng):
    """Element j is in the set when the signal passes its own threshold: a graded, learnable set."""
    vocabulary = _vocabulary(feature, SET_ELEMENTS)
    thresholds = np.quantile(signal, np.linspace(0.2, 0.8, len(vocabulary)))
    present = _one_or_more(signal[:, None] > thresholds[None, :], rng)
    return _joined_sets(feature, vocabulary, present)


OUTPUTS = {"number": _number_output, "binary": _binary_output, "category": _category_output, "set": _set_output}


# ---- helpers -------------------------------------------------------------------------------------------

def _mix(signals: list, rng, rows: int) -> np.ndarray:
    """A random mix of the input signals, with unit variance (noise alone without inputs)."""
    if not signals:
        return rng.normal(size=rows)
    weights = rng.normal(size=len(signals))
    weights /= np.linalg.norm(weights) or 1.0
    return _standardized(np.stack(signals, axis=1) @ weights)


def _standardized(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else values - values.mean()


def _vocabulary(feature, wanted: int) -> list[str]:
    """At most ``wanted`` words, and no more than the feature's vocabulary keeps (most_common)."""
    limit = getattr(feature.preprocessing, "most_common", wanted) or wanted
    return list(WORDS[: max(2, min(wanted, limit, len(WORDS)))])


def _binary_labels(feature, on: np.ndarray) -> np.ndarray:
    """Booleans; or, when ``fallback_true_label`` names a label, that label and another."""
    true_label = getattr(feature.preprocessing, "fallback_true_label", None)
    if true_label is None:
        return np.asarray(on, dtype=bool)
    return np.where(on, str(true_label), f"not_{true_label}").astype(object)


def _separator(preprocessing) -> str:
    return SEPARATORS.get(getattr(preprocessing, "tokenizer", "space"), " ")


def _one_or_more(present: np.ndarray, rng) -> np.ndarray:
    """Sets never empty: an empty cell reads as a missing value, which an output would drop."""
    empty = ~present.any(1)
    present[empty, rng.integers(present.shape[1], size=int(empty.sum()))] = True
    return present


def _joined_sets(feature, vocabulary: list[str], present: np.ndarray) -> np.ndarray:
    if getattr(feature.preprocessing, "tokenizer", "space") in WHOLE_CELL:  # one element per cell
        return np.asarray(vocabulary, dtype=object)[present.argmax(1)]
    separator = _separator(feature.preprocessing)
    return np.asarray([separator.join(w for w, on in zip(vocabulary, row) if on) for row in present], dtype=object)


def _add_split_column(config, columns: dict, rows: int, rng) -> None:
    """The column a split reads, when no feature provides it: fixed splits get 0/1/2 (training,
    validation, test: 70/10/20), hash splits row ids, datetime splits dates, others a category."""
    split = config.preprocessing.split
    column = getattr(split, "column", None)
    if column is None or column in columns:
        return
    if split.type == "fixed":
        columns[column] = rng.choice(3, size=rows, p=[0.7, 0.1, 0.2])
    elif split.type == "hash":
        columns[column] = np.asarray([f"id{i}" for i in range(rows)], dtype=object)
    elif split.type == "datetime":
        days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 1000, size=rows), unit="D")
        columns[column] = days.strftime("%Y-%m-%d").to_numpy(dtype=object)
    else:
        columns[column] = np.asarray(WORDS[:3], dtype=object)[rng.integers(3, size=rows)]
