"""Preprocessing throughput by feature type: ``preprocess.py --types`` (issue #18).

For each type, a seeded synthetic column is preprocessed twice, in this process, on one partition:

* plait: the processor that plait builds for a one-feature config
  (``processors_for(load_config(config))``) runs ``prepare``, ``partial_stats``, ``finalize`` and
  ``transform`` on the whole column, the column handed over as the engines hand it (a table's
  column);
* baseline: a hand-written implementation with numpy and pyarrow.compute that knows the data's
  form and gives the same model-ready column (the same vocabulary, ids, padding and fill values),
  checked equal to plait's after the runs (audio within float tolerance: numpy's FFT against
  torch's).

Each side runs ``--repeat`` times, the two alternating so that other work on the machine slows
both alike, after an untimed warm-up on a slice; the best time counts. Both run on one core
(``preprocess.py`` sets OMP, OpenBLAS and MKL to one thread unless the environment says
otherwise), as one partition does when an engine spreads partitions over the cores.

Audio is counted in files: plait's processor against a plain loop that reads each file with
``soundfile.read`` and computes the same log mel filterbank with numpy. The WAV files (1 s at
16 kHz, tones in noise) are written once into ``benchmarks/data/``.

Each type's data comes from ``default_rng([seed, crc32(type)])``, so a subset of types
(``--types date,h3``) reads the same data as the full run.
"""

from __future__ import annotations

import functools
import os
import time
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import preprocess as synthetic  # benchmarks/preprocess.py: the text generator and the report

BAR = 0.7
"""Issue #18: plait at least 0.7 of the hand-written baseline's throughput."""
MISSING = 0.01
"""Share of missing cells in the inputs (outputs drop such rows before preprocessing)."""
AUDIO_RATE, AUDIO_SECONDS = 16_000, 1.0
GENERATOR_VERSION = 1  # bump when the generated data changes, so old audio files are not re-used


@dataclass(frozen=True)
class Case:
    """One feature type measured: its feature config, data and baseline."""

    name: str
    feature: dict
    output: bool
    generate: Callable  # (rng, rows) -> pa.Array
    baseline: Callable  # (column) -> pa.Array, plait's model-ready column
    unit: str = "rows"


# Data -----------------------------------------------------------------------------------------


def _missing(rng, rows: int) -> np.ndarray:
    return rng.random(rows) < MISSING


def _joined(rng, rows: int, words: pa.Array, fewest: int, most: int, missing: bool = True) -> pa.Array:
    """Rows of ``fewest``-``most`` space-separated words, Zipf-ish frequencies."""
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    counts = rng.integers(fewest, most + 1, rows)
    tokens = words.take(pa.array(rng.choice(len(words), size=int(counts.sum()), p=weights / weights.sum())))
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    texts = pc.binary_join(pa.ListArray.from_arrays(offsets, tokens), " ")
    return pc.if_else(pa.array(_missing(rng, rows)), pa.scalar(None, pa.string()), texts) if missing else texts


def _numbers_joined(values: np.ndarray, counts: np.ndarray) -> pa.Array:
    """Each row's numbers as one space-separated string (Arrow's shortest float text)."""
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, pa.array(values).cast(pa.string())), " ")


def sequence_data(rng, rows: int) -> pa.Array:
    return _joined(rng, rows, synthetic._vocabulary(rng), 5, 30)


def text_data(rng, rows: int) -> pa.Array:
    """The main benchmark's text column: punctuation, capitals, some non-ASCII words."""
    return synthetic._text(rng, rows, synthetic._vocabulary(rng))


def text_output_data(rng, rows: int) -> pa.Array:
    return pc.drop_null(text_data(rng, rows))  # as the rows of a missing output are dropped


def bag_data(rng, rows: int) -> pa.Array:
    return _joined(rng, rows, synthetic._vocabulary(rng)[:1000], 3, 12)


