"""Image inputs: every form a column takes (paths relative to the dataset, absolute, URLs; bytes;
arrays) stored as the same uint8 pixels, the same on any partitioning; sizes and channels inferred
or set; a model that tells drawn shapes apart; predictions for a folder of images; and every
bad input as one clear message through the CLI."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from plait.api import Model
from plait.config import load_config
from plait.data.engines.local import LocalEngine
from plait.data.preprocess import preprocess
from image_data import bomb_png, png_bytes, shapes

TARGET = {"name": "shape", "type": "category"}


def config_with(make_config, **preprocessing) -> dict:
    feature = {"name": "image", "type": "image", **({"preprocessing": preprocessing} if preprocessing else {})}
    return make_config([feature], [TARGET])


def stored(data, split: str = "training") -> tuple[np.ndarray, dict]:
    """[rows, height, width, channels] pixels of a cached split, in row order, and the metadata."""
    meta = data.metadata["features"]["image"]
    column = data.read_split(split)["image"].combine_chunks()
    pixels = np.frombuffer(column.buffers()[1], np.uint8, count=len(column) * column.type.byte_width)
    return pixels.reshape(len(column), meta["height"], meta["width"], meta["num_channels"]), meta


def cache_digest(location: str) -> str:
    from pathlib import Path

    files = sorted(p for p in Path(location).rglob("*.parquet"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


@pytest.fixture
def drawn(tmp_path) -> pd.DataFrame:
    return shapes(tmp_path / "images", rows=30, size=20)


def test_relative_paths_are_read_from_the_datasets_folder(tmp_path, make_config, drawn, monkeypatch):
    drawn.to_csv(tmp_path / "data.csv", index=False)
    monkeypatch.chdir(tmp_path / "images")  # not the dataset's folder
    data = preprocess(load_config(config_with(make_config)), str(tmp_path / "data.csv"), use_cache=False)
    pixels, meta = stored(data)
    assert (meta["height"], meta["width"], meta["num_channels"]) == (20, 20, 3)
    assert pixels.dtype == np.uint8 and pixels.shape[1:] == (20, 20, 3)
    assert pq.read_schema(data.split_files("training")[0]).field("image").type == pa.binary(20 * 20 * 3)


def test_every_form_of_a_column_stores_the_same_pixels(tmp_path, make_config, drawn):
    """Relative paths, absolute paths, file:// URLs, the files' bytes and arrays of their pixels."""
    png = drawn[drawn.image.str.endswith(".png")].reset_index(drop=True)  # lossless: the arrays match exactly
    absolute = [str(tmp_path / p) for p in png.image]
    forms = {
        "relative": png.image.tolist(),
        "absolute": absolute,
        "url": [f"file://{p}" for p in absolute],
        "bytes": [open(p, "rb").read() for p in absolute],
        "arrays": [np.asarray(Image.open(p)).tolist() for p in absolute],
    }
    digests = {}
    for form, column in forms.items():
        path = tmp_path / f"{form}.parquet"
        pq.write_table(pa.table({"image": column, "shape": png["shape"]}), path)
        data = preprocess(load_config(config_with(make_config)), str(path), use_cache=False)
        digests[form] = cache_digest(data.location)
    assert len(set(digests.values())) == 1, digests


def test_partitions_do_not_change_a_byte(tmp_path, make_config, drawn):
    drawn.to_csv(tmp_path / "data.csv", index=False)
    config = load_config(config_with(make_config, infer_image_sample_size=7))
    digests = {cache_digest(preprocess(config, str(tmp_path / "data.csv"), engine=LocalEngine(num_partitions=parts),
                                       use_cache=False).location) for parts in (1, 4, 13)}
    assert len(digests) == 1


def test_size_and_channels_are_inferred_from_the_first_training_images(tmp_path, make_config):
    (tmp_path / "img").mkdir()
    rows = []
    for i, (height, width, mode) in enumerate([(10, 14, "RGB"), (14, 18, "RGB"), (12, 16, "L"), (30, 40, "RGB")]):
        Image.new(mode, (width, height)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"image": f"img/{i}.png", "shape": "a" if i % 2 else "b"})
    pd.DataFrame(rows).to_csv(tmp_path / "d.csv", index=False)
    config = config_with(make_config, infer_image_sample_size=3)
    config["preprocessing"] = {"split": {"type": "fixed", "column": "split"}}
    pd.DataFrame(rows).assign(split=0).to_csv(tmp_path / "d.csv", index=False)
    pixels, meta = stored(preprocess(load_config(config), str(tmp_path / "d.csv"), use_cache=False))
    # The mean of the first three: 12 x 16; RGB is what most of them have, and the grey one is converted.
    assert (meta["height"], meta["width"], meta["num_channels"]) == (12, 16, 3)
    assert pixels.shape == (4, 12, 16, 3)


