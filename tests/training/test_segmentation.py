"""Image outputs: a U-Net learns the masks of bright squares (a tiny synthetic segmentation task),
reports pixel accuracy and IoU, and predicts a mask of class ids per image."""

from __future__ import annotations

import numpy as np

from image_data import squares_and_masks
from plait.api import Model


def test_a_unet_learns_square_masks(tmp_path, make_config):
    frame = squares_and_masks(96, size=16)
    frame.to_parquet(tmp_path / "squares.parquet")
    config = make_config([{"name": "image", "type": "image", "encoder": "unet"}], [{"name": "mask", "type": "image"}],
                         trainer={"epochs": 3, "batch_size": 8, "learning_rate": 0.002})
    model = Model(config)
    model.train(dataset=str(tmp_path / "squares.parquet"), progress_bar=False)
    assert model.metadata["features"]["mask"]["class_values"] == [[0], [255]]
    metrics = model.evaluate(str(tmp_path / "squares.parquet"), split="test")["mask"]
    assert metrics["iou"] > 0.8 and metrics["accuracy"] > 0.9, metrics
    predicted = model.predict(frame.head(2))
    masks = np.array(predicted["mask_predictions"].tolist(), dtype=object)
    assert np.stack([np.stack(rows) for rows in masks]).shape == (2, 16, 16)
    assert predicted["mask_probability"].between(0.5, 1).all()


def test_the_unet_decoder_needs_the_unet_encoder(make_config, tmp_path, cli_error, write_config):
    squares_and_masks(12, size=16).to_parquet(tmp_path / "squares.parquet")
    config = make_config([{"name": "image", "type": "image"}], [{"name": "mask", "type": "image"}])
    error = cli_error("train", "--config", write_config(config), "--dataset", tmp_path / "squares.parquet")
    assert "unet encoder" in error