def date_data(rng, rows: int) -> pa.Array:
    """ISO date-times between 1990 and 2030."""
    seconds = rng.integers(631152000, 1924991999, rows)
    times = pa.array(seconds, pa.timestamp("s"), mask=_missing(rng, rows))
    return pc.strftime(times, format="%Y-%m-%d %H:%M:%S")


def h3_data(rng, rows: int) -> pa.Array:
    """Valid H3 cell indexes (mode 1) of resolutions 0-15, as int64."""
    resolution = rng.integers(0, 16, rows).astype(np.uint64)
    digits = rng.integers(0, 7, (rows, 15)).astype(np.uint64)
    digits[np.arange(1, 16)[None, :] > resolution[:, None]] = 7
    values = (np.uint64(1) << np.uint64(59)) | (resolution << np.uint64(52))
    values |= rng.integers(0, 122, rows).astype(np.uint64) << np.uint64(45)
    values |= (digits << (np.uint64(42) - np.uint64(3) * np.arange(15, dtype=np.uint64))).sum(1, dtype=np.uint64)
    return pa.array(values.view(np.int64), pa.int64(), mask=_missing(rng, rows))


def timeseries_data(rng, rows: int) -> pa.Array:
    """Series of 10-60 numbers (3 decimals) as space-separated text."""
    counts = rng.integers(10, 61, rows)
    series = _numbers_joined(np.round(rng.normal(0, 2, int(counts.sum())), 3), counts)
    return pc.if_else(pa.array(_missing(rng, rows)), pa.scalar(None, pa.string()), series)


VECTOR_SIZE, CLASSES = 16, 5


def vector_data(rng, rows: int) -> pa.Array:
    return _numbers_joined(np.round(rng.normal(0, 1, rows * VECTOR_SIZE), 4), np.full(rows, VECTOR_SIZE))


def distribution_data(rng, rows: int) -> pa.Array:
    return _numbers_joined(np.round(rng.dirichlet(np.ones(CLASSES), rows).reshape(-1), 4), np.full(rows, CLASSES))


def audio_files(files: int, seed: int) -> pa.Array:
    """Paths of ``files`` WAV files, written once (a tone of 100-2,000 Hz in noise each)."""
    import soundfile

    folder = synthetic.DATA_DIR / f"audio-v{GENERATOR_VERSION}-f{files}-s{seed}"
    paths = [folder / f"clip-{i:05d}.wav" for i in range(files)]
    if not folder.exists():
        rng = np.random.default_rng([seed, zlib.crc32(b"audio")])
        tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        t = np.arange(int(AUDIO_RATE * AUDIO_SECONDS)) / AUDIO_RATE
        for path in paths:
            clip = 0.3 * np.sin(2 * np.pi * rng.uniform(100, 2000) * t) + 0.05 * rng.normal(size=t.size)
            soundfile.write(tmp / path.name, clip.astype(np.float32), AUDIO_RATE, subtype="PCM_16")
        tmp.rename(folder)
    return pa.array([str(p) for p in paths], pa.string())


# Baselines ------------------------------------------------------------------------------------
# Written for the data above (valid, ASCII whitespace, no series over the length limit); each
# fits what the output needs from the whole column, then transforms it.


def _most_common(tokens: pa.Array, limit: int | None) -> pa.Array:
    """The most frequent tokens, ties by the token (as plait orders a vocabulary)."""
    counts = pc.value_counts(tokens).flatten()
    table = pa.table({"token": counts[0], "count": counts[1]}).sort_by([("count", "descending"), ("token", "ascending")])
    return table["token"].combine_chunks()[:limit]


def _lists(values: np.ndarray, lengths: np.ndarray, kind: pa.DataType = pa.int32()) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, kind))


