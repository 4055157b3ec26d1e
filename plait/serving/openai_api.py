"""OpenAI's completions API over a served LLM: ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions``, whole or streamed as server-sent events (``stream: true``), so
that OpenAI's client libraries and the tools built on them talk to a plait model unchanged.

A request becomes generation jobs (:class:`GenerationItem`, one per prompt and choice) that the
runner batches with other requests' (``plait.serving.runners``). What it asks for maps onto the
model's ``generation`` settings: ``max_tokens`` (at most the server's ``serve.max_tokens``; by
default the model's ``max_new_tokens`` within it), ``temperature`` (0: greedy; above: sampling),
``top_p``, ``n``, ``stop``. A request without ``temperature`` generates as the model's config says
(greedy by default, so that answers repeat). OpenAI fields plait cannot honour (``logprobs``,
``seed``, penalties, tools, ...) are a 400 naming the field, never silently ignored.

A chat is read as one prompt: a single user message is the input text, exactly what
``/v1/completions`` and ``plait predict`` read; a longer conversation is written out as a
transcript, one ``role: content`` line per message, then ``assistant:``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from plait.errors import PlaitError
from plait.serving.payloads import ClientError

COMPLETION_FIELDS = {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop",
                     "user", "echo", "logprobs", "best_of", "seed", "suffix", "logit_bias", "presence_penalty",
                     "frequency_penalty"}
CHAT_FIELDS = (COMPLETION_FIELDS - {"prompt", "echo", "best_of", "suffix"}) | {
    "messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice", "functions",
    "function_call", "parallel_tool_calls", "store", "metadata", "modalities"}
NOT_HONOURED = {
    "seed": (None,), "echo": (None, False), "logprobs": (None, False), "top_logprobs": (None, 0),
    "best_of": (None, 1), "suffix": (None, ""), "logit_bias": (None, {}), "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0), "tools": (None, []), "tool_choice": (None, "none"), "functions": (None, []),
    "function_call": (None, "none"), "parallel_tool_calls": (None, False, True), "store": (None, False),
    "response_format": (None, {"type": "text"}), "modalities": (None, ["text"]),
}
"""Fields plait accepts only at values that ask for nothing it does not do."""
WHY_NOT = {"seed": "requests are generated in shared batches, so a seed cannot make one request repeatable"}
ROLES = ("system", "developer", "user", "assistant")
MAX_STOPS = 4


@dataclass
class GenerationItem:
    """One text to generate: a prompt, the generation settings over the model's, and where its
    pieces go as they come (None: only the whole text is wanted)."""

    prompt: str | dict
    settings: Any
    """A checked ``GenerationConfig``."""
    on_piece: Callable[[str], None] | None = None


@dataclass
class CompletionRequest:
    """A checked request of either endpoint."""

    chat: bool
    prompts: list[str]
    settings: Any
    n: int
    stream: bool
    include_usage: bool
    stops: list[str] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))


def parse_request(body: Any, chat: bool, served: str, max_tokens: int, max_choices: int,
                  settings_of: Callable[[dict], Any]) -> CompletionRequest:
    """A request body (parsed JSON) checked against this server: ``served`` (the model's name),
    ``max_tokens`` (``serve.max_tokens``), ``max_choices`` (prompts times ``n``, a batch's worth)
    and ``settings_of`` (generation overrides to checked settings; raises for a bad value)."""
    endpoint = "/v1/chat/completions" if chat else "/v1/completions"
    if not isinstance(body, dict):
        raise ClientError(400, f"{endpoint} takes a JSON object (OpenAI's request); got {type(body).__name__}")
    _check_fields(body, CHAT_FIELDS if chat else COMPLETION_FIELDS, endpoint)
    model = body.get("model")
    if model != served:
        raise ClientError(404 if isinstance(model, str) else 400,
                          f"model: this server serves the model {served!r} (GET /v1/models); got {model!r}")
    prompts = [chat_prompt(body.get("messages"))] if chat else completion_prompts(body.get("prompt"))
    n = _integer(body, "n", 1, 1)
    if len(prompts) * n > max_choices:
        raise ClientError(400, f"{len(prompts)} prompt(s) x n={n} is more than this server generates at once "
                               f"({max_choices}, serve.max_batch_size); send fewer")
    overrides = generation_overrides(body, chat, max_tokens)
    try:
        settings = settings_of(overrides)
    except PlaitError as error:  # a ConfigError naming the setting: the client's to fix
        raise ClientError(400, str(error).replace("invalid config:\n  ", "")) from None
    if "max_new_tokens" not in overrides:
        settings = bounded_max_tokens(settings, max_tokens)
    stream = _boolean(body, "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage"} or (options and not stream):
        raise ClientError(400, "stream_options: takes {\"include_usage\": true|false}, with stream: true")
    if stream and settings.num_beams > 1:
        raise ClientError(400, "stream: the model's generation uses beam search, which picks the text at the end; "
                               "ask without stream")
    return CompletionRequest(chat, prompts, settings, n, stream, bool(options.get("include_usage")), _stops(body))


def _check_fields(body: dict, known: set[str], endpoint: str) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise ClientError(400, f"{endpoint}: unknown field(s) {', '.join(unknown)}; it takes {', '.join(sorted(known))}")
    for name, accepted in NOT_HONOURED.items():
        if name in body and body[name] not in accepted:
            why = WHY_NOT.get(name, "plait's server does not implement it")
            raise ClientError(400, f"{name}: got {body[name]!r}; {why} (leave it out)")


def completion_prompts(prompt: Any) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return prompt
    raise ClientError(400, "prompt: give a string or a non-empty list of strings (token ids are not taken: the "
                           "server tokenizes with the model's tokenizer)")


def chat_prompt(messages: Any) -> str:
    """The prompt of a chat (see the module's docstring)."""
    if not isinstance(messages, list) or not messages:
        raise ClientError(400, "messages: give a non-empty list of {\"role\": ..., \"content\": ...}")
    turns = [(_role(m, i), _content(m, i)) for i, m in enumerate(messages)]
    if turns[-1][0] != "user":
        raise ClientError(400, "messages: the last message must be the user's (the model answers it)")
    if len(turns) == 1:
        return turns[0][1]
    return "\n".join(f"{role}: {content}" for role, content in turns) + "\nassistant:"


def _role(message: Any, index: int) -> str:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise ClientError(400, f"messages[{index}]: a message is {{\"role\": one of {', '.join(ROLES)}, "
                               f"\"content\": text}}")
    return message["role"]


def _content(message: dict, index: int) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's parts: text parts only
        if all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            return "".join(p["text"] for p in content)
    elif isinstance(content, str):
        return content
    raise ClientError(400, f"messages[{index}].content: give text, or a list of {{\"type\": \"text\", \"text\": ...}} "
                           f"parts (this model reads text only)")


def generation_overrides(body: dict, chat: bool, max_tokens: int) -> dict:
    """The request's settings as generation settings over the model's."""
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    overrides: dict = {}
    if body.get(key) is not None:
        asked = _integer(body, key, None, 1)
        if asked > max_tokens:
            raise ClientError(400, f"{key}: {asked} is more than this server generates for a request ({max_tokens}, "
                                   f"serve.max_tokens)")
        overrides["max_new_tokens"] = asked
    temperature, top_p = _number(body, "temperature", 0, 2), _number(body, "top_p", 0, 1)
    if temperature is not None:
        overrides["do_sample"] = temperature > 0
        if temperature > 0:
            overrides["temperature"] = temperature
    if top_p is not None:
        overrides["top_p"] = top_p
        overrides.setdefault("do_sample", True)
    return overrides


def bounded_max_tokens(settings, max_tokens: int):
    """``settings`` with max_new_tokens within the server's limit (a request that did not ask)."""
    if settings.max_new_tokens is not None and settings.max_new_tokens <= max_tokens:
        return settings
    return settings.model_copy(update={"max_new_tokens": max_tokens})


def _integer(body: dict, name: str, default: int | None, least: int) -> int:
    value = body.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ClientError(400, f"{name}: give an integer of at least {least}; got {value!r}")
    return value


def _number(body: dict, name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ClientError(400, f"{name}: give a number from {low:g} to {high:g}; got {value!r}")
    return float(value)


def _boolean(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ClientError(400, f"{name}: give true or false; got {value!r}")
    return value


def _stops(body: dict) -> list[str]:
    stop = body.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(s, str) and s for s in stops):
        raise ClientError(400, f"stop: give a string or a list of at most {MAX_STOPS} non-empty strings")
    return stops


# ---- answers -----------------------------------------------------------------------------------------


class StopText:
    """A choice's text as it streams, cut at the first stop string: what can be shown now (text
    that may be the start of a stop string waits for the next piece)."""

    def __init__(self, stops: list[str]):
        self.stops, self.text, self.shown, self.stopped = stops, "", 0, False
        self.hold = max((len(s) for s in stops), default=1) - 1

    def add(self, piece: str) -> str:
        if self.stopped:
            return ""
        self.text += piece
        cut = min((i for i in (self.text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped, self.text = True, self.text[:cut]
            return self._show(len(self.text))
        return self._show(max(self.shown, len(self.text) - self.hold))

    def rest(self) -> str:
        """What is left to show once the text is complete."""
        return self._show(len(self.text))

    def _show(self, upto: int) -> str:
        piece, self.shown = self.text[self.shown:upto], max(self.shown, upto)
        return piece


def finished(text: str, reason: str, stops: list[str]) -> tuple[str, str]:
    """A whole choice's text and finish reason, cut at the first stop string."""
    cuts = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[:min(cuts)], "stop") if cuts else (text, reason)


def choice(request: CompletionRequest, index: int, text: str | None, reason: str | None, delta: bool) -> dict:
    """One choice of an answer (``delta``: of a streamed chunk)."""
    if not request.chat:
        return {"index": index, "text": text or "", "logprobs": None, "finish_reason": reason}
    if delta:
        return {"index": index, "delta": {} if text is None else {"content": text}, "logprobs": None,
                "finish_reason": reason}
    return {"index": index, "message": {"role": "assistant", "content": text}, "logprobs": None,
            "finish_reason": reason}


def answer(request: CompletionRequest, model: str, choices: list[dict], usage: dict | None, chunk: bool) -> dict:
    """An answer, or a streamed chunk of one, in OpenAI's shape."""
    kind = ("chat.completion" if request.chat else "text_completion") + (".chunk" if chunk and request.chat else "")
    value = {"id": ("chatcmpl-" if request.chat else "cmpl-") + request.id, "object": kind,
             "created": request.created, "model": model, "choices": choices}
    if usage is not None or not chunk:
        value["usage"] = usage
    return value


def usage(prompt_tokens: list[int], completion_tokens: list[int]) -> dict:
    prompt, completion = sum(prompt_tokens), sum(completion_tokens)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def models_list(model: str, created: int) -> dict:
    return {"object": "list", "data": [{"id": model, "object": "model", "created": created, "owned_by": "plait"}]}


def error_body(message: str, status: int) -> dict:
    """An error in OpenAI's shape, which its clients read."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
