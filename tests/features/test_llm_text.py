"""An LLM's prompt and target: the template over the row's columns, the base model's tokens, the
end token, and the caps on both."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from hf_models import write_colour_llama
from plait.config import load_config
from plait.data.preprocess import preprocess
from plait.features import hf_tokens
from plait.utils.tokens import ID_OFFSET
from plait.features.llm import PromptProcessor, TargetProcessor, token_caps
from plait.errors import DataError


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def config(base, **sections):
    return load_config({"model_type": "llm", "base_model": str(base),
                        "input_features": [{"name": "colour", "type": "text"}],
                        "output_features": [{"name": "french", "type": "text"}],
                        "backend": {"type": "local"}, **sections})


def test_the_prompt_puts_the_task_and_the_rows_columns_into_the_template(base):
    cfg = config(base, prompt={"template": "{__task__} {colour} in {language} ({n})", "task": "translate :"})
    prompts = PromptProcessor(cfg.input_features[0], cfg).read(
        pa.table({"colour": ["red", None], "language": ["french", None], "n": [1, 2]}))
    assert prompts.to_pylist() == ["translate : red in french (1)", None], "a missing input stays missing"


def test_the_prompt_has_the_models_start_token_and_the_target_its_end_token(base):
    cfg = config(base, prompt={"template": "translate : {colour}"})
    prompt, target = PromptProcessor(cfg.input_features[0], cfg), TargetProcessor(cfg.output_features[0], cfg)
    prompt_meta = prompt.finalize(prompt.partial_stats(prompt.prepare(pa.array(["translate : red"]))))
    target_meta = target.finalize(target.partial_stats(target.prepare(pa.array(["rouge"]))))
    vocabulary = prompt_meta["vocabulary"]
    [ids] = prompt.transform(pa.array(["translate : red"]), prompt_meta).to_pylist()
    assert [vocabulary[i] for i in ids] == ["<s>", "translate", ":", "red"]
    [ids] = target.transform(pa.array(["rouge"]), target_meta).to_pylist()
    assert [vocabulary[i] for i in ids] == ["rouge", "</s>"] and target_meta["stop_id"] == 2 + ID_OFFSET
    assert prompt_meta["hf_model_config"]["model_type"] == "llama"


def test_long_texts_are_cut_and_the_target_keeps_its_end_token(base, caplog):
    cfg = config(base, output_features=[{"name": "french", "type": "text", "preprocessing": {"max_sequence_length": 3}}])
    target = TargetProcessor(cfg.output_features[0], cfg)
    stats = target.partial_stats(pa.array(["rouge vert bleu noir", "rose"]))
    meta = target.finalize(stats)
    assert "1 of 2 training rows have more than 3 tokens" in caplog.text
    rows = target.transform(pa.array(["rouge vert bleu noir", "rose"]), meta).to_pylist()
    assert [[meta["vocabulary"][i] for i in row] for row in rows] == [["rouge", "vert", "</s>"], ["rose", "</s>"]]


def test_the_model_context_is_shared_by_prompt_and_target():
    assert token_caps((256, 256), 128, None) == (64, 64)
    assert token_caps((20, 256), 128, 100) == (20, 50)
    assert token_caps((256, 8), 128, None) == (120, 8)
    assert token_caps((300, 40), None, None) == (300, 40)


def test_preprocessing_stores_each_rows_ids_and_the_cache_key_follows_the_template(base, tmp_path):
    frame = pd.DataFrame({"colour": ["red", "blue"] * 10, "french": ["rouge", "bleu"] * 10})
    cfg = config(base, prompt={"template": "translate : {colour}"}, backend={"type": "local", "cache_dir": str(tmp_path)})
    data = preprocess(cfg, frame)
    table = data.read_split("training")
    assert set(table.column_names) >= {"colour", "french"}
    other = preprocess(config(base, prompt={"template": "{colour}"}, backend={"type": "local", "cache_dir": str(tmp_path)}),
                       frame)
    assert other.location != data.location, "another template is another cache entry"


def test_a_column_the_template_names_must_be_in_the_data(base):
    cfg = config(base, prompt={"template": "{colour} in {language}"})
    with pytest.raises(DataError, match=r"has no column 'language' \(for input feature 'colour'\)"):
        preprocess(cfg, pd.DataFrame({"colour": ["red"] * 10, "french": ["rouge"] * 10}), use_cache=False)
