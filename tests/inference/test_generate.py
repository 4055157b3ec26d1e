"""Generation from an LLM without a dataset (``Model.generate``, ``Model.generate_stream``): the
same text predict gives, settings per call, streamed pieces that join to the whole text, and a
clear error for a bad prompt or setting."""

from __future__ import annotations

import pytest

from hf_models import COLORS, FRENCH, colour_rows, llm_config, write_colour_llama
from plait.api import Model
from plait.errors import ConfigError, UsageError

pytestmark = pytest.mark.usefixtures("one_torch_thread")
LONG = {"max_new_tokens": 4, "min_new_tokens": 4}
"""Four tokens whatever the model would end with: a text of several pieces to stream."""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    base = write_colour_llama(tmp_path_factory.mktemp("models") / "llama")
    trainer = {"type": "finetune", "epochs": 3, "batch_size": 16, "learning_rate": 0.003}
    model = Model(llm_config(base, trainer=trainer, backend={"type": "local"}))
    model.train(colour_rows(), progress_bar=False)
    return model


def test_generate_gives_what_predict_gives_for_a_text_a_list_or_rows(model):
    assert model.generate("red") == "rouge"
    assert model.generate(COLORS) == FRENCH == model.predict(colour_rows(1))["french_predictions"].tolist()
    assert model.generate([{"colour": "blue"}, "green"]) == ["bleu", "vert"]


def test_a_calls_settings_go_over_the_configs(model):
    assert [len(text.split()) for text in model.generate(COLORS[:3], generation_config=LONG)] == [4, 4, 4]
    assert model.generate("red") == "rouge", "the config's settings are untouched"
    assert model.predict(colour_rows(1), generation_config=LONG)["french_probabilities"].map(len).tolist() == [4] * 8


def test_streamed_pieces_come_one_by_one_and_join_to_the_generated_text(model, capsys):
    pieces = list(model.generate_stream("red", generation_config=LONG))
    assert len(pieces) == 4 and "".join(pieces) == model.generate("red", generation_config=LONG)
    assert model.generate(["red", "blue"], streaming=True) == ["rouge", "bleu"]
    assert capsys.readouterr().out == "rouge\nbleu\n"


@pytest.mark.parametrize("settings, error, message", [
    ({"max_new_token": 3}, ConfigError, "generation_config.max_new_token: unknown field; did you mean max_new_tokens?"),
    ({"top_p": 2}, ConfigError, "generation_config.top_p: Input should be less than or equal to 1"),
    ("greedy", UsageError, "generation_config: got str; give a mapping of generation settings"),
])
def test_a_bad_setting_is_named(model, settings, error, message):
    with pytest.raises(error, match=message.replace("?", r"\?")):
        model.generate("red", generation_config=settings)


def test_a_prompt_of_another_kind_and_streaming_with_beams_are_refused(model):
    with pytest.raises(UsageError, match="a prompt is a string"):
        model.generate([3])
    with pytest.raises(UsageError, match="num_beams to 1"):
        next(model.generate_stream("red", generation_config={"num_beams": 2}))


def test_an_ecd_model_does_not_generate(tmp_path):
    import pandas as pd

    model = Model({"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
                   "trainer": {"epochs": 1}, "backend": {"type": "local"}})
    model.train(pd.DataFrame({"x": range(20), "y": [i % 2 == 0 for i in range(20)]}), progress_bar=False)
    with pytest.raises(UsageError, match="only an LLM"):
        model.generate("red")
    with pytest.raises(UsageError, match="generation_config: only an LLM"):
        model.predict(pd.DataFrame({"x": [1]}), generation_config={"max_new_tokens": 2})
