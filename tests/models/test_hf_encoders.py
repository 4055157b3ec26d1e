"""Pretrained Hugging Face text encoders (auto_transformer and Ludwig's named ones), over tiny
random-weight models written at test time: they learn, load only local safetensors, save with the
model, freeze, mask padding whatever the model's padding id, and cache their output."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from hf_models import write_tiny_bert, write_tiny_t5, write_to_hub_cache
from plait.api import Model
from plait.config import load_config
from plait.models.encoders import build_encoder
from plait.models.hf_encoders import HFTextEncoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FILLER = ["the", "movie", "was", "very", "plot", "acting", "film", "long", "slow", "fun"]


def reviews(rows: int, seed: int = 0) -> pd.DataFrame:
    """Texts of filler words that end in a good or a bad word: the label."""
    rng = random.Random(seed)
    records = []
    for _ in range(rows):
        label = rng.random() < 0.5
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 8))]
        words.insert(rng.randint(0, len(words)), rng.choice(["good", "great"] if label else ["bad", "awful"]))
        records.append({"text": " ".join(words), "label": label})
    return pd.DataFrame(records)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("models") / "bert")


def text_config(make_config, encoder: dict, **preprocessing) -> dict:
    feature = {"name": "text", "type": "text", "encoder": encoder}
    if preprocessing:
        feature["preprocessing"] = preprocessing
    return make_config([feature], [{"name": "label", "type": "binary"}],
                       trainer={"epochs": 4, "batch_size": 32, "learning_rate": 0.001})


def test_a_trainable_auto_transformer_learns_a_rule(bert, make_config, make_dataset):
    data = make_dataset(reviews(600))
    model = Model(text_config(make_config, {"type": "auto_transformer", "pretrained_model_name_or_path": str(bert),
                                            "trainable": True, "reduce_output": "mean"}))
    model.train(data, progress_bar=False)
    assert model.evaluate(data)["label"]["accuracy"] >= 0.95


def test_a_saved_model_predicts_without_the_pretrained_folder(tmp_path, bert, make_config, make_dataset):
    folder = shutil.copytree(bert, tmp_path / "bert")
    data = make_dataset(reviews(200))
    config = text_config(make_config, {"type": "bert", "pretrained_model_name_or_path": str(folder),
                                       "trainable": True})
    config["trainer"]["epochs"] = 1
    model = Model(config)
    model.train(data, progress_bar=False)
    expected = model.predict(data)
    model.save(tmp_path / "model")
    shutil.rmtree(folder)  # the tokenizer and the weights travel in the saved model
    pd.testing.assert_frame_equal(Model.load(tmp_path / "model").predict(data), expected)


def test_a_lora_adapter_trains_alone_learns_and_is_saved_with_the_model(tmp_path, bert, make_config, make_dataset):
    """Ludwig's adapter on a pretrained encoder: the model's own weights stay as the folder has
    them, the adapter's train, and the saved model (model and adapter) predicts without the folder."""
    from safetensors.torch import load_file

    folder = shutil.copytree(bert, tmp_path / "bert")
    data = make_dataset(reviews(600))
    config = text_config(make_config, {"type": "bert", "pretrained_model_name_or_path": str(folder), "trainable": True,
                                       "reduce_output": "mean", "adapter": {"type": "lora", "r": 8}})
    config["trainer"]["learning_rate"] = 0.01
    model = Model(config)
    model.train(data, progress_bar=False)
    assert model.evaluate(data)["label"]["accuracy"] >= 0.9
    weights = {name: tensor for name, tensor in model.module.state_dict().items() if ".transformer." in name}
    adapter = [name for name in weights if "lora_" in name]
    assert adapter and len(adapter) < len(weights) / 2
    pretrained = load_file(str(folder / "model.safetensors"))
    for name, tensor in weights.items():
        if "lora_" not in name and name.endswith("query.base_layer.weight"):
            layer = name.split(".transformer.base_model.model.", 1)[1].replace(".base_layer", "")
            torch.testing.assert_close(tensor, pretrained[f"bert.{layer}"] if f"bert.{layer}" in pretrained
                                       else pretrained[layer])
    expected = model.predict(data)
    model.save(tmp_path / "model")
    shutil.rmtree(folder)
    pd.testing.assert_frame_equal(Model.load(tmp_path / "model").predict(data), expected)


def test_a_hub_name_is_read_from_the_local_cache(tmp_path, monkeypatch, make_config, make_dataset):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    write_to_hub_cache(tmp_path / "hub", "bert-base-uncased")
    config = text_config(make_config, {"type": "bert"})  # Ludwig's default model for bert
    config["trainer"]["epochs"] = 1
    result = Model(config).train(make_dataset(reviews(50)), progress_bar=False)
    assert result.preprocessed.metadata["features"]["text"]["hf_model_config"]["hidden_size"] == 32


