"""Images and audio over HTTP: a client sends the file's bytes (a file part, or a data URL in
JSON), and the server reads a path or fetches a URL only where its operator allows it, telling
nothing of the files it does not read. Bad files (a decompression bomb, another sample rate) are
a 400 from a server that goes on serving; a 16-bit grey PNG is the 8-bit image of its top bytes."""

from __future__ import annotations

import base64
import functools
import io
import os
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from image_data import bomb_png, png_bytes
from tests.serving.conftest import RunningServer, assert_same_predictions

sf = pytest.importorskip("soundfile")

RATE = 8000


def wav(hz: float, rate: int = RATE) -> bytes:
    out = io.BytesIO()
    sf.write(out, 0.5 * np.sin(2 * np.pi * hz * np.arange(int(rate * 0.05)) / rate), rate, format="WAV")
    return out.getvalue()


def data_url(content: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(content).decode()}"


@pytest.fixture(scope="module")
def files_model(tmp_path_factory):
    """(model folder, a folder of its files, rows of file names, `Model.predict`'s answers for
    those rows): a tiny model of a grey image and an audio clip, trained once."""
    from plait.api import Model

    root = tmp_path_factory.mktemp("files_model")
    folder = root / "files"
    folder.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        bright = i % 2 == 0
        (folder / f"{i}.png").write_bytes(png_bytes(rng.integers(120 if bright else 0, 256 if bright else 120, (12, 12),
                                                                 dtype=np.uint8)))
        (folder / f"{i}.wav").write_bytes(wav(2000 if bright else 300))
        rows.append({"photo": f"files/{i}.png", "clip": f"files/{i}.wav", "y": bright})
    pd.DataFrame(rows).to_csv(root / "train.csv", index=False)
    config = {"input_features": [{"name": "photo", "type": "image", "preprocessing": {"num_channels": 1}},
                                 {"name": "clip", "type": "audio", "preprocessing": {"num_filter_bands": 8},
                                  "encoder": {"type": "parallel_cnn", "num_filters": 4, "reduce_output": "mean"}}],
              "output_features": [{"name": "y", "type": "binary"}],
              "trainer": {"epochs": 1, "batch_size": 8},
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    model = Model(config)
    model.train(dataset=str(root / "train.csv"), progress_bar=False)
    path = model.save(root / "model")
    asked = pd.DataFrame([{"photo": f"{i}.png", "clip": f"{i}.wav"} for i in range(4)])
    expected = model.predict(asked.map(lambda name: (folder / name).read_bytes()))
    return str(path), folder, asked, expected


@pytest.fixture(scope="module")
def sealed(files_model):
    """A server with the default settings: files come as bytes, no path or URL is read."""
    with RunningServer(files_model[0]) as running:
        yield running


@pytest.fixture(scope="module")
def rooted(files_model):
    """A server that reads paths under the folder of the model's files."""
    with RunningServer(files_model[0], settings={"allowed_file_root": str(files_model[1])}) as running:
        yield running


def error_of(response, status: int = 400) -> str:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_files_as_parts_data_urls_and_batch_cells_answer_as_predict_does(sealed, http, files_model):
    _, folder, asked, expected = files_model
    content = {name: (folder / name).read_bytes() for name in asked.to_numpy().ravel()}
    parts = [http.post(f"{sealed.url}/predict", files={c: (row[c], content[row[c]]) for c in ("photo", "clip")}).json()
             for _, row in asked.iterrows()]
    assert_same_predictions(parts, expected, exact=False)
    as_json = [http.post(f"{sealed.url}/predict", json={"photo": data_url(content[row.photo]),
                                                        "clip": data_url(content[row.clip], "audio/wav")}).json()
               for row in asked.itertuples()]
    assert as_json == parts
    records = [{"photo": data_url(content[row.photo]), "clip": data_url(content[row.clip])} for row in asked.itertuples()]
    assert_same_predictions(http.post(f"{sealed.url}/batch_predict", json=records).json(), expected, exact=True)
    # Ludwig's batch form: a cell holding a file part's file name gets that file.
    form = {"dataset": (None, asked.to_json(orient="split", index=False))}
    uploads = [("files", (name, data)) for name, data in content.items()]
    answer = http.post(f"{sealed.url}/batch_predict", files=list(form.items()) + uploads).json()
    assert_same_predictions([dict(zip(answer["columns"], row)) for row in answer["data"]], expected, exact=True)


def test_no_path_or_url_is_read_and_every_path_gets_the_same_answer(sealed, http, files_model, tmp_path):
    _, folder, asked, expected = files_model
    os.mkfifo(tmp_path / "pipe.png")
    clip = data_url((folder / "0.wav").read_bytes())
    paths = [str(folder / "0.png"), "0.png", "/etc/shadow", "/etc/passwd", str(tmp_path / "missing.png"),
             str(tmp_path / "pipe.png"), "../../etc/passwd"]
    answers = {error_of(http.post(f"{sealed.url}/predict", json={"photo": p, "clip": clip}, timeout=10)) for p in paths}
    assert answers == {"input feature 'photo' (image) expects an image file: this server reads no paths "
                       "(serve.allowed_file_root is unset); send a file part (multipart/form-data), or in JSON a data "
                       "URL (\"data:image/png;base64,...\")"}
    for url in (f"file://{folder / '0.png'}", "http://127.0.0.1:9/x.png", "simplecache::file:///etc/passwd"):
        assert "this server fetches no URLs (serve.allowed_url_hosts is empty)" in error_of(
            http.post(f"{sealed.url}/predict", json={"photo": url, "clip": clip}))
    batch = {"columns": ["photo", "clip"], "data": [[data_url((folder / "0.png").read_bytes()), clip], ["/etc/passwd", clip]]}
    assert error_of(http.post(f"{sealed.url}/batch_predict", json=batch)).startswith(
        "row 1 of the batch: input feature 'photo' (image) expects an image file: this server reads no paths")
    photo = data_url((folder / "0.png").read_bytes())
    assert_same_predictions([http.post(f"{sealed.url}/predict", json={"photo": photo, "clip": clip}).json()],
                            expected.head(1), exact=False)


def test_paths_under_the_allowed_root_are_read_and_none_out_of_it(rooted, http, files_model, tmp_path):
    _, folder, asked, expected = files_model
    answers = [http.post(f"{rooted.url}/predict", json={"photo": row.photo, "clip": str(folder / row.clip)}).json()
               for row in asked.itertuples()]  # relative to the root, and absolute within it
    assert_same_predictions(answers, expected, exact=False)
    batch = http.post(f"{rooted.url}/batch_predict", json=asked.to_dict(orient="records")).json()
    assert_same_predictions(batch, expected, exact=True)

    secret = tmp_path / "secret.png"
    secret.write_bytes((folder / "0.png").read_bytes())
    link = folder / "link.png"
    link.symlink_to(secret)
    os.mkfifo(folder / "pipe.png")
    os.mkdir(folder / "sub.png")
    try:
        started = time.monotonic()
        refused = {error_of(http.post(f"{rooted.url}/predict", json={"photo": p, "clip": "0.wav"}, timeout=10))
                   for p in ("link.png", str(secret), f"../{secret.parent.name}/secret.png", "../../../etc/passwd",
                             "missing.png", "pipe.png", "sub.png", "nul\x00.png")}
        assert time.monotonic() - started < 10  # the FIFO was never waited on
    finally:
        link.unlink()
        os.unlink(folder / "pipe.png")
        os.rmdir(folder / "sub.png")
    assert refused == {"input feature 'photo' (image) expects an image file: a path must name a regular file under the "
                       "folder this server reads from (serve.allowed_file_root), and this one does not; or send a file "
                       "part (multipart/form-data), or in JSON a data URL (\"data:image/png;base64,...\")"}
    assert http.get(f"{rooted.url}/").status_code == 200


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_urls_of_an_allowed_host_are_fetched_and_no_others(files_model, http):
    _, folder, asked, expected = files_model
    site = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{site.server_address[1]}"
    try:
        with RunningServer(files_model[0], settings={"allowed_url_hosts": ["127.0.0.1"]}) as server:
            answers = [http.post(f"{server.url}/predict", json={"photo": f"{base}/{row.photo}",
                                                                "clip": f"{base}/{row.clip}"}).json()
                       for row in asked.itertuples()]
            assert_same_predictions(answers, expected, exact=False)
            other = f"http://localhost:{site.server_address[1]}/0.png"
            assert "this server fetches URLs only of the hosts in serve.allowed_url_hosts" in error_of(
                http.post(f"{server.url}/predict", json={"photo": other, "clip": f"{base}/0.wav"}))
            assert "expects an image file: no such file" in error_of(
                http.post(f"{server.url}/predict", json={"photo": f"{base}/nothing.png", "clip": f"{base}/0.wav"}))
    finally:
        site.shutdown()


def test_a_decompression_bomb_is_a_400_and_the_server_goes_on(sealed, http, files_model):
    _, folder, asked, expected = files_model
    clip = (folder / "0.wav").read_bytes()
    message = error_of(http.post(f"{sealed.url}/predict", files={"photo": ("bomb.png", bomb_png()), "clip": ("c.wav", clip)}))
    assert "input feature 'photo' (image) expects an image file; the file sent cannot be read: a possible " \
           "decompression bomb (image size (400000000 pixels) exceeds limit of 178956970 pixels)" in message
    batch = [{"photo": data_url(bomb_png()), "clip": data_url(clip)}]
    assert "decompression bomb" in error_of(http.post(f"{sealed.url}/batch_predict", json=batch))
    good = {"photo": ("0.png", (folder / "0.png").read_bytes()), "clip": ("0.wav", clip)}
    assert_same_predictions([http.post(f"{sealed.url}/predict", files=good).json()], expected.head(1), exact=False)


def test_a_16_bit_grey_png_answers_as_its_top_bytes_in_8_bits(sealed, http, files_model):
    grey = np.random.default_rng(5).integers(0, 256, (12, 12), dtype=np.uint16)
    deep = io.BytesIO()
    Image.fromarray(grey * 256 + 255).save(deep, format="PNG")  # the low byte must not matter
    assert Image.open(io.BytesIO(deep.getvalue())).mode == "I;16"
    clip = data_url((files_model[1] / "0.wav").read_bytes())
    as_16 = http.post(f"{sealed.url}/predict", json={"photo": data_url(deep.getvalue()), "clip": clip}).json()
    as_8 = http.post(f"{sealed.url}/predict", json={"photo": data_url(png_bytes(grey.astype(np.uint8))), "clip": clip}).json()
    assert as_16 == as_8


@pytest.mark.parametrize("value, expected", [
    (data_url(b"not an image at all"), "expects an image file; the file sent cannot be read: not an image Pillow can read"),
    ("data:image/png,rawdata", 'a data URL must hold base64 data: "data:<media type>;base64,<data>"'),
    ("data:image/png;base64,@@@", "the data URL's data is not valid base64"),
    (12, "expects an image file: a file part (multipart/form-data), or in JSON a data URL"),
])
def test_a_bad_file_value_says_what_the_feature_takes(sealed, http, files_model, value, expected):
    clip = data_url((files_model[1] / "0.wav").read_bytes())
    assert expected in error_of(http.post(f"{sealed.url}/predict", json={"photo": value, "clip": clip}))


def test_audio_at_another_sample_rate_is_a_400_naming_both_rates(sealed, http, files_model):
    photo = data_url((files_model[1] / "0.png").read_bytes())
    message = error_of(http.post(f"{sealed.url}/predict", json={"photo": photo, "clip": data_url(wav(440, 16000))}))
    assert "has a sample rate of 16000 Hz, but the model was trained on 8000 Hz" in message
    assert http.get(f"{sealed.url}/").status_code == 200


def test_bad_file_settings_are_refused_before_listening(files_model, cli_error, cli, tmp_path):
    message = cli_error("serve", "--model-path", files_model[0], "--backend", "local",
                        "--allowed-file-root", tmp_path / "nowhere")
    assert message == (f"plait: error: serve.allowed_file_root (--allowed-file-root) is '{tmp_path / 'nowhere'}', which "
                       f"is no folder on this machine; give the folder the requests' files are in, or leave it unset")
    code, _, err = cli("serve", "--model-path", files_model[0], "--backend", "local",
                       "--allowed-url-hosts", "https://images.example.com")
    assert code == 2 and "serve.allowed_url_hosts" in err and "'https://images.example.com' is not a host name" in err
