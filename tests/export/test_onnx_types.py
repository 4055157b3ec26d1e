"""ONNX exports of set, bag, vector, h3, date, image and text features: onnxruntime through the
export folder's plait_onnx.py on raw rows (missing values, unseen tokens) gives ``plait
predict``'s columns (labels exactly, probabilities within 1e-5). Three small models, each
trained for one epoch and exported once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from parity import assert_same_predictions, load_runner

from plait import Model
from plait.synthesize import synthesize_dataset

pytest.importorskip("onnxruntime")

TABULAR = {
    "input_features": [
        {"name": "tags", "type": "set"},
        {"name": "words", "type": "bag", "preprocessing": {"lowercase": True}},
        {"name": "embedding", "type": "vector"},
        {"name": "cell", "type": "h3"},
        {"name": "when", "type": "date"},
    ],
    "output_features": [{"name": "labels", "type": "set"}, {"name": "kind", "type": "category"}],
    "trainer": {"epochs": 1, "batch_size": 64},
}
TEXT = {
    "input_features": [
        {"name": "review", "type": "text", "preprocessing": {"tokenizer": "space_punct", "lowercase": True},
         "encoder": {"type": "embed", "embedding_size": 8}},
        {"name": "codes", "type": "text", "preprocessing": {"tokenizer": "comma", "padding": "left",
                                                            "max_sequence_length": 3},
         "encoder": {"type": "embed", "embedding_size": 8}},
    ],
    "output_features": [{"name": "kind", "type": "category"}],
    "trainer": {"epochs": 1, "batch_size": 64},
}
IMAGE = {
    "input_features": [{"name": "photo", "type": "image",
                        "preprocessing": {"height": 16, "width": 16, "num_channels": 3},
                        "encoder": {"type": "stacked_cnn", "num_conv_layers": 1, "out_channels": 4}}],
    "output_features": [{"name": "kind", "type": "category"}],
    "trainer": {"epochs": 1, "batch_size": 64},
}


def _exported(root, config: dict, rows: pd.DataFrame):
    model = Model({**config, "backend": {"type": "local", "cache_dir": str(root / "cache")}})
    model.train(dataset=rows, progress_bar=False, random_seed=1)
    model.export_model(root / "onnx")
    return model, load_runner(root / "onnx")


def _same(model, runner, rows: pd.DataFrame, feed=None) -> None:
    """The export's columns on ``rows`` (or on ``feed``, the same rows as the runner takes them)
    against Model.predict's."""
    assert_same_predictions(runner.predict(rows if feed is None else feed), model.predict(rows))


@pytest.fixture(scope="module")
def tabular(tmp_path_factory):
    model, runner = _exported(tmp_path_factory.mktemp("tabular"), TABULAR, synthesize_dataset(TABULAR, 200, 0))
    rows = synthesize_dataset(TABULAR, 40, 7).drop(columns=["labels", "kind"])
    rows["cell"] = rows["cell"].astype("Int64")
    return model, runner, rows


def test_set_input_and_output(tabular):
    model, runner, rows = tabular
    rows.loc[0, "tags"], rows.loc[1, "tags"], rows.loc[2, "tags"] = None, "zulu alpha alpha", ""
    got = runner.predict(rows)
    assert all(isinstance(labels, list) for labels in got["labels_predictions"])
    _same(model, runner, rows)


def test_bag_input(tabular):
    model, runner, rows = tabular
    rows.loc[0, "words"], rows.loc[1, "words"], rows.loc[2, "words"] = None, "Kilo kilo KILO zulu", "  "
    _same(model, runner, rows)


def test_vector_input(tabular):
    model, runner, rows = tabular
    size = len(rows.loc[0, "embedding"].split())
    rows.loc[0, "embedding"], rows.loc[1, "embedding"] = None, "  " + " ".join(["1e39"] * size)
    rows.loc[2, "embedding"] = " ".join(["-0.1"] * size) + "\t"
    feed = {**rows, "embedding": [None if v is None else [float(x) for x in v.split()] for v in rows["embedding"]]}
    _same(model, runner, rows)
    _same(model, runner, rows, feed)


def test_h3_input(tabular):
    model, runner, rows = tabular
    rows.loc[0, "cell"] = pd.NA
    _same(model, runner, rows)
    feed = {**rows, "cell": [None if pd.isna(v) else f"{int(v):x}" for v in rows["cell"]]}
    _same(model, runner, rows, feed)


def test_date_input(tabular):
    model, runner, rows = tabular
    for i, text in enumerate([None, "2024-02-29", " 1969-12-31T23:59:59 ", "2000-03-01 00:00", "1900-01-01",
                              "2023-12-31 08:05:09"]):
        rows.loc[i, "when"] = text
    _same(model, runner, rows)


def _pixels(rows: int, size: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return list(rng.integers(0, 256, (rows, size, size, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    pixels = _pixels(64, 16, 0)
    frame = pd.DataFrame({"photo": [p.tolist() for p in pixels],
                          "kind": ["bright" if p.mean() > 127.5 else "dark" for p in pixels]})
    return _exported(tmp_path_factory.mktemp("image"), IMAGE, frame)


def test_image_input(image):
    model, runner = image
    pixels = _pixels(20, 16, 3)
    rows = pd.DataFrame({"photo": [p.tolist() for p in pixels]})
    _same(model, runner, rows, {"photo": np.stack(pixels)})


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    frame = synthesize_dataset({"input_features": TEXT["input_features"][:1],
                                "output_features": TEXT["output_features"]}, 120, 0)
    frame["review"] = frame["review"].str.replace(" ", ", ", n=1).str.title() + "!"
    frame["codes"] = frame["review"].str.lower().str.replace(" ", ",")
    return _exported(tmp_path_factory.mktemp("text"), TEXT, frame)


def test_text_input(text):
    model, runner = text
    rows = pd.DataFrame({"review": [None, "", "Zulu... ALPHA,bravo!?", "tango_lima  ünïcode", "alpha " * 40],
                         "codes": ["alpha, bravo ,charlie,delta", None, ",,", "zulu", "alpha"]})
    _same(model, runner, rows)