def test_cached_embeddings_give_the_predictions_of_the_encoder_run_every_step(bert, make_config, make_dataset, caplog):
    data = make_dataset(reviews(200))
    encoder = {"type": "bert", "pretrained_model_name_or_path": str(bert), "reduce_output": "mean"}
    predictions = []
    for cache in (False, True):
        config = text_config(make_config, encoder, cache_encoder_embeddings=cache)
        config["backend"]["cache_dir"] += str(cache)
        model = Model(config)
        result = model.train(data, progress_bar=False)
        cached = result.preprocessed.metadata["features"]["text"].get("cached_embedding_size")
        assert cached == (32 if cache else None)
        predictions.append(model.predict(data)["label_probabilities_True"].to_numpy())
    np.testing.assert_allclose(predictions[0], predictions[1], atol=1e-5)


def test_cached_embeddings_are_not_computed_for_an_encoder_that_trains(bert, make_config, make_dataset, caplog):
    data = make_dataset(reviews(50))
    config = text_config(make_config, {"type": "bert", "pretrained_model_name_or_path": str(bert), "trainable": True},
                         cache_encoder_embeddings=True)
    config["trainer"]["epochs"] = 1
    result = Model(config).train(data, progress_bar=False)
    assert "cached_embedding_size" not in result.preprocessed.metadata["features"]["text"]
    assert "cache_encoder_embeddings has no effect" in caplog.text


def metadata_of(bert, encoder: dict, tmp_path, **preprocessing) -> tuple:
    from plait.data.preprocess import preprocess

    feature = {"name": "text", "type": "text", "encoder": encoder, "preprocessing": preprocessing}
    config = load_config({"input_features": [feature], "output_features": [{"name": "label", "type": "binary"}],
                          "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}})
    data = preprocess(config, reviews(40), use_cache=False)
    return config.input_features[0], data.metadata["features"]["text"]


def test_a_named_encoder_with_random_weights_takes_its_architecture(bert, tmp_path):
    feature, metadata = metadata_of(bert, {"type": "bert", "pretrained_model_name_or_path": str(bert),
                                           "use_pretrained": False, "hidden_size": 16, "num_hidden_layers": 1,
                                           "num_attention_heads": 2, "intermediate_size": 24}, tmp_path)
    encoder = build_encoder(feature, metadata, load_pretrained=True)
    assert encoder.output_size == 16 and encoder.transformer.config.num_hidden_layers == 1
    assert encoder.transformer.config.vocab_size == len(metadata["vocabulary"]) - 1


def test_an_encoder_decoder_model_is_read_by_its_encoder(bert, tmp_path):
    t5 = write_tiny_t5(tmp_path / "t5", tokenizer_from=bert)
    feature, metadata = metadata_of(bert, {"type": "auto_transformer", "pretrained_model_name_or_path": str(t5)},
                                    tmp_path)
    encoder = build_encoder(feature, metadata, load_pretrained=True)
    assert type(encoder.transformer).__name__ == "T5EncoderModel"
    assert encoder(torch.tensor([[3, 9, 4, 0]])).shape == (1, 32)


@pytest.mark.parametrize("pad_token_id", [0, 1])
def test_padding_is_left_out_whatever_the_models_padding_id(tmp_path, pad_token_id):
    folder = write_tiny_bert(tmp_path / "bert", pad_token_id=pad_token_id)
    feature, metadata = metadata_of(folder, {"type": "auto_transformer", "pretrained_model_name_or_path": str(folder),
                                             "reduce_output": "mean"}, tmp_path)
    encoder = build_encoder(feature, metadata, load_pretrained=True).eval()
    row = torch.tensor([[3, 9, 12, 4]])
    padded = torch.nn.functional.pad(row, (0, 5))
    torch.testing.assert_close(encoder(row), encoder(padded))


def test_a_frozen_encoder_gets_no_gradients_and_keeps_dropout_off(bert, tmp_path):
    feature, metadata = metadata_of(bert, {"type": "bert", "pretrained_model_name_or_path": str(bert)}, tmp_path)
    encoder: HFTextEncoder = build_encoder(feature, metadata, load_pretrained=True)
    encoder.train()
    assert not any(p.requires_grad for p in encoder.parameters())
    assert not encoder.transformer.training
    tokens = torch.tensor([[3, 9, 12, 4]])
    torch.testing.assert_close(encoder(tokens), encoder(tokens))  # no dropout


def test_the_pretrained_weights_are_the_folders(bert, tmp_path):
    from safetensors.torch import load_file

    feature, metadata = metadata_of(bert, {"type": "bert", "pretrained_model_name_or_path": str(bert)}, tmp_path)
    loaded = build_encoder(feature, metadata, load_pretrained=True).transformer.state_dict()
    saved = load_file(str(bert / "model.safetensors"))
    name = "embeddings.word_embeddings.weight"
    torch.testing.assert_close(loaded[name], saved[name])
    skeleton = build_encoder(feature, metadata, load_pretrained=False).transformer.state_dict()
    assert not torch.equal(skeleton[name], saved[name])  # a saved model loads its own weights next


# ---- bad input, through the CLI: one line each, before training ---------------------------------

def pickled_only(folder):
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    return folder


BAD_MODELS = {
    "a folder without weights": (lambda p: write_tiny_bert(p, weights=False), {},
                                 "has no model.safetensors; it has no weights"),
    "a folder without a tokenizer": (lambda p: write_tiny_bert(p, tokenizer=False), {}, "has no tokenizer"),
    "pickled weights only": (lambda p: pickled_only(write_tiny_bert(p)), {},
                             "only pickled weights (pytorch_model.bin), which plait does not load"),
    "cls_pooled without a pooler": (lambda p: write_tiny_t5(p, write_tiny_bert(p.parent / "tok")),
                                    {"reduce_output": "cls_pooled"}, "T5EncoderModel has no pooler"),
}


@pytest.mark.parametrize("case", BAD_MODELS)
def test_a_bad_model_folder_is_named_with_what_to_do(case, tmp_path, make_config, make_dataset, write_config,
                                                     cli_error):
    make, settings, message = BAD_MODELS[case]
    folder = make(tmp_path / "model")
    config = text_config(make_config, {"type": "auto_transformer", "pretrained_model_name_or_path": str(folder),
                                       **settings})
    error = cli_error("train", "--config", write_config(config), "--dataset", make_dataset(reviews(20)))
    assert "input feature 'text' encoder" in error and message in error


@pytest.mark.parametrize("encoder, message", [
    ({"type": "bert"}, "'bert-base-uncased' is neither a folder nor in the local Hugging Face cache"),
    ({"type": "auto_transformer", "pretrained_model_name_or_path": "/no/such/model"}, "is not a folder"),
])
def test_a_model_not_on_this_machine_says_how_to_make_it_available(encoder, message, tmp_path, monkeypatch,
                                                                    make_config, make_dataset, write_config, cli_error):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))  # a real, empty cache
    error = cli_error("train", "--config", write_config(text_config(make_config, encoder)),
                      "--dataset", make_dataset(reviews(20)))
    assert message in error
    assert ("plait does not download models. On a machine with internet run `hf download" in error
            if encoder["type"] == "bert" else "give the folder of a Hugging Face model" in error)


