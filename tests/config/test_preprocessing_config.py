"""Ludwig's preprocessing keys: every one accepted at Ludwig's defaults, the implemented ones at
any valid value, and the others refused with what to use instead."""

from __future__ import annotations

import pytest

from plait.config import load_config
from plait.config.base import LUDWIG_DEFAULT
from plait.config.preprocessing import NumberOutputPreprocessing, TextPreprocessing
from plait.errors import ConfigError

TARGET = {"name": "y", "type": "binary"}

# Each type's preprocessing as a config Ludwig 0.17 rendered writes it (computed fields stripped).
LUDWIG_RENDERED = {
    "number": {"missing_value_strategy": "fill_with_const", "fill_value": 0.0, "normalization": "zscore",
               "outlier_strategy": None, "outlier_threshold": 3.0},
    "binary": {"missing_value_strategy": "fill_with_false", "fallback_true_label": None, "fill_value": None},
    "category": {"missing_value_strategy": "fill_with_const", "fill_value": "<UNK>", "lowercase": False,
                 "most_common": 10000, "cache_encoder_embeddings": False},
    "text": {"pretrained_model_name_or_path": None, "tokenizer": "space_punct", "vocab_file": None,
             "sequence_length": None, "max_sequence_length": 256, "most_common": 20000, "padding_symbol": "<PAD>",
             "unknown_symbol": "<UNK>", "padding": "right", "lowercase": False, "missing_value_strategy": "fill_with_const",
             "fill_value": "<UNK>", "ngram_size": 2, "cache_encoder_embeddings": False, "compute_idf": False,
             "prompt": {"retrieval": {"type": None, "index_name": None, "model_name": None, "k": 0},
                        "task": None, "template": None}},
    "set": {"tokenizer": "space", "missing_value_strategy": "fill_with_const", "fill_value": "<UNK>",
            "lowercase": False, "most_common": 10000},
    "vector": {"vector_size": None, "missing_value_strategy": "fill_with_const", "fill_value": ""},
}
LUDWIG_GLOBAL = {"sample_ratio": 1.0, "sample_size": None, "oversample_minority": None, "undersample_majority": None,
                 "split": {"type": "random", "probabilities": [0.7, 0.1, 0.2]}, "global_max_sequence_length": None}


def problems(inputs: list[dict], preprocessing: dict | None = None) -> list[str]:
    config = {"input_features": inputs, "output_features": [TARGET]}
    if preprocessing is not None:
        config["preprocessing"] = preprocessing
    try:
        load_config(config)
    except ConfigError as err:
        return err.problems
    return []


def test_ludwigs_rendered_preprocessing_validates_unchanged():
    inputs = [{"name": ftype, "type": ftype, "preprocessing": dict(section)} for ftype, section in LUDWIG_RENDERED.items()]
    assert problems(inputs, dict(LUDWIG_GLOBAL)) == []


@pytest.mark.parametrize("split", [{"type": "datetime", "column": "day"}, {"type": "hash", "column": "user"},
                                   {"type": "datetime", "column": "day", "probabilities": [0.8, 0.1, 0.1]}])
def test_every_ludwig_split_type_is_accepted(split):
    assert problems([{"name": "x", "type": "number"}], {"split": split}) == []


@pytest.mark.parametrize("ftype, key, value, says", [
    ("number", "missing_value_strategy", "bfill", "plait does not implement Ludwig's bfill"),
    ("category", "missing_value_strategy", "ffill", "plait does not implement Ludwig's ffill"),
    ("number", "outlier_strategy", "ffill", "plait does not implement Ludwig's ffill"),
    ("text", "tokenizer", "english_lemmatize", "it needs spaCy's language models); use space_punct"),
    ("set", "tokenizer", "hf_tokenizer", "hf_tokenizer splits text into a model's subwords, for text features"),
    ("text", "tokenizer", "gpt2bpe", "use hf_tokenizer with pretrained_model_name_or_path"),
    ("text", "tokenizer", "space_punc", "unknown tokenizer 'space_punc'; did you mean space_punct?"),
    ("category", "cache_encoder_embeddings", True, "no embeddings are cached"),
    ("text", "vocab_file", "v.txt", None),
])
def test_ludwig_settings_plait_does_not_implement_are_refused_with_advice(ftype, key, value, says):
    preprocessing = {key: value, **({"tokenizer": "bpe"} if key == "vocab_file" else {})}
    found = problems([{"name": "x", "type": ftype, "preprocessing": preprocessing}])
    assert len(found) == 1 and found[0].startswith(f"input_features[0].preprocessing.{key}: ")
    assert (says or "bpe learns its own subword vocabulary") in found[0]