@pytest.mark.parametrize("preprocessing, shape", [
    ({"height": 8, "width": 12, "resize_method": "crop_or_pad"}, (8, 12, 3)),
    ({"height": 30, "width": 24, "resize_method": "crop_or_pad"}, (30, 24, 3)),
    ({"height": 10, "width": 16, "requires_equal_dimensions": True}, (10, 10, 3)),
    ({"num_channels": 1}, (20, 20, 1)),
    ({"num_channels": 4, "height": 5, "width": 5}, (5, 5, 4)),
])
def test_set_sizes_and_channels(tmp_path, make_config, drawn, preprocessing, shape):
    drawn.to_csv(tmp_path / "data.csv", index=False)
    pixels, meta = stored(preprocess(load_config(config_with(make_config, **preprocessing)), str(tmp_path / "data.csv"),
                                     use_cache=False))
    assert pixels.shape[1:] == shape


def test_crop_or_pad_keeps_the_centre_and_repeats_the_edges():
    from plait.features.image_ops import crop_or_pad

    image = np.arange(16, dtype=np.uint8).reshape(4, 4, 1)
    assert crop_or_pad(image, 2, 2)[:, :, 0].tolist() == [[5, 6], [9, 10]]
    padded = crop_or_pad(image, 6, 4)[:, :, 0]
    assert padded[0].tolist() == padded[1].tolist() == [0, 1, 2, 3] and padded[-1].tolist() == [12, 13, 14, 15]


def test_an_empty_cell_is_an_image_of_the_fill_value(tmp_path, make_config, drawn):
    drawn.loc[3, "image"] = None
    drawn.to_csv(tmp_path / "data.csv", index=False)
    config = config_with(make_config, fill_value=7)
    config["preprocessing"] = {"split": {"type": "fixed", "column": "split"}}
    drawn.assign(split=0).to_csv(tmp_path / "data.csv", index=False)
    pixels, _ = stored(preprocess(load_config(config), str(tmp_path / "data.csv"), use_cache=False))
    assert (pixels[3] == 7).all() and not (pixels[2] == 7).all()


def test_a_model_tells_drawn_shapes_apart_with_the_default_encoder(tmp_path, make_config):
    """PNG and JPEG files, the default stacked_cnn: at least 0.9 accuracy on the test split."""
    frame = shapes(tmp_path / "images", rows=600, size=32, seed=1)
    frame.to_csv(tmp_path / "shapes.csv", index=False)
    config = config_with(make_config)
    config["trainer"] = {"epochs": 8, "batch_size": 32, "learning_rate": 0.001}
    model = Model(config)
    model.train(dataset=str(tmp_path / "shapes.csv"), progress_bar=False)
    assert model.evaluate(str(tmp_path / "shapes.csv"), split="test")["shape"]["accuracy"] >= 0.9


@pytest.fixture(scope="module")
def shapes_model(tmp_path_factory) -> str:
    """The folder of a model of 20 x 20 drawn shapes, trained for one epoch, once."""
    root = tmp_path_factory.mktemp("shapes_model")
    shapes(root / "images", rows=30, size=20).to_csv(root / "data.csv", index=False)
    model = Model({"input_features": [{"name": "image", "type": "image"}], "output_features": [TARGET],
                   "trainer": {"epochs": 1}, "backend": {"type": "local", "cache_dir": str(root / "cache")}})
    model.train(dataset=str(root / "data.csv"), progress_bar=False)
    return str(model.save(root / "model"))


def test_predict_on_a_folder_of_images_gives_predictions_keyed_by_path(tmp_path, shapes_model, cli):
    new = tmp_path / "new"
    shapes(new, rows=4, size=20, seed=9)
    code, _, err = cli("predict", "--model-path", shapes_model, "--dataset", new, "--output-directory", tmp_path / "out")
    assert code == 0, err
    predictions = pd.read_parquet(next((tmp_path / "out").rglob("predictions.parquet")))
    assert predictions["image"].tolist() == sorted(str(p) for p in new.iterdir())
    assert set(predictions["shape_predictions"]) <= {"circle", "square", "triangle"}


