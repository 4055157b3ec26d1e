"""Models saved before issue #14 changed the modules (commit 3784bc2) load and predict as they did.

The fixtures under saved_before_14/ were written by that commit (saved_before_14/make.py): every
text encoder then (embed, parallel_cnn, rnn, transformer with its old hidden_size), category,
number, set and vector inputs, concat (FC layers with batch or layer norm) and transformer
combiners, binary, category, number and set outputs with decoder FC layers.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from plait.api import Model
from plait.models.saved import DESCRIPTION, MODEL_FORMAT_VERSION

HERE = Path(__file__).parent / "saved_before_14"
MODELS = ["concat", "concat_layer_norm", "transformer"]


def _data() -> pd.DataFrame:
    return pd.read_csv(HERE / "data.csv", keep_default_na=False)


def _assert_same(got, expected, where: str) -> None:
    """Numbers equal to float32 precision, everything else equal, in nested lists."""
    if isinstance(expected, list):
        got = list(got)
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert math.isclose(float(got), expected, rel_tol=1e-5, abs_tol=1e-6), f"{where}: {got} != {expected}"
    else:
        got = got.item() if hasattr(got, "item") else got
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def _assert_predictions(predictions: pd.DataFrame, folder: Path) -> None:
    expected = json.loads((folder / "predictions.json").read_text())
    assert sorted(predictions.columns) == sorted(expected)
    for column, values in expected.items():
        _assert_same(predictions[column].tolist(), values, column)


@pytest.mark.parametrize("name", MODELS)
def test_old_model_predicts_as_before(name):
    model = Model.load(HERE / name)
    try:
        _assert_predictions(model.predict(_data()), HERE / name)
    finally:
        model.close()


def test_old_model_saved_again_is_in_todays_format_and_predicts_the_same(tmp_path):
    model = Model.load(HERE / "concat")
    model.save(tmp_path / "again")
    model.close()
    description = json.loads((tmp_path / "again" / DESCRIPTION).read_text())
    assert description["format_version"] == MODEL_FORMAT_VERSION == 2
    again = Model.load(tmp_path / "again")
    try:
        _assert_predictions(again.predict(_data()), HERE / "concat")
    finally:
        again.close()


def test_old_model_predicts_through_the_cli(tmp_path):
    from plait.cli import main

    shutil.copytree(HERE / "transformer", tmp_path / "model")
    _data().to_csv(tmp_path / "data.csv", index=False)
    main(["predict", "--model_path", str(tmp_path / "model"), "--dataset", str(tmp_path / "data.csv"),
          "--output_directory", str(tmp_path / "out")])
    _assert_predictions(pd.read_parquet(tmp_path / "out" / "predictions.parquet"), HERE / "transformer")


def test_model_of_todays_layout_marked_format_1_is_read_as_it_is(tmp_path):
    """Models saved between issue #14's changes and format 2 say format 1 but have today's layout:
    each part is translated only when it is in the old layout, so they load unchanged."""
    data = _data()
    text = [{"name": f"text_{kind}", "type": "text", "column": "text", "encoder": {"type": kind, "embedding_size": 4}}
            for kind in ("rnn", "parallel_cnn")]
    config = {
        "input_features": text + [
            {"name": "text_transformer", "type": "text", "column": "text",
             "encoder": {"type": "transformer", "embedding_size": 4, "num_heads": 2, "hidden_size": 6}},
            {"name": "set", "type": "set", "encoder": {"embedding_size": 3, "num_fc_layers": 1, "output_size": 3}}],
        "combiner": {"type": "concat", "num_fc_layers": 1, "output_size": 4, "norm": "batch"},
        "output_features": [{"name": "out_number", "type": "number", "decoder": {"num_fc_layers": 1}}],
        "trainer": {"epochs": 1, "batch_size": 8}, "backend": {"type": "local"},
    }
    model = Model(config)
    model.train(data, progress_bar=False)
    expected = model.predict(data)
    model.save(tmp_path / "model")
    model.close()
    description = tmp_path / "model" / DESCRIPTION
    description.write_text(json.dumps({**json.loads(description.read_text()), "format_version": 1}))
    loaded = Model.load(tmp_path / "model")
    try:
        pd.testing.assert_frame_equal(loaded.predict(data), expected)
    finally:
        loaded.close()
