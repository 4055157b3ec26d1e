"""Audio files read with soundfile, and Ludwig's audio features computed from them with torch:
one file at a time, all of its windows at once.

soundfile and torch are imported when a file is read, not with plait's preprocessing modules:
soundfile is the optional ``audio`` extra, and ``plait --help`` imports no torch.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
from dataclasses import dataclass

import numpy as np

from plait.errors import BackendError
from plait.features.files import is_url

PRE_EMPHASIS = 0.97
"""Ludwig's filter y[t] = x[t] - 0.97 x[t-1] before the Fourier transforms."""
LOG_FLOOR = 1e-10


class UnreadableAudio(Exception):
    """A file that soundfile cannot open or decode; the message says why."""


def _soundfile():
    try:
        import soundfile
    except ImportError:
        raise BackendError("audio features need `pip install plait[audio]` (soundfile is not installed)") from None
    return soundfile


def _opened(source: str | bytes):
    """A file object for a path (local, or an fsspec URL) or for a file's bytes."""
    if isinstance(source, bytes):
        return io.BytesIO(source)
    import fsspec

    try:
        return fsspec.open(source, "rb").open()
    except FileNotFoundError:
        raise UnreadableAudio("no such file") from None
    except OSError as exc:
        raise UnreadableAudio(str(exc) or type(exc).__name__) from None


def _readable(source: str | bytes):
    """What soundfile reads a file from: a local file's path, which libsndfile opens and reads in
    C (two to three times faster than through a Python file object, which it calls back for every
    block), else a file object (bytes, fsspec URLs)."""
    if isinstance(source, bytes) or is_url(source):
        return _opened(source)
    path = os.path.expanduser(source)  # as fsspec reads ~
    try:
        open(path, "rb").close()  # Python's words for a missing or unreadable file, as for a URL
    except FileNotFoundError:
        raise UnreadableAudio("no such file") from None
    except OSError as exc:
        raise UnreadableAudio(str(exc) or type(exc).__name__) from None
    return contextlib.nullcontext(path)


def header(source: str | bytes) -> tuple[int, int]:
    """(sample rate, samples per channel) of a file, from its header alone."""
    sf = _soundfile()
    with _readable(source) as handle:
        try:
            info = sf.info(handle)
        except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
            raise UnreadableAudio(_reason(exc)) from None
    return int(info.samplerate), int(info.frames)


