"""Audio features: a WAV or FLAC file per row (its path, or its bytes in a binary column),
decoded with soundfile and turned into Ludwig's features per time window (fbank, stft,
stft_phase, group_delay) or kept as samples (raw).

Clips are cut or padded to one number of steps: the longest training file's, at most
``audio_file_length_limit_in_s``. Every file must have the sample rate of the training files:
plait does not resample (a resampled clip's features would quietly differ from a recorded one's),
so a file at another rate is a DataError naming both rates. As for timeseries inputs, padded
steps are stored as NaN, which the encoder reads as ``padding_value`` and masks out.

A path is read as every file-valued feature's is (``plait.features.files``): a relative one from
the dataset's folder, locally and on Ray alike; an fsspec URL (s3://...) as given. The cache key
holds the paths, not the files: a file changed in place is not noticed until the cache is cleared.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features.audio_ops import Framing, UnreadableAudio, header, read_mono
from plait.features.files import FileFeature
from plait.features.text_ops import fixed_size_list, row_lists
from plait.utils.ragged import pad

log = logging.getLogger("plait")

LUDWIG_RATE = 16_000
"""The sample rate Ludwig assumes when it has no file to read one from."""


class AudioProcessor(FileFeature):
    type = "audio"

    def prepare(self, column: pa.Array) -> pa.Array:
        if pa.types.is_null(column.type):
            column = column.cast(pa.string())
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return self.file_paths(column)
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            return self.file_contents(column)
        raise DataError(f"audio feature {self.name!r}: column {self.column!r} has type {column.type}; give the "
                        f"paths of WAV or FLAC files (strings), or the files' bytes (a binary column)")

    def partial_stats(self, column: pa.Array) -> dict:
        rates: dict[int, str] = {}
        longest = over_limit = 0
        for source in pc.drop_null(column).to_pylist():
            rate, samples = self._header(source)
            name = _described(source)
            rates[rate] = min(rates.get(rate, name), name)  # the same example, however the rows are split
            longest = max(longest, samples)
            over_limit += samples > self._limit(rate)
        return {"rates": rates, "longest": longest, "over_limit": over_limit}

    def merge_stats(self, a: dict, b: dict) -> dict:
        rates = dict(a["rates"])
        for rate, name in b["rates"].items():
            rates[rate] = min(rates.get(rate, name), name)
        return {"rates": rates, "longest": max(a["longest"], b["longest"]),
                "over_limit": a["over_limit"] + b["over_limit"]}

    def finalize(self, stats: dict) -> dict:
        rates = sorted(stats["rates"].items())
        if len(rates) > 1:
            (rate, name), (other, other_name) = rates[:2]
            raise DataError(f"audio feature {self.name!r}: the training files of column {self.column!r} have "
                            f"different sample rates: {rate} Hz ({name}) and {other} Hz ({other_name}). plait does "
                            f"not resample; convert the files to one rate first (such as: ffmpeg -i in.wav -ar "
                            f"{rate} out.wav)")
        rate = rates[0][0] if rates else LUDWIG_RATE
        framing = self._framing(rate)
        if stats["over_limit"]:
            log.info("audio feature %r: %d training files are longer than audio_file_length_limit_in_s (%s) and "
                     "were cut to it.", self.name, stats["over_limit"], self.preprocessing.audio_file_length_limit_in_s)
        return {"sample_rate": rate, "frames": framing.steps(min(stats["longest"], self._limit(rate))),
                "channels": framing.channels, "padding_value": self.preprocessing.padding_value,
                "truncated": stats["over_limit"], "padding": "right"}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        """Each file's frames of features, flattened (frames x channels), up to ``frames``; the batches
        pad them (a model saved before frames were stored so gets them padded here, with NaN)."""
        framing = self._framing(metadata["sample_rate"])
        steps, channels = metadata["frames"], metadata["channels"]
        norm = self.preprocessing.norm == "per_file"
        rows = []
        for source in column.to_pylist():
            if source is None:  # fill_with_const: a clip of no steps (drop_row never gets here)
                rows.append(np.zeros((0, channels), np.float32))
                continue
            samples, rate = self._decoded(source, framing.samples_for(steps))
            if rate != framing.rate:
                raise DataError(f"audio feature {self.name!r}: {_described(source)} has a sample rate of {rate} Hz, "
                                f"but the model was trained on {framing.rate} Hz files. plait does not resample; "
                                f"convert it first (such as: ffmpeg -i in.wav -ar {framing.rate} out.wav)")
            rows.append(framing.features(samples, norm)[:steps].numpy().astype(np.float32))
        lengths = np.array([row.size for row in rows], dtype=np.int64)
        flat = np.concatenate([row.reshape(-1) for row in rows]) if rows else np.zeros(0, np.float32)
        if "padding" in metadata:
            return row_lists(flat, lengths, pa.float32())
        return fixed_size_list(pad(flat, lengths, steps * channels, np.nan, False, dtype=np.float32), pa.float32())

    def _framing(self, rate: int) -> Framing:
        framing = Framing.of(self.preprocessing, rate)
        if framing.kind != "raw" and framing.n_fft < framing.window:
            raise DataError(f"audio feature {self.name!r}: preprocessing.num_fft_points ({framing.n_fft}) is less "
                            f"than a window's {framing.window} samples (window_length_in_s "
                            f"{self.preprocessing.window_length_in_s} at {rate} Hz); raise it, or leave it unset")
        return framing

    def _limit(self, rate: int) -> int:
        return int(self.preprocessing.audio_file_length_limit_in_s * rate)

    def _header(self, source: str | bytes) -> tuple[int, int]:
        try:
            return header(source)
        except UnreadableAudio as exc:
            raise self._unreadable(source, exc) from None

    def _decoded(self, source: str | bytes, samples: int) -> tuple[np.ndarray, int]:
        try:
            return read_mono(source, samples)
        except UnreadableAudio as exc:
            raise self._unreadable(source, exc) from None

    def _unreadable(self, source: str | bytes, exc: UnreadableAudio) -> DataError:
        return DataError(f"audio feature {self.name!r}: cannot read {_described(source)}: {exc}. Give WAV or FLAC "
                         f"files, as paths or as the files' bytes")


def _described(source: str | bytes) -> str:
    return f"a file of {len(source)} bytes" if isinstance(source, bytes) else repr(source)