def test_a_decompression_bomb_at_predict_is_one_clean_error(tmp_path, shapes_model, cli_error):
    new = tmp_path / "new"
    shapes(new, rows=3, size=20, seed=9)
    (new / "bomb.png").write_bytes(bomb_png())
    error = cli_error("predict", "--model-path", shapes_model, "--dataset", new, "--output-directory", tmp_path / "out")
    assert error == (f"plait: error: image feature 'image': cannot read '{new / 'bomb.png'}': a possible decompression "
                     f"bomb (image size (400000000 pixels) exceeds limit of 178956970 pixels); if it is a real image, "
                     f"shrink it first (such as: convert big.png -resize 4096x4096 smaller.png). Give PNG, JPEG or "
                     f"another format Pillow reads, as paths, the files' bytes or arrays; or leave the row out")


def test_16_bit_greys_are_stored_as_their_top_bytes_beside_other_modes(tmp_path, make_config):
    """Pillow's own I;16 -> L conversion clips at 255, which would make the 16-bit image white."""
    grey = np.random.default_rng(2).integers(0, 256, (10, 10), dtype=np.uint8)
    (tmp_path / "img").mkdir()
    Image.fromarray(grey.astype(np.uint16) * 256 + 200).save(tmp_path / "img" / "deep.png")
    Image.fromarray(grey).save(tmp_path / "img" / "grey.png")
    Image.fromarray(np.stack([grey] * 3, axis=2)).save(tmp_path / "img" / "rgb.png")
    Image.fromarray(np.stack([grey] * 3 + [np.full_like(grey, 255)], axis=2)).save(tmp_path / "img" / "rgba.png")
    Image.fromarray(np.stack([grey] * 3, axis=2)).save(tmp_path / "img" / "misnamed.png", format="JPEG", quality=100)
    assert Image.open(tmp_path / "img" / "deep.png").mode == "I;16"
    names = ["deep", "grey", "rgb", "rgba"]
    pd.DataFrame({"image": [f"img/{n}.png" for n in names + ["misnamed"]], "shape": ["a", "b", "a", "b", "a"],
                  "split": 0}).to_csv(tmp_path / "d.csv", index=False)
    config = config_with(make_config, num_channels=1)
    config["preprocessing"] = {"split": {"type": "fixed", "column": "split"}}
    pixels, meta = stored(preprocess(load_config(config), str(tmp_path / "d.csv"), use_cache=False))
    assert (meta["height"], meta["width"], meta["num_channels"]) == (10, 10, 1)
    for row, name in enumerate(names):
        assert np.array_equal(pixels[row, :, :, 0], grey), name
    # A JPEG named .png is read as the JPEG it is (lossy: near the grey, not equal to it).
    assert np.abs(pixels[4, :, :, 0].astype(int) - grey).max() <= 8


# ---- bad input, through the CLI ----------------------------------------------------------------------

@pytest.fixture
def bad_dataset(tmp_path, drawn, write_config, make_config):
    """bad_dataset(replace_row_3_with, **preprocessing) -> (config path, dataset path)."""

    def make(path_of_row_3: str, **preprocessing):
        frame = drawn.copy()
        frame.loc[3, "image"] = path_of_row_3
        frame.to_csv(tmp_path / "bad.csv", index=False)
        return write_config(config_with(make_config, **preprocessing)), tmp_path / "bad.csv"

    return make


def test_a_missing_file_is_named_with_how_many_are_missing_and_where_paths_are_read(bad_dataset, cli_error, tmp_path):
    config, data = bad_dataset("images/nowhere.png")
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert f"1 of 30 rows of column 'image' name a file that is missing, empty or not a regular file " \
           f"('{tmp_path / 'images' / 'nowhere.png'}'); relative paths are read from the dataset's folder, " \
           f"{tmp_path}." in error and "missing_value_strategy: drop_row" in error


def test_missing_files_are_left_out_with_drop_row(bad_dataset, tmp_path, caplog):
    config, data = bad_dataset("images/nowhere.png", missing_value_strategy="drop_row")
    result = preprocess(load_config(config), str(data), use_cache=False)
    assert sum(result.rows(s) for s in ("training", "validation", "test")) == 29
    assert "nowhere.png" in caplog.text


def test_a_zero_byte_file_is_refused(bad_dataset, tmp_path, cli_error):
    (tmp_path / "empty.png").write_bytes(b"")
    config, data = bad_dataset(str(tmp_path / "empty.png"))
    assert "missing, empty or not a regular file" in cli_error("preprocess", "--config", config, "--dataset", data)


def test_an_undecodable_file_is_named(bad_dataset, tmp_path, cli_error):
    (tmp_path / "text.png").write_text("not an image at all")
    config, data = bad_dataset(str(tmp_path / "text.png"))
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert "text.png" in error and "not an image Pillow can read" in error