def read_mono(source: str | bytes, samples: int) -> tuple[np.ndarray, int]:
    """The first ``samples`` samples of a file, its channels averaged, and its sample rate."""
    sf = _soundfile()
    with _readable(source) as handle:
        try:
            data, rate = sf.read(handle, frames=samples, dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
            raise UnreadableAudio(_reason(exc)) from None
    return (data[:, 0] if data.shape[1] == 1 else data.mean(axis=1)), int(rate)  # a mean of one is that one


def _reason(exc: Exception) -> str:
    """libsndfile's own words (soundfile's message also names the file object)."""
    return str(getattr(exc, "error_string", None) or exc).rstrip(".")


@dataclass(frozen=True)
class Framing:
    """How a clip at one sample rate is cut into windows (Ludwig's framing: the last window is
    padded with zeros), and the features each window gives."""

    kind: str
    rate: int
    window: int
    shift: int
    n_fft: int
    window_type: str
    bands: int

    @classmethod
    def of(cls, preprocessing, rate: int) -> "Framing":
        window = max(1, int(rate * preprocessing.window_length_in_s))
        return cls(preprocessing.type, rate, window, max(1, int(rate * preprocessing.window_shift_in_s)),
                   preprocessing.num_fft_points or window, preprocessing.window_type, preprocessing.num_filter_bands)

    @property
    def channels(self) -> int:
        """Features per step."""
        bins = self.n_fft // 2 + 1
        return {"raw": 1, "stft": bins, "group_delay": bins, "stft_phase": 2 * bins, "fbank": self.bands}[self.kind]

    def steps(self, samples: int) -> int:
        """Steps of a clip of this many samples (raw: one per sample)."""
        if self.kind == "raw":
            return max(1, samples)
        return max(1, math.ceil((samples - self.window) / self.shift + 1))

    def samples_for(self, steps: int) -> int:
        """Samples that the first ``steps`` steps read."""
        return steps if self.kind == "raw" else (steps - 1) * self.shift + self.window

    def features(self, samples: np.ndarray, per_file_norm: bool):
        """[steps, channels] float32 torch tensor of one clip's samples."""
        import torch

        x = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
        out = x.unsqueeze(1) if self.kind == "raw" else self._spectral(x)
        if per_file_norm:  # a clip of one step has no spread: divided by the floor alone
            spread = out.std(dim=0, correction=1 if len(out) > 1 else 0)
            out = (out - out.mean(dim=0)) / (spread + LOG_FLOOR)
        return out

    def _spectral(self, x):
        import torch

        length, steps = len(x), self.steps(len(x))
        x = torch.cat([x[:1], x[1:] - PRE_EMPHASIS * x[:-1]])
        x = torch.nn.functional.pad(x, (0, max(0, self.samples_for(steps) - length)))
        windows = x.unfold(0, self.window, self.shift)[:steps]  # [steps, window]
        if self.kind == "fbank":  # Ludwig centres each window on the mean of its real (unpadded) samples
            real = (torch.arange(steps).unsqueeze(1) * self.shift + torch.arange(self.window)) < length
            mean = (windows * real).sum(1, keepdim=True) / real.sum(1, keepdim=True).clamp(min=1)
            windows = (windows - mean) * real
        weights = _window(self.window_type, self.window)
        spectrum = torch.fft.rfft(windows * weights, n=self.n_fft)
        if self.kind == "stft":
            return spectrum.abs()
        if self.kind == "stft_phase":
            return torch.cat([spectrum.angle(), spectrum.abs()], dim=1)
        if self.kind == "group_delay":
            ramp = torch.fft.rfft(windows * weights * torch.arange(self.window), n=self.n_fft)
            return (spectrum.real * ramp.real + spectrum.imag * ramp.imag) / (spectrum.abs() ** 2 + LOG_FLOOR)
        power = spectrum.abs() ** 2
        return torch.log(power @ _mel_filters(self.rate, self.n_fft, self.bands).T + LOG_FLOOR)


@functools.lru_cache(maxsize=16)
def _window(kind: str, length: int):
    """Ludwig's symmetric windows, computed in float64 as scipy's are (once: every file of a
    column uses the same one; callers never write into it)."""
    import torch

    make = {"hamming": torch.hamming_window, "hann": torch.hann_window, "blackman": torch.blackman_window,
            "bartlett": torch.bartlett_window}[kind]
    return make(length, periodic=False, dtype=torch.float64).float()


@functools.lru_cache(maxsize=16)
def _mel_filters(rate: int, n_fft: int, bands: int):
    """[bands, n_fft // 2 + 1] triangular filters, evenly spaced on the mel scale from 0 Hz to
    half the sample rate, their edges on whole Fourier bins (Ludwig's filterbank)."""
    import torch

    top = 2595.0 * math.log10(1 + int(rate / 2) / 700.0)
    hertz = 700.0 * (10 ** (torch.linspace(0, top, bands + 2, dtype=torch.float64) / 2595.0) - 1)
    edges = torch.floor((n_fft + 1) / rate * hertz)
    low, centre, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    bins = torch.arange(n_fft // 2 + 1, dtype=torch.float64)
    rising = torch.where((bins >= low) & (bins < centre), (bins - low) / (centre - low).clamp(min=1), 0.0)
    falling = torch.where((bins >= centre) & (bins < high), (high - bins) / (high - centre).clamp(min=1), 0.0)
    return (rising + falling).float()
