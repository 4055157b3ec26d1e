"""Text tokenized by a Hugging Face model's tokenizer (tokenizer: hf_tokenizer): the model's ids
plus one (0 stays padding), cut by the tokenizer so its closing token stays, counted when cut,
the same in any partitioning, and carried in the metadata so that no folder is needed to
transform."""

from __future__ import annotations

import json
import logging
import shutil

import pyarrow as pa
import pytest

from hf_models import wordpiece_tokenizer, write_tiny_bert

TEXTS = ["the movie was good", "bad plot", None, "a very very long and boring film, not fun at all"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("models") / "bert")


def hf_processor(make_processor, folder, **preprocessing):
    return make_processor("text", {"tokenizer": "hf_tokenizer", "pretrained_model_name_or_path": str(folder),
                                   **preprocessing})


def test_ids_are_the_tokenizers_plus_one(bert, make_processor, fit_transform):
    metadata, rows = fit_transform(hf_processor(make_processor, bert), TEXTS)
    tokenizer = wordpiece_tokenizer()
    for text, row in zip(TEXTS, rows):
        assert row == [i + 1 for i in tokenizer.encode(text or "").ids]
    assert metadata["vocabulary"][0] == "<PAD>" and metadata["vocabulary"][1:6] == ["[PAD]", "[UNK]", "[CLS]",
                                                                                    "[SEP]", "[MASK]"]
    assert metadata["sequence_length"] == 64  # the model's context, below max_sequence_length's 256


def test_a_long_text_is_cut_by_the_tokenizer_and_counted(bert, make_processor, fit_transform, caplog):
    caplog.set_level(logging.WARNING)
    metadata, rows = fit_transform(hf_processor(make_processor, bert, max_sequence_length=6), TEXTS)
    sep = wordpiece_tokenizer().token_to_id("[SEP]") + 1
    assert metadata["sequence_length"] == 6
    assert all(len(row) <= 6 and row[-1] == sep for row in rows)
    assert "1 of 4 training rows have more than 6 tokens" in caplog.text


def test_statistics_do_not_depend_on_the_partitioning(bert, make_processor, fit):
    processor = hf_processor(make_processor, bert)
    assert fit(processor, TEXTS) == fit(processor, TEXTS[:1], TEXTS[1:3], TEXTS[3:])


def test_transforming_needs_only_the_metadata(tmp_path, make_processor, fit):
    folder = write_tiny_bert(tmp_path / "bert")
    processor = hf_processor(make_processor, folder)
    metadata = json.loads(json.dumps(fit(processor, TEXTS)))  # as saved with a model
    expected = processor.transform(processor.prepare(pa.array(TEXTS)), metadata)
    shutil.rmtree(folder)
    assert processor.transform(processor.prepare(pa.array(TEXTS)), metadata) == expected


def test_a_changed_tokenizer_changes_the_cache_key(tmp_path, make_processor):
    folder = write_tiny_bert(tmp_path / "bert")
    before = hf_processor(make_processor, folder).cache_inputs()
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert hf_processor(make_processor, folder).cache_inputs() != before


def test_plaits_own_encoders_read_the_models_tokens(bert, make_config, make_dataset):
    from plait.api import Model

    config = make_config([{"name": "text", "type": "text", "encoder": {"type": "embed"},
                           "preprocessing": {"tokenizer": "hf_tokenizer", "pretrained_model_name_or_path": str(bert)}}],
                         [{"name": "label", "type": "binary"}], trainer={"epochs": 1})
    data = make_dataset([{"text": t or "", "label": i % 2 == 0} for i, t in enumerate(TEXTS * 10)])
    result = Model(config).train(data, progress_bar=False)
    assert len(result.preprocessed.metadata["features"]["text"]["vocabulary"]) == 1 + len(
        json.loads((bert / "tokenizer.json").read_text())["model"]["vocab"])