def _ids(tokens: pa.ListArray, specials: list[str], limit: int | None, unknown: int) -> tuple[np.ndarray, np.ndarray]:
    """(vocabulary ids of every token, tokens per row: none in a missing one), the vocabulary
    fitted on ``tokens``."""
    flat = pc.list_flatten(tokens)
    vocabulary = pa.concat_arrays([pa.array(specials, pa.string()), _most_common(flat, limit)])
    ids = pc.fill_null(pc.index_in(flat, value_set=vocabulary), unknown).to_numpy().astype(np.int32)
    return ids, pc.list_value_length(tokens).fill_null(0).to_numpy()


def sequence_baseline(column: pa.Array) -> pa.Array:
    tokens = pc.utf8_split_whitespace(column)
    ids, lengths = _ids(tokens, ["<PAD>", "<UNK>"], 20000, 1)
    return _lists(ids, lengths)  # no row over max_sequence_length (256): nothing to cut


def _punct_split(column: pa.Array) -> pa.ListArray:
    """space_punct: every character that is no letter, digit, _ or space a token of its own."""
    spaced = pc.replace_substring_regex(column, r"([^\p{L}\p{N}_\s])", r" \1 ")
    return pc.utf8_split_whitespace(pc.utf8_trim_whitespace(spaced))


def text_baseline(column: pa.Array) -> pa.Array:
    ids, lengths = _ids(_punct_split(column), ["<PAD>", "<UNK>"], 20000, 1)
    return _lists(ids, lengths)


def text_output_baseline(column: pa.Array) -> pa.Array:
    """A generated output: each row's ids, then the stop token (3)."""
    ids, lengths = _ids(_punct_split(column), ["<PAD>", "<UNK>", "<SOS>", "<EOS>"], 20000, 1)
    out = np.full(ids.size + lengths.size, 3, dtype=np.int32)
    out[np.arange(ids.size) + np.repeat(np.arange(lengths.size), lengths)] = ids
    return _lists(out, lengths + 1)


def bag_baseline(column: pa.Array) -> pa.Array:
    """Ids of every token (the unknown token, 0, for a missing cell, as fill_value <UNK> gives)."""
    tokens = pc.utf8_split_whitespace(pc.fill_null(column, "<UNK>"))
    flat = pc.list_flatten(tokens)
    vocabulary = pa.concat_arrays([pa.array(["<UNK>"]), _most_common(pc.filter(flat, pc.not_equal(flat, "<UNK>")), 10000)])
    ids = pc.fill_null(pc.index_in(flat, value_set=vocabulary), 0).to_numpy().astype(np.int32)
    return _lists(ids, pc.list_value_length(tokens).to_numpy())


def date_baseline(column: pa.Array) -> pa.Array:
    """Nine int32 numbers per date; a missing one is 1970-01-01 00:00:00 (plait's fill)."""
    times = pc.fill_null(pc.strptime(column, format="%Y-%m-%d %H:%M:%S", unit="s"), pa.scalar(0, pa.timestamp("s")))
    parts = [pc.year, pc.month, pc.day, pc.day_of_week, pc.day_of_year, pc.hour, pc.minute, pc.second]
    matrix = np.empty((len(times), 9), dtype=np.int32)
    for i, part in enumerate(parts):
        matrix[:, i] = part(times).to_numpy()
    matrix[:, 8] = matrix[:, 5] * 3600 + matrix[:, 6] * 60 + matrix[:, 7]
    return _fixed(matrix, pa.int32())


H3_FILL = 576495936675512319
_H3_FIELDS = [(59, 0xF), (56, 0x7), (52, 0xF), (45, 0x7F)] + [(45 - 3 * i, 0x7) for i in range(1, 16)]


def h3_baseline(column: pa.Array) -> pa.Array:
    """Mode, edge, resolution, base cell and 15 digits, by bit shifts (missing: Ludwig's cell),
    each written straight into a uint8 matrix (twice as fast as shifting a [rows, 19] broadcast),
    after checking that every value is a valid H3 cell, as plait must (it names a bad index)."""
    bits = pc.fill_null(column, H3_FILL).to_numpy().view(np.uint64)
    _check_h3_cells(bits)
    matrix = np.empty((len(bits), len(_H3_FIELDS)), dtype=np.uint8)
    for j, (shift, mask) in enumerate(_H3_FIELDS):
        matrix[:, j] = (bits >> np.uint64(shift)) & np.uint64(mask)
    return _fixed(matrix, pa.uint8())


