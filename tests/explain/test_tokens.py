"""Explanations inside an input (plait/explain/parts.py): on a text whose label is whether it holds
the word "good", that word gets the largest token attribution, and a row's tokens (with the length
term) add up to the text's change alone; on 8 x 8 images whose label is whether the bright
quadrant is the top-left one, the heat map's mass lies in that quadrant."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plait import Model
from plait.explain import explain
from plait.explain.integrated_gradients import ABSOLUTE_FLOOR, TOLERANCE
from tests.image_data import png_bytes

WORDS = "the a movie film was is very quite plot acting bad fine long short".split()


def _texts(count: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(count):
        words = list(rng.choice(WORDS, rng.integers(3, 7)))
        if i % 2 == 0:
            words.insert(int(rng.integers(0, len(words) + 1)), "good")
        texts.append(" ".join(words))
        labels.append(i % 2 == 0)
    return pd.DataFrame({"text": texts, "y": labels})


def _images(count: int, seed: int) -> pd.DataFrame:
    """Dark noise with one bright 4 x 4 quadrant: the top-left one in even rows (label true), one of
    the other three in odd rows."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for i in range(count):
        pixels = rng.integers(0, 60, (8, 8), dtype=np.uint8)
        top, left = (0, 0) if i % 2 == 0 else [(0, 4), (4, 0), (4, 4)][int(rng.integers(3))]
        pixels[top:top + 4, left:left + 4] = rng.integers(180, 256, (4, 4), dtype=np.uint8)
        images.append(png_bytes(pixels))
        labels.append(i % 2 == 0)
    return pd.DataFrame({"image": images, "y": labels})


def _trained(root, feature: dict, rows: pd.DataFrame, epochs: int) -> Model:
    model = Model({"input_features": [feature], "output_features": [{"name": "y", "type": "binary"}],
                   "trainer": {"epochs": epochs, "batch_size": 64, "learning_rate": 0.01},
                   "backend": {"type": "local", "cache_dir": str(root / "cache")}})
    model.train(dataset=rows, progress_bar=False, random_seed=1)
    return model


@pytest.fixture(scope="module")
def text_rows(tmp_path_factory) -> pd.DataFrame:
    encoder = {"type": "parallel_cnn", "embedding_size": 16, "num_filters": 16, "output_size": 16}
    model = _trained(tmp_path_factory.mktemp("text"), {"name": "text", "type": "text", "encoder": encoder},
                     _texts(240, 0), epochs=6)
    return model.explain(_texts(16, 1)).rows


@pytest.fixture(scope="module")
def image_model(tmp_path_factory) -> Model:
    encoder = {"type": "stacked_cnn", "num_conv_layers": 1, "out_channels": 8, "padding": "same", "output_size": 16}
    return _trained(tmp_path_factory.mktemp("image"), {"name": "image", "type": "image", "encoder": encoder},
                    _images(240, 0), epochs=6)


def test_the_word_that_decides_gets_the_largest_attribution(text_rows):
    holding = text_rows[text_rows["text_tokens"].apply(lambda tokens: "good" in list(tokens))]
    assert len(holding) == 8 and (holding["class"] == "True").all()
    for tokens, attributions in zip(holding["text_tokens"], holding["text_token_attributions"]):
        assert list(tokens)[int(np.argmax(attributions))] == "good"
    assert all(len(t) == len(a) and "<PAD>" not in list(t)
               for t, a in zip(text_rows["text_tokens"], text_rows["text_token_attributions"]))


def test_a_rows_tokens_add_up_to_the_texts_change_alone(text_rows):
    tokens = text_rows["text_token_attributions"].apply(np.sum)
    change = text_rows["text_change_alone"] - text_rows["text_length_attribution"]  # the tokens' line
    delta = text_rows["text_parts_delta"]
    assert (delta.abs() <= TOLERANCE * change.abs() + ABSOLUTE_FLOOR).all()
    np.testing.assert_allclose(tokens, change + delta, atol=1e-5)
    # One input: moving it alone is moving every input, the feature-level attribution's line.
    np.testing.assert_allclose(text_rows["text_change_alone"], text_rows["score"] - text_rows["baseline_score"],
                               atol=1e-6)


def test_the_heat_map_lies_in_the_quadrant_that_decides(image_model):
    rows = image_model.explain(_images(16, 1)).rows
    maps = np.stack([np.stack(list(heat)) for heat in rows["image_heat_map"]])
    assert maps.shape == (16, 8, 8)
    np.testing.assert_allclose(maps.sum((1, 2)), rows["image_change_alone"] + rows["image_parts_delta"], atol=1e-5)
    top_left = rows["row"] % 2 == 0
    mass = np.abs(maps[top_left.to_numpy()])
    assert (mass[:, :4, :4].sum((1, 2)) / mass.sum((1, 2)) > 0.6).all()


def test_without_parts_the_rows_have_only_the_feature_columns(image_model):
    found = explain(image_model.backend, image_model.predictor_spec(), _images(4, 2), parts=False)
    assert "image_heat_map" not in found.rows.columns and "parts" not in found.summary
    assert list(found.rows.columns) == ["row", "class", "score", "baseline_score", "delta", "steps",
                                        "image_attribution"]


def test_an_encoder_without_a_token_table_is_said_to_have_no_tokens():
    from plait.explain.parts import NO_TOKEN_TABLE, described, token_table
    from plait.models.encoders import Passthrough

    assert token_table(Passthrough(8)) is None  # a text encoded at preprocessing (cached embeddings)
    assert described({"text": "text", "x": "number"}, ["row", "text_attribution"]) == {"text": NO_TOKEN_TABLE}