@pytest.mark.parametrize("feature, message", [
    ({"type": "text", "encoder": {"type": "auto_transformer"}}, "encoder.pretrained_model_name_or_path: the "
                                                                  "auto_transformer encoder needs the model"),
    ({"type": "text", "encoder": {"type": "bert", "pretrained_kwargs": {"trust_remote_code": True}}},
     "encoder.pretrained_kwargs: trust_remote_code runs Python code from the model folder"),
    ({"type": "text", "preprocessing": {"tokenizer": "hf_tokenizer"}},
     "preprocessing.pretrained_model_name_or_path: tokenizer hf_tokenizer reads the tokenizer of a Hugging Face model"),
    ({"type": "text", "encoder": {"type": "bert", "hiden_size": 8}}, "encoder.hiden_size: did you mean hidden_size?"),
    ({"type": "text", "encoder": {"type": "bert", "adapter": {"type": "lora"}}},
     "encoder.trainable: an adapter trains only in a trainable encoder"),
    ({"type": "text", "encoder": {"type": "bert", "trainable": True, "adapter": {"type": "adalora"}}},
     "encoder.adapter: got type 'adalora'; plait implements the adapters lora, ia3"),
    ({"type": "text", "encoder": {"type": "parallel_cnn", "adapter": {"type": "lora"}}},
     "encoder.adapter: got {'type': 'lora'}; an adapter fine-tunes a pretrained Hugging Face encoder"),
])
def test_a_config_mistake_is_named_by_its_path(feature, message, make_config, write_config, cli):
    config = make_config([{"name": "text", **feature}], [{"name": "label", "type": "binary"}])
    code, _, err = cli("validate", "--config", write_config(config))
    assert code == 2 and "Traceback" not in err
    assert f"input_features[0].{message}" in err