def test_a_truncated_file_is_named(bad_dataset, tmp_path, cli_error):
    whole = png_bytes(np.random.default_rng(0).integers(0, 255, (20, 20, 3), dtype=np.uint8))
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 2])
    config, data = bad_dataset(str(tmp_path / "cut.png"))
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert "cut.png" in error and "truncated" in error


def test_a_url_that_cannot_be_reached_is_named(bad_dataset, cli_error):
    config, data = bad_dataset("http://127.0.0.1:9/nothing.png")  # the discard port: nothing listens
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert "http://127.0.0.1:9/nothing.png" in error and "cannot read" in error


def test_images_of_another_size_than_the_first_without_resizing(tmp_path, bad_dataset, cli_error):
    Image.new("RGB", (33, 21)).save(tmp_path / "odd.png")
    config, data = bad_dataset(str(tmp_path / "odd.png"), infer_image_dimensions=False)
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert "odd.png" in error and "21x33" in error and "20x20" in error


def test_a_decompression_bomb_at_preprocessing_is_named_with_what_to_do(bad_dataset, tmp_path, cli_error):
    (tmp_path / "bomb.png").write_bytes(bomb_png())
    config, data = bad_dataset(str(tmp_path / "bomb.png"))
    error = cli_error("preprocess", "--config", config, "--dataset", data)
    assert f"cannot read '{tmp_path / 'bomb.png'}': a possible decompression bomb" in error and "shrink it first" in error


def test_an_all_empty_image_column_asks_for_the_size(tmp_path, make_config, write_config, cli_error):
    pd.DataFrame({"image": [None] * 4, "shape": ["a", "b"] * 2}).to_csv(tmp_path / "e.csv", index=False)
    error = cli_error("preprocess", "--config", write_config(config_with(make_config)), "--dataset", tmp_path / "e.csv")
    assert error == ("plait: error: image feature 'image': no training image to take the size from; set "
                     "preprocessing.height, width and num_channels")


def test_a_column_of_numbers_is_refused(tmp_path, make_config, write_config, cli_error):
    pd.DataFrame({"image": [1, 2, 3], "shape": ["a", "b", "a"]}).to_csv(tmp_path / "n.csv", index=False)
    error = cli_error("preprocess", "--config", write_config(config_with(make_config)), "--dataset", tmp_path / "n.csv")
    assert "paths of image files" in error


# ---- pretrained torchvision weights, written here ----------------------------------------------------

def test_a_frozen_pretrained_resnet_keeps_the_weights_read_from_model_cache_dir(tmp_path, make_config, drawn, cli,
                                                                                write_config):
    import torch

    from plait.models.torchvision_encoders import import_torchvision

    torchvision = import_torchvision()
    weights = torchvision.models.resnet18(weights=None).state_dict()
    weights = {k: v + 0.01 if v.is_floating_point() else v for k, v in weights.items()}  # not torch's init
    (tmp_path / "weights").mkdir()
    torch.save(weights, tmp_path / "weights" / "resnet18-f37072fd.pth")
    drawn.to_csv(tmp_path / "data.csv", index=False)
    config = make_config([{"name": "image", "type": "image", "encoder": {
        "type": "resnet", "model_variant": 18, "model_cache_dir": str(tmp_path / "weights"), "trainable": False}}],
        [TARGET], trainer={"epochs": 1, "batch_size": 16})
    code, _, err = cli("train", "--config", write_config(config), "--dataset", tmp_path / "data.csv",
                       "--output-directory", tmp_path / "results")
    assert code == 0, err
    trained = Model.load(next((tmp_path / "results").glob("*/model"))).module.encoder("image").body.model.state_dict()
    assert torch.equal(trained["conv1.weight"], weights["conv1.weight"])
    assert torch.equal(trained["layer4.1.bn2.running_mean"], weights["layer4.1.bn2.running_mean"])


def test_absent_pretrained_weights_say_where_plait_looked(tmp_path, make_config, drawn, cli_error, write_config,
                                                           monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    drawn.to_csv(tmp_path / "data.csv", index=False)
    config = make_config([{"name": "image", "type": "image", "encoder": {"type": "resnet", "model_variant": 18}}],
                         [TARGET])
    error = cli_error("train", "--config", write_config(config), "--dataset", tmp_path / "data.csv")
    assert "resnet18-f37072fd.pth" in error and str(tmp_path / "torch-home") in error and "use_pretrained" in error
