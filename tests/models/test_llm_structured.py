"""Structured generation (the ``text_parser`` decoder of Ludwig's structured-output example):
whatever the model's weights, every answer it writes is valid JSON under the decoder's schema,
or matches its regular expression whole, in predict and in generate."""

from __future__ import annotations

import json
import re

import pytest

from hf_models import COLORS, FRENCH, byte_level_tokenizer, colour_rows, local_llm_config, write_tiny_llama
from plait.api import Model
from plait.errors import ModelError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SCHEMA = {"type": "object", "properties": {"french": {"type": "string", "enum": FRENCH},
                                           "letters": {"type": "integer"}},
          "required": ["french", "letters"], "additionalProperties": False}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A random tiny Llama over a byte-level tokenizer: it can write any text, JSON included."""
    texts = [f'translate : {c} -> {{"french": "{f}", "letters": {len(f)}}}' for c, f in zip(COLORS, FRENCH)] * 5
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "llama", [], fast=byte_level_tokenizer(texts))


def untrained(base, cache_dir, decoder: dict | None, max_new_tokens: int = 200) -> Model:
    output = {"name": "french", "type": "text", **({"decoder": decoder} if decoder else {})}
    model = Model(local_llm_config(base, cache_dir, trainer={"type": "none"}, output_features=[output],
                                   generation={"max_new_tokens": max_new_tokens}))
    model.train(colour_rows(2), progress_bar=False)
    return model


def test_every_answer_follows_the_json_schema(base, cache_dir):
    model = untrained(base, cache_dir, {"type": "text_parser", "json_schema": SCHEMA})
    for text in [*model.predict(colour_rows(1))["french_predictions"], model.generate("translate : red")]:
        answer = json.loads(text)
        assert set(answer) == {"french", "letters"} and answer["french"] in FRENCH and isinstance(answer["letters"], int)


def test_every_answer_matches_the_regex_and_unconstrained_ones_do_not(base, cache_dir):
    pattern = "(rouge|vert|bleu)!?"
    model = untrained(base, cache_dir, {"type": "text_parser", "regex": pattern})
    texts = model.predict(colour_rows(1))["french_predictions"].tolist()
    assert all(re.fullmatch(pattern, text) for text in texts), texts
    free = untrained(base, cache_dir, None).predict(colour_rows(1))["french_predictions"]
    assert not all(re.fullmatch(pattern, text) for text in free), "the random model alone would write other text"


def test_answers_cut_by_the_token_limit_are_named_with_the_fix(base, cache_dir, caplog):
    model = untrained(base, cache_dir, {"type": "text_parser", "json_schema": SCHEMA}, max_new_tokens=3)
    model.predict(colour_rows(1))
    warnings = [r.getMessage() for r in caplog.records if "before their text_parser format ended" in r.getMessage()]
    assert len(warnings) == 1, "once, not once per batch"
    assert "answers reached generation.max_new_tokens (3)" in warnings[0]


@pytest.mark.parametrize("decoder, problem", [
    ({"type": "text_parser", "json_schema": {"type": "foo"}}, "decoder.json_schema: lm-format-enforcer cannot hold"),
    ({"type": "text_parser", "regex": r"\bword"}, "decoder.regex: lm-format-enforcer cannot hold generation to it"),
])
def test_a_format_the_enforcer_cannot_read_is_refused_before_any_answer(base, cache_dir, decoder, problem):
    with pytest.raises(ModelError, match=re.escape(problem)):
        untrained(base, cache_dir, decoder)