_LOW_BITS = np.uint64(sum(1 << 3 * k for k in range(15)))


def _check_h3_cells(bits: np.ndarray) -> None:
    """Every value an H3 cell: top bit clear, mode 1, no edge bits, base cell at most 121, digits
    within the resolution not 7 and those past it 7 (bit-parallel over the 15 digits)."""
    header = bits >> np.uint64(52)  # reserved bit, mode, edge and resolution
    resolution = header & np.uint64(0xF)
    ok = (header >> np.uint64(4)) == np.uint64(0b0001000)  # reserved 0, mode 1, edge 0
    ok &= ((bits >> np.uint64(45)) & np.uint64(0x7F)) <= np.uint64(121)
    digits = bits & np.uint64((1 << 45) - 1)
    sevens = digits & (digits >> np.uint64(1)) & (digits >> np.uint64(2)) & _LOW_BITS
    past = _LOW_BITS & ((np.uint64(1) << (np.uint64(3) * (np.uint64(15) - resolution))) - np.uint64(1))
    ok &= sevens == past
    if not ok.all():
        raise ValueError(f"{int((~ok).sum())} values are no H3 cell")


def timeseries_baseline(column: pa.Array) -> pa.Array:
    """Each row's numbers as float32 (the batches pad them); missing: no numbers."""
    tokens = pc.utf8_split_whitespace(column)
    values = pc.list_flatten(tokens).cast(pa.float64()).to_numpy().astype(np.float32)
    lengths = pc.list_value_length(tokens).fill_null(0).to_numpy()
    return _lists(values, lengths, pa.float32())


def _vectors(column: pa.Array, size: int) -> np.ndarray:
    values = pc.list_flatten(pc.utf8_split_whitespace(column)).cast(pa.float64()).to_numpy()
    return values.astype(np.float32).reshape(-1, size)


def vector_baseline(column: pa.Array) -> pa.Array:
    return _fixed(_vectors(column, VECTOR_SIZE), pa.float32())


def distribution_baseline(column: pa.Array) -> pa.Array:
    matrix = _vectors(column, CLASSES)
    return _fixed(matrix / matrix.sum(axis=1, keepdims=True), pa.float32())


def _fixed(matrix: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), kind), matrix.shape[1])


def audio_baseline(column: pa.Array) -> pa.Array:
    """A plain loop: soundfile.read each file, Ludwig's fbank with numpy (40 ms hamming windows
    every 20 ms, 80 mel bands), each clip's frames flattened (the batches pad them)."""
    import soundfile

    clips = []
    for path in column.to_pylist():
        samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
        clips.append(_fbank(samples.mean(axis=1), rate))
    return _lists(np.concatenate([c.reshape(-1) for c in clips]), np.array([c.size for c in clips]), pa.float32())