def test_a_key_of_another_feature_type_says_whose_it_is():
    found = problems([{"name": "x", "type": "category", "preprocessing": {"outlier_threshold": 2}}])
    assert found == ["input_features[0].preprocessing.outlier_threshold: a preprocessing setting of number features, "
                     "not of this feature type"]


@pytest.mark.parametrize("preprocessing, says", [
    ({"oversample_minority": 1.5}, "preprocessing.oversample_minority: got 1.5; give the share of rare-class rows"),
    ({"undersample_majority": -0.5}, "preprocessing.undersample_majority: got -0.5; give the share"),
    ({"oversample_minority": 0.5, "undersample_majority": 0.5},
     "preprocessing.undersample_majority: got 0.5 with oversample_minority 0.5; give one of them"),
    ({"global_max_sequence_length": 512}, "it applies to LLM models"),
    ({"sample_size": 100, "sample_ratio": 0.5}, "preprocessing.sample_size: got 100 with sample_ratio 0.5; give one"),
])
def test_global_settings_refused_with_advice(preprocessing, says):
    found = problems([{"name": "x", "type": "number"}], preprocessing)
    assert len(found) == 1 and says in found[0]


@pytest.mark.parametrize("setting", [{"oversample_minority": 0.5}, {"undersample_majority": 1},
                                     {"oversample_minority": 0, "undersample_majority": 0.3}])
def test_class_balancing_is_accepted_with_one_binary_output(setting):
    assert problems([{"name": "x", "type": "number"}], setting) == []
    assert load_config({"input_features": [{"name": "x", "type": "number"}], "output_features": [TARGET],
                        "preprocessing": setting}).preprocessing.balancing == {k: v for k, v in setting.items() if v}


@pytest.mark.parametrize("outputs, types", [
    ([{"name": "y", "type": "category"}], "category"),
    ([TARGET, {"name": "z", "type": "binary"}], "binary, binary"),
])
def test_class_balancing_needs_exactly_one_binary_output(outputs, types):
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": outputs,
              "preprocessing": {"undersample_majority": 0.5}}
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert err.value.problems == [
        f"preprocessing.undersample_majority: got 0.5 with output features of type {types}; class balancing needs "
        f"exactly one output feature, a binary one. Set it to null, or weight the classes in the loss instead "
        f"(loss.positive_class_weight of a binary output, loss.class_weights of a category output)"]


@pytest.mark.parametrize("normalization", ["log1p", "quantile"])
def test_a_number_output_refuses_a_normalization_it_cannot_map_back(normalization):
    config = {"input_features": [{"name": "x", "type": "number"}],
              "output_features": [{"name": "y", "type": "number", "preprocessing": {"normalization": normalization}}]}
    with pytest.raises(ConfigError, match=rf"output_features\[0\].preprocessing.normalization: got '{normalization}'"):
        load_config(config)


def test_plait_defaults_that_differ_from_ludwigs_record_ludwigs():
    def ludwig_default(model, name):
        return (model.model_fields[name].json_schema_extra or {}).get(LUDWIG_DEFAULT)

    assert TextPreprocessing().lowercase is False  # Ludwig's, since plait's measured no better
    assert ludwig_default(TextPreprocessing, "fill_value") == "<UNK>"
    assert NumberOutputPreprocessing.model_fields["normalization"].json_schema_extra == {LUDWIG_DEFAULT: None}
    assert NumberOutputPreprocessing().normalization == "zscore"
