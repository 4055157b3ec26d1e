"""ONNX exports of set, bag, vector, h3, date, image and text features: onnxruntime through the
export folder's plait_onnx.py on raw rows (missing values, unseen tokens) gives ``plait
predict``'s columns (labels exactly, probabilities within 1e-5). Three small models, each
trained for one epoch and exported once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from parity import assert_same_predictions, assert_same_tensors, load_runner

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
    "output_features": [{"name": "labels", "type": "set"}, {"name": "kind", "type": "category"},
                        {"name": "scores", "type": "vector"}],
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


class Exported:
    def __init__(self, root, config: dict, rows: pd.DataFrame):
        self.model = Model({**config, "backend": {"type": "local", "cache_dir": str(root / "cache")}})
        self.model.train(dataset=rows, progress_bar=False, random_seed=1)
        self.folder = root / "onnx"
        self.model.export_model(self.folder)
        self.runner = load_runner(self.folder)

    def check(self, rows: pd.DataFrame, feed=None) -> None:
        """The export's tensors (exactly) and columns on ``rows`` (or on ``feed``, the same rows
        as the runner takes them) against plait's preprocessing and Model.predict's; a vector's
        values within the tolerance."""
        assert_same_tensors(self.model, self.folder, rows, feed)
        got, expected = self.runner.predict(rows if feed is None else feed), self.model.predict(rows)
        vectors = [c for c in expected.columns if c.endswith("_predictions") and isinstance(got[c][0], np.ndarray)]
        for column in vectors:
            np.testing.assert_allclose(np.stack(got.pop(column)), np.stack(expected.pop(column)), atol=1e-5)
        assert_same_predictions(got, expected)


@pytest.fixture(scope="module")
def tabular(tmp_path_factory):
    return Exported(tmp_path_factory.mktemp("tabular"), TABULAR, _tabular_rows(200, 0))


def _tabular_rows(rows: int, seed: int) -> pd.DataFrame:
    """synthesize_dataset's rows, with a vector output (which it does not make): the first three
    numbers of the vector input."""
    frame = synthesize_dataset({**TABULAR, "output_features": TABULAR["output_features"][:2]}, rows, seed)
    frame["scores"] = [" ".join(v.split()[:3]) for v in frame["embedding"]]
    return frame


@pytest.fixture
def rows():
    """Unseen rows of the tabular model's inputs; each test changes one column."""
    rows = _tabular_rows(40, 7).drop(columns=["labels", "kind", "scores"])
    rows["cell"] = rows["cell"].astype("Int64")  # what holds a missing H3 index in pandas
    return rows


def test_set_input_and_output(tabular, rows):
    rows.loc[0, "tags"], rows.loc[1, "tags"], rows.loc[2, "tags"] = None, "zulu alpha alpha", ""
    labels = tabular.runner.predict(rows)["labels_predictions"]
    assert [type(row) for row in labels] == [list] * len(rows)
    tabular.check(rows)


def test_vector_output(tabular, rows):
    scores = tabular.runner.predict(rows)["scores_predictions"]
    assert [len(row) for row in scores] == [len(tabular.model.metadata["features"]["scores"]["fill_value"])] * len(rows)
    tabular.check(rows)


def test_bag_input(tabular, rows):
    rows.loc[0, "words"], rows.loc[1, "words"], rows.loc[2, "words"] = None, "Kilo kilo KILO zulu", "  "
    tabular.check(rows)


def test_vector_input(tabular, rows):
    size = len(rows.loc[0, "embedding"].split())
    rows.loc[0, "embedding"], rows.loc[1, "embedding"] = None, "  " + " ".join(["1e39"] * size)  # beyond float
    rows.loc[2, "embedding"] = " ".join(["-0.1"] * size) + "\t"
    tabular.check(rows)
    lists = [None if v is None else [float(x) for x in v.split()] for v in rows["embedding"]]
    tabular.check(rows, {**rows, "embedding": lists})


def test_h3_input(tabular, rows):
    rows.loc[0, "cell"] = pd.NA
    tabular.check(rows)
    tabular.check(rows, {**rows, "cell": [None if pd.isna(v) else f"{int(v):x}" for v in rows["cell"]]})


def test_date_input(tabular, rows):
    for i, text in enumerate([None, "2024-02-29", " 1969-12-31T23:59:59 ", "2000-03-01 00:00", "1900-01-01",
                              "2023-12-31 08:05:09", "0400-02-29"]):
        rows.loc[i, "when"] = text
    tabular.check(rows)


def _pixels(rows: int, size: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return list(rng.integers(0, 256, (rows, size, size, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    pixels = _pixels(64, 16, 0)
    frame = pd.DataFrame({"photo": [p.tolist() for p in pixels],
                          "kind": ["bright" if p.mean() > 127.5 else "dark" for p in pixels]})
    return Exported(tmp_path_factory.mktemp("image"), IMAGE, frame)


def test_image_input(image):
    pixels = _pixels(20, 16, 3)
    image.check(pd.DataFrame({"photo": [p.tolist() for p in pixels]}), {"photo": np.stack(pixels)})


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    frame = synthesize_dataset({"input_features": TEXT["input_features"][:1],
                                "output_features": TEXT["output_features"]}, 120, 0)
    frame["review"] = frame["review"].str.replace(" ", ", ", n=1).str.title() + "!"
    frame["codes"] = frame["review"].str.lower().str.replace(" ", ",")
    return Exported(tmp_path_factory.mktemp("text"), TEXT, frame)


def test_text_input(text):
    text.check(pd.DataFrame({"review": [None, "", "Zulu... ALPHA,bravo!?", "tango_lima  ünïcode", "alpha " * 40],
                             "codes": ["alpha, bravo ,charlie,delta", None, ",,", "zulu", "alpha"]}))


def _graph_resized(pixels: np.ndarray, method: str, size: int) -> np.ndarray:
    """The image input's nodes alone, on ``pixels`` [rows, height, width, 3], as [rows, size, size, 3]."""
    import onnxruntime
    from onnx import TensorProto, helper

    from plait.export.onnx.features import INPUTS
    from plait.export.onnx.graph import GraphBuilder

    g = GraphBuilder()
    g.op("Identity", INPUTS["image"].build(g, "photo", {"height": size, "width": size, "resize_method": method}, None),
         name="pixels")
    graph = helper.make_graph(g.nodes, "resize", [helper.make_tensor_value_info("photo", TensorProto.UINT8, None)],
                              [helper.make_tensor_value_info("pixels", TensorProto.UINT8, None)],
                              initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"photo": pixels})[0].transpose(0, 2, 3, 1)


@pytest.mark.parametrize("method", ["crop_or_pad", "interpolate"])
def test_images_of_another_size_are_resized_as_plait_does(method):
    """crop_or_pad exactly; interpolate within 5 levels of Pillow's bilinear resize (smooth images)."""
    from plait.features import image_ops

    rows, columns = np.mgrid[0:40, 0:40]
    smooth = np.stack([128 + 100 * np.sin(columns / 5 + k) * np.cos(rows / 7) for k in range(3)], -1).astype(np.uint8)
    for height, width in [(40, 40), (23, 37), (9, 12)]:
        pixels = np.ascontiguousarray(smooth[None, :height, :width])
        target = image_ops.Target(16, 16, 3, method)
        want = target.pixels(image_ops.array_image(pixels[0].tolist())).astype(int)
        difference = np.abs(_graph_resized(pixels, method, 16)[0].astype(int) - want)
        assert difference.max() <= (0 if method == "crop_or_pad" else 5), (height, width)