def _fbank(x: np.ndarray, rate: int, bands: int = 80) -> np.ndarray:
    window, shift = int(rate * 0.04), int(rate * 0.02)
    steps = max(1, -(-(len(x) - window) // shift) + 1)
    x = np.concatenate([x[:1], x[1:] - np.float32(0.97) * x[:-1]])
    padded = np.zeros((steps - 1) * shift + window, dtype=np.float32)
    padded[: len(x)] = x[: len(padded)]
    frames = np.lib.stride_tricks.sliding_window_view(padded, window)[::shift][:steps]
    real = (np.arange(steps)[:, None] * shift + np.arange(window)) < len(x)
    frames = (frames - (frames * real).sum(1, keepdims=True) / np.maximum(real.sum(1, keepdims=True), 1)) * real
    power = np.abs(np.fft.rfft(frames * _hamming(window), n=window)) ** 2
    return np.log(power @ _mel(rate, window, bands).T + 1e-10).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _hamming(length: int) -> np.ndarray:
    return np.hamming(length).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _mel(rate: int, n_fft: int, bands: int) -> np.ndarray:
    top = 2595.0 * np.log10(1 + int(rate / 2) / 700.0)
    edges = np.floor((n_fft + 1) / rate * 700.0 * (10 ** (np.linspace(0, top, bands + 2) / 2595.0) - 1))
    low, centre, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    bins = np.arange(n_fft // 2 + 1)
    rising = np.where((bins >= low) & (bins < centre), (bins - low) / np.maximum(centre - low, 1), 0.0)
    falling = np.where((bins >= centre) & (bins < high), (high - bins) / np.maximum(high - centre, 1), 0.0)
    return (rising + falling).astype(np.float32)


CASES = [
    Case("sequence", {"type": "sequence"}, False, sequence_data, sequence_baseline),
    Case("text", {"type": "text"}, False, text_data, text_baseline),
    Case("text_output", {"type": "text"}, True, text_output_data, text_output_baseline),
    Case("bag", {"type": "bag"}, False, bag_data, bag_baseline),
    Case("date", {"type": "date"}, False, date_data, date_baseline),
    Case("h3", {"type": "h3"}, False, h3_data, h3_baseline),
    Case("timeseries", {"type": "timeseries"}, False, timeseries_data, timeseries_baseline),
    Case("vector_output", {"type": "vector"}, True, vector_data, vector_baseline),
    Case("category_distribution_output", {"type": "category_distribution"}, True, distribution_data, distribution_baseline),
    Case("audio", {"type": "audio"}, False, None, audio_baseline, unit="files"),
]
NAMES = [case.name for case in CASES]


# Measurement ----------------------------------------------------------------------------------


def processor_for(case: Case):
    """The processor plait builds for a config of this one feature (and a plain other side)."""
    from plait.config import load_config
    from plait.features import processors_for

    feature = {"name": "feature", **case.feature}
    other = {"name": "other", "type": "number"}
    config = {"input_features": [other if case.output else feature], "output_features": [feature if case.output else other]}
    return next(p for p in processors_for(load_config(config)) if p.name == "feature")


def run_plait(processor, column: pa.Array) -> pa.Array:
    """Fit and transform one partition, as the engines call the steps: the prepared column as
    a table's column."""
    prepared = pa.chunked_array([processor.prepare_raw(column)])
    metadata = processor.finalize(processor.partial_stats(prepared))
    return processor.transform(prepared, metadata)


def _timed(function, *args) -> tuple[float, object]:
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def check_same(name: str, ours: pa.Array, theirs: pa.Array) -> None:
    """The baseline's column is plait's: equal values (NaN as NaN), audio within float tolerance."""
    ours = ours.combine_chunks() if isinstance(ours, pa.ChunkedArray) else ours
    if ours.type != theirs.type or len(ours) != len(theirs):
        raise AssertionError(f"{name}: baseline gives {theirs.type} x {len(theirs)}, plait {ours.type} x {len(ours)}")
    if pa.types.is_list(ours.type) and pa.types.is_integer(ours.type.value_type):
        if not ours.equals(theirs):
            raise AssertionError(f"{name}: the baseline's token ids differ from plait's")
        return
    if pa.types.is_list(ours.type) and not ours.offsets.equals(theirs.offsets):
        raise AssertionError(f"{name}: the baseline's rows have other lengths than plait's")
    a, b = pc.list_flatten(ours).to_numpy(), pc.list_flatten(theirs).to_numpy()
    if name == "audio":
        # plait's torch FFT is float32, numpy's float64: the energies agree to 0.1%, save those
        # of near-silent bands (log energy about -22, the floor is -23), which agree to 1e-6.
        same = np.allclose(np.exp(a), np.exp(b), rtol=1e-3, atol=1e-6, equal_nan=True)
    else:
        same = np.array_equal(a, b, equal_nan=True)
    if not same:
        worst = int(np.nanargmax(np.abs(a.astype(np.float64) - b)))
        raise AssertionError(f"{name}: the baseline's values differ from plait's, such as {b[worst]} for {a[worst]}")


def measure_case(case: Case, column: pa.Array, repeat: int) -> dict:
    """Best of ``repeat`` runs of plait and of the baseline (alternating, so that other work on
    the machine slows both alike), after one untimed warm-up of each on a slice."""
    processor = processor_for(case)
    run_plait(processor, column[:64])
    case.baseline(column[:64])
    ours, theirs = [], []
    for _ in range(repeat):
        seconds, plait_out = _timed(run_plait, processor, column)
        ours.append(seconds)
        seconds, baseline_out = _timed(case.baseline, column)
        theirs.append(seconds)
    check_same(case.name, plait_out, baseline_out)
    count = len(column)
    return {
        "type": case.feature["type"], "output": case.output, "unit": case.unit, "count": count,
        "plait_best_seconds": min(ours), "baseline_best_seconds": min(theirs),
        f"plait_{case.unit}_per_s": count / min(ours), f"baseline_{case.unit}_per_s": count / min(theirs),
        "ratio": min(theirs) / min(ours), "meets_bar": min(theirs) / min(ours) >= BAR,
        "plait_seconds": ours, "baseline_seconds": theirs,
    }


def measure_types(names: list[str], rows: int, audio_files_count: int, seed: int, repeat: int) -> dict:
    """Each named type's figures, printed as they come."""
    results = {}
    for case in (c for c in CASES if c.name in names):
        if case.name == "audio":
            column = audio_files(audio_files_count, seed)
        else:
            column = case.generate(np.random.default_rng([seed, zlib.crc32(case.name.encode())]), rows)
        result = results[case.name] = measure_case(case, column, repeat)
        unit = case.unit
        print(f"{case.name:>30}: plait {result[f'plait_{unit}_per_s']:>12,.0f} {unit}/s, baseline "
              f"{result[f'baseline_{unit}_per_s']:>12,.0f} {unit}/s, ratio {result['ratio']:.2f}"
              f"{'' if result['meets_bar'] else '  (below ' + str(BAR) + ')'}")
    return results


def table(results: dict) -> str:
    """The results as a markdown table, for benchmarks/README.md."""
    lines = ["| type | rows | plait | baseline | plait / baseline |", "| --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        unit = r["unit"]
        count = f"{r['count']:,}" + (f" {unit}" if unit != "rows" else "")
        lines.append(f"| {name} | {count} | {r[f'plait_{unit}_per_s']:,.0f} {unit}/s | "
                     f"{r[f'baseline_{unit}_per_s']:,.0f} {unit}/s | {r['ratio']:.2f} |")
    return "\n".join(lines)


def run(args) -> int:
    """``preprocess.py --types``: measure, print, write the report; exit 1 when a type is below the bar."""
    names = NAMES if args.types == "all" else [n.strip() for n in args.types.split(",")]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SystemExit(f"--types: unknown {', '.join(unknown)}; choose from {', '.join(NAMES)} (or give no list: all)")
    load_before = os.getloadavg()
    results = measure_types(names, args.rows, args.audio_files, args.seed, args.repeat)
    print(table(results))
    report = {
        "benchmark": "preprocess_types",
        "rows": args.rows, "audio_files": args.audio_files, "seed": args.seed, "repeat": args.repeat, "bar": BAR,
        "threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "types": results,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "machine": synthetic.machine(),
    }
    synthetic.write_report(args.out or synthetic.OUT_DIR / "preprocess_types.json", report)
    return 0 if all(r["meets_bar"] for r in results.values()) else 1
