"""Models saved before issue #14 changed the modules (commit 3784bc2) load and predict as they did.

The fixtures under saved_before_14/ were written by that commit (saved_before_14/make.py): every
text encoder then (embed, parallel_cnn, rnn, transformer with its old hidden_size), category,
number, set and vector inputs, concat (FC layers with batch or layer norm) and transformer
combiners, binary, category, number and set outputs with decoder FC layers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from plait.api import Model
from plait.models.saved import DESCRIPTION, MODEL_FORMAT_VERSION
from saved_models import assert_predictions, assert_predicts_as_saved, read_data  # beside this file

HERE = Path(__file__).parent / "saved_before_14"
MODELS = ["concat", "concat_layer_norm", "transformer"]


def _data() -> pd.DataFrame:
    return read_data(HERE)


@pytest.mark.parametrize("name", MODELS)
def test_old_model_predicts_as_before(name):
    assert_predicts_as_saved(HERE / name, HERE / name)


def test_old_model_saved_again_is_in_todays_format_and_predicts_the_same(tmp_path):
    model = Model.load(HERE / "concat")
    model.save(tmp_path / "again")
    model.close()
    description = json.loads((tmp_path / "again" / DESCRIPTION).read_text())
    assert description["format_version"] == MODEL_FORMAT_VERSION == 3
    assert_predicts_as_saved(tmp_path / "again", HERE / "concat")


def test_old_model_predicts_through_the_cli(tmp_path):
    from plait.cli import main

    shutil.copytree(HERE / "transformer", tmp_path / "model")
    _data().to_csv(tmp_path / "data.csv", index=False)
    main(["predict", "--model_path", str(tmp_path / "model"), "--dataset", str(tmp_path / "data.csv"),
          "--output_directory", str(tmp_path / "out")])
    assert_predictions(pd.read_parquet(tmp_path / "out" / "predictions.parquet"), HERE / "transformer")


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
