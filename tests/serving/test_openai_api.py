"""A served LLM through OpenAI's API, driven by OpenAI's own Python client on loopback: completions
and chat completions, whole and streamed as server-sent events, several prompts and concurrent
requests batched together, and every request the client can fix answered with a 4xx in OpenAI's
error shape while the server goes on."""

from __future__ import annotations

import threading

import pytest

from hf_models import COLORS, FRENCH, byte_level_tokenizer, colour_rows, llm_config, write_colour_llama, write_tiny_llama
from tests.serving.conftest import RunningServer

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.usefixtures("one_torch_thread")
GENERATION = {"min_new_tokens": 3, "max_new_tokens": 8}
"""At least three tokens: each answer streams in several pieces."""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(server, client, the model's own predictions by colour, the served name)."""
    from plait.api import Model

    root = tmp_path_factory.mktemp("openai")
    config = {**llm_config(write_colour_llama(root / "llama"), generation=GENERATION),
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    model = Model(config)
    model.train(colour_rows(16), progress_bar=False)
    expected = dict(zip(COLORS, model.predict(colour_rows(1))["french_predictions"]))
    path = model.save(root / "colours")
    with RunningServer(str(path), settings={"batch_wait_ms": 100, "max_tokens": 16}) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        yield server, client, expected, "colours"


def test_a_completion_and_a_chat_answer_as_predict_does(served):
    _, client, expected, name = served
    assert [m.id for m in client.models.list()] == [name]
    completion = client.completions.create(model=name, prompt=["red", "blue"])
    assert [c.text for c in completion.choices] == [expected["red"], expected["blue"]]
    assert completion.choices[0].finish_reason == "stop" and completion.usage.completion_tokens >= 6
    chat = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "green"}])
    assert chat.choices[0].message.content == expected["green"] and chat.choices[0].message.role == "assistant"


def test_streamed_pieces_join_to_the_whole_answer(served):
    _, client, expected, name = served
    stream = client.completions.create(model=name, prompt="black", stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len([t for t in texts if t]) >= 3 and "".join(texts) == expected["black"]
    assert chunks[-1].usage.completion_tokens >= 3 and [c.choices[0].finish_reason for c in chunks if c.choices][-1]
    chat = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "pink"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chat if c.choices) == expected["pink"]


def test_a_stop_string_ends_the_text_before_it(served):
    _, client, expected, name = served
    first_word = expected["white"].split()[0]
    whole = client.completions.create(model=name, prompt="white", stop=[" "])
    assert (whole.choices[0].text, whole.choices[0].finish_reason) == (first_word, "stop")
    streamed = client.completions.create(model=name, prompt="white", stop=" ", stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == first_word


def test_concurrent_requests_share_generation_batches(served):
    server, client, expected, name = served
    answers = {}

    def ask(colour: str) -> None:
        answers[colour] = client.completions.create(model=name, prompt=colour).choices[0].text

    before = server.metrics.micro_batch.collect()[0].samples
    threads = [threading.Thread(target=ask, args=(colour,)) for colour in COLORS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == expected
    after = server.metrics.micro_batch.collect()[0].samples
    batches = _sample(after, "_count") - _sample(before, "_count")
    assert _sample(after, "_sum") - _sample(before, "_sum") == len(COLORS) and batches < len(COLORS)


def _sample(samples, suffix: str) -> float:
    return next(s.value for s in samples if s.name.endswith(suffix))


@pytest.mark.parametrize("request_, status, message", [
    ({"model": "gpt-4", "prompt": "red"}, 404, "this server serves the model 'colours'"),
    ({"prompt": "red", "max_tokens": 100}, 400, "max_tokens: 100 is more than this server generates for a request (16"),
    ({"prompt": "red", "seed": 3}, 400, "seed: got 3; requests are generated in shared batches"),
    ({"prompt": "red", "logprobs": 2}, 400, "logprobs: got 2; plait's server does not implement it"),
    ({"prompt": [1, 2]}, 400, "prompt: give a string or a non-empty list of strings"),
    ({"prompt": "red", "temperature": 3}, 400, "temperature: give a number from 0 to 2; got 3"),
    ({"prompt": "red", "extra_body": {"best_off": 2}}, 400, "unknown field(s) best_off"),
])
def test_a_request_the_client_can_fix_is_a_4xx_in_openais_shape(served, request_, status, message):
    server, client, expected, name = served
    with pytest.raises(openai.APIStatusError) as error:
        client.completions.create(**{"model": name, **request_})
    assert error.value.status_code == status and message in error.value.message
    assert error.value.body["type"] == "invalid_request_error"
    assert client.completions.create(model=name, prompt="red").choices[0].text == expected["red"], "still serving"


@pytest.mark.parametrize("messages, message", [
    ([], "messages: give a non-empty list"),
    ([{"role": "user", "content": "red"}, {"role": "assistant", "content": "rouge"}], "the last message must be the user's"),
    ([{"role": "robot", "content": "red"}], "messages[0]: a message is"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "this model reads text only"),
])
def test_a_chat_the_model_cannot_read_is_refused(served, messages, message):
    _, client, _, name = served
    with pytest.raises(openai.BadRequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        client.chat.completions.create(model=name, messages=messages)


def test_a_conversation_is_read_as_a_transcript():
    from plait.serving.openai_api import chat_prompt

    assert chat_prompt([{"role": "user", "content": "red"}]) == "red"
    assert chat_prompt([{"role": "system", "content": "Translate."}, {"role": "user", "content": [
        {"type": "text", "text": "red"}]}]) == "system: Translate.\nuser: red\nassistant:"


def test_a_text_parser_model_answers_json_valid_under_its_schema(tmp_path):
    """Structured generation through the server: whatever the (random) weights write, the answer
    of a completion and of a chat, whole or streamed, is JSON under the decoder's schema."""
    import json

    from plait.api import Model

    texts = [f'{c} -> {{"french": "{f}"}}' for c, f in zip(COLORS, FRENCH)] * 5
    base = write_tiny_llama(tmp_path / "llama", [], fast=byte_level_tokenizer(texts))
    schema = {"type": "object", "properties": {"french": {"type": "string", "enum": FRENCH}}, "required": ["french"],
              "additionalProperties": False}
    output = {"name": "french", "type": "text", "decoder": {"type": "text_parser", "json_schema": schema}}
    model = Model({**llm_config(base, trainer={"type": "none"}, output_features=[output],
                                generation={"max_new_tokens": 120}),
                   "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}})
    model.train(colour_rows(2), progress_bar=False)
    with RunningServer(str(model.save(tmp_path / "json")), settings={"max_tokens": 120}) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        whole = client.completions.create(model="json", prompt=["red", "blue"]).choices
        chat = client.chat.completions.create(model="json", messages=[{"role": "user", "content": "green"}])
        streamed = client.completions.create(model="json", prompt="black", stream=True)
        answers = [c.text for c in whole] + [chat.choices[0].message.content,
                                              "".join(c.choices[0].text for c in streamed if c.choices)]
    assert all(json.loads(answer)["french"] in FRENCH for answer in answers), answers
