"""Audio inputs: WAV or FLAC files (paths or bytes) as Ludwig's features per window, padded
(NaN marks padding) or cut to the longest training file; and a model that tells tones apart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from plait.api import Model
from plait.errors import DataError

sf = pytest.importorskip("soundfile")

RATE = 8000
TARGET = {"name": "y", "type": "binary"}


def tone(path, hz: float, seconds: float, rate: int = RATE, channels: int = 1, noise: float = 0.0, seed: int = 0,
         form: str = "WAV") -> str:
    t = np.arange(int(rate * seconds)) / rate
    wave = 0.5 * np.sin(2 * np.pi * hz * t) + noise * np.random.default_rng(seed).normal(size=t.size)
    sf.write(str(path), np.stack([wave] * channels, axis=1) if channels > 1 else wave, rate, format=form)
    return str(path)


def audio(make_processor, **preprocessing):
    return make_processor("audio", preprocessing or None)


def clips(out: list, meta: dict) -> np.ndarray:
    return np.asarray(out, dtype=float).reshape(len(out), meta["frames"], meta["channels"])


def test_fbank_features_per_window_padded_to_the_longest_file(make_processor, padded_fit_transform, tmp_path):
    short, long = tone(tmp_path / "a.wav", 300, 0.1), tone(tmp_path / "b.flac", 900, 0.2, form="FLAC")
    meta, out = padded_fit_transform(audio(make_processor), [short, long])
    # 0.04 s windows every 0.02 s: 1600 samples give ceil((1600 - 320) / 160 + 1) = 9 windows.
    assert (meta["sample_rate"], meta["frames"], meta["channels"], meta["truncated"]) == (RATE, 9, 80, 0)
    features = clips(out, meta)
    assert np.isfinite(features[1]).all() and np.isfinite(features[0, :4]).all() and np.isnan(features[0, 4:]).all()
    # The louder filter bands are those around each tone.
    assert features[0, :4].mean(0).argmax() < features[1].mean(0).argmax()


def test_raw_samples_of_a_stereo_file_are_its_mean_and_the_length_limit_cuts(make_processor, padded_fit_transform, tmp_path):
    path = tmp_path / "s.wav"
    sf.write(str(path), np.stack([np.full(RATE // 10, 0.5), np.full(RATE // 10, -0.25)], axis=1), RATE)
    processor = audio(make_processor, type="raw", audio_file_length_limit_in_s=0.005)
    meta, out = padded_fit_transform(processor, [str(path)])
    assert (meta["frames"], meta["channels"], meta["truncated"]) == (40, 1, 1)
    assert np.allclose(clips(out, meta), 0.125)


def test_missing_files_have_no_frames_and_bytes_read_as_paths_do(make_processor, padded_fit_transform, padded_transform, tmp_path):
    path = tone(tmp_path / "a.wav", 440, 0.1)
    processor = audio(make_processor, type="stft", norm="per_file")
    meta, out = padded_fit_transform(processor, [path, None, ""])
    assert meta["channels"] == 161 and np.isnan(clips(out, meta)[1:]).all()
    with open(path, "rb") as handle:
        content = handle.read()
    from_bytes = padded_transform(processor, pa.array([content, None], pa.binary()), meta)
    assert np.array_equal(np.asarray(from_bytes), np.asarray(out[:2]), equal_nan=True)
    assert np.allclose(clips(out, meta)[0].mean(0), 0, atol=1e-4)  # per_file: each feature centred


def test_statistics_do_not_depend_on_partitioning(make_processor, fit, padded_transform, tmp_path):
    paths = [tone(tmp_path / f"{i}.wav", 200 + 100 * i, 0.05 + 0.03 * i) for i in range(4)] + [None]
    processor = audio(make_processor, type="group_delay", audio_file_length_limit_in_s=0.12)
    whole = fit(processor, paths)
    assert whole == fit(processor, paths[:1], paths[1:3], [], paths[3:]) and whole["truncated"] == 1
    assert np.array_equal(np.asarray(padded_transform(processor, paths, whole)),
                          np.asarray(padded_transform(processor, paths[:2], whole) + padded_transform(processor, paths[2:], whole)),
                          equal_nan=True)


def test_files_at_different_sample_rates_are_refused_naming_both(make_processor, fit, padded_transform, tmp_path):
    low, high = tone(tmp_path / "low.wav", 300, 0.1, rate=8000), tone(tmp_path / "high.wav", 300, 0.1, rate=16000)
    processor = audio(make_processor)
    with pytest.raises(DataError, match=rf"different sample rates: 8000 Hz \('{low}'\) and 16000 Hz \('{high}'\)\. "
                                        r"plait does not resample"):
        fit(processor, [low], [high, low])
    with pytest.raises(DataError, match=r"has a sample rate of 16000 Hz, but the model was trained on 8000 Hz"):
        padded_transform(processor, [high], fit(processor, [low]))


def test_fft_points_fewer_than_a_window_are_refused(make_processor, fit, tmp_path):
    with pytest.raises(DataError, match=r"num_fft_points \(64\) is less than a window's 320 samples"):
        fit(audio(make_processor, num_fft_points=64), [tone(tmp_path / "a.wav", 300, 0.1)])


def tones_frame(folder, rows: int, seed: int) -> pd.DataFrame:
    """Noisy tones of 0.1 s, low (150-400 Hz) or high (1500-3000 Hz); y: whether high."""
    rng = np.random.default_rng(seed)
    high = rng.random(rows) < 0.5
    paths = [tone(folder / f"{seed}_{i}.wav", rng.uniform(1500, 3000) if up else rng.uniform(150, 400), 0.1,
                  noise=0.1, seed=seed * 1000 + i) for i, up in enumerate(high)]
    return pd.DataFrame({"a": paths, "y": high})


def test_a_model_tells_low_tones_from_high_ones(tmp_path, one_torch_thread):
    config = {"input_features": [{"name": "a", "type": "audio", "preprocessing": {"num_filter_bands": 20},
                                  "encoder": {"type": "parallel_cnn", "num_filters": 8, "reduce_output": "mean"}}],
              "output_features": [TARGET],
              "trainer": {"epochs": 4, "batch_size": 16, "learning_rate": 0.01},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    model = Model(config)
    model.train(dataset=tones_frame(tmp_path, 120, 0), random_seed=1, progress_bar=False)
    test = tones_frame(tmp_path, 60, 1)
    accuracy = (model.predict(test).y_predictions == test.y).mean()
    assert accuracy >= 0.9, accuracy


def test_an_unreadable_file_through_the_cli_is_one_clean_error(make_config, write_config, make_dataset, cli_error,
                                                                tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....not audio")
    good = tone(tmp_path / "good.wav", 440, 0.05)
    path = make_dataset({"a": [good] * 9 + [str(bad)], "y": [True, False] * 5})
    config = write_config(make_config([{"name": "a", "type": "audio"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", path)
    assert error == (f"plait: error: audio feature 'a': cannot read '{bad}': Format not recognised. Give WAV or "
                     f"FLAC files, as paths or as the files' bytes")


def test_relative_paths_are_read_from_the_datasets_folder(make_config, tmp_path, monkeypatch):
    """As for images (and in Ludwig): not from the working directory."""
    from plait.config import load_config
    from plait.data.preprocess import preprocess

    (tmp_path / "data" / "clips").mkdir(parents=True)
    for i in range(4):
        tone(tmp_path / "data" / "clips" / f"{i}.wav", 300 + 200 * i, 0.05)
    pd.DataFrame({"a": [f"clips/{i}.wav" for i in range(4)], "y": [True, False] * 2}).to_csv(
        tmp_path / "data" / "d.csv", index=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    config = load_config(make_config([{"name": "a", "type": "audio"}], [TARGET]))
    data = preprocess(config, str(tmp_path / "data" / "d.csv"), use_cache=False)
    assert data.metadata["features"]["a"]["sample_rate"] == RATE


def test_a_missing_file_names_how_many_and_where_relative_paths_are_read(make_config, write_config, cli_error,
                                                                          tmp_path):
    (tmp_path / "data").mkdir()
    good = tone(tmp_path / "data" / "good.wav", 440, 0.05)
    pd.DataFrame({"a": [good] * 8 + ["gone.wav", "gone.wav"], "y": [True, False] * 5}).to_csv(
        tmp_path / "data" / "d.csv", index=False)
    config = write_config(make_config([{"name": "a", "type": "audio"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", tmp_path / "data" / "d.csv")
    missing = tmp_path / "data" / "gone.wav"
    assert error == (f"plait: error: audio feature 'a': 2 of 10 rows of column 'a' name a file that is missing, empty "
                     f"or not a regular file ('{missing}', '{missing}'); relative paths are read from the dataset's "
                     f"folder, {tmp_path / 'data'}. Fix the paths or the files, or set "
                     f"preprocessing.missing_value_strategy: drop_row to leave those rows out")


def test_a_fifo_is_refused_without_opening_it(make_config, write_config, make_dataset, cli_error, tmp_path):
    """Opening a FIFO waits for a writer: it must be refused, never opened."""
    import os

    os.mkfifo(tmp_path / "pipe.wav")
    good = tone(tmp_path / "good.wav", 440, 0.05)
    path = make_dataset({"a": [good] * 9 + [str(tmp_path / "pipe.wav")], "y": [True, False] * 5})
    config = write_config(make_config([{"name": "a", "type": "audio"}], [TARGET]))
    assert "1 of 10 rows" in cli_error("preprocess", "--config", config, "--dataset", path)
