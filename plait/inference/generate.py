"""Text from an LLM (``model_type: llm``) without a dataset: prompts in, generated text out,
whole or streamed as the tokens come. ``Model.generate``, ``Model.generate_stream`` and the
LLM endpoints of ``plait serve`` all go through :class:`Generator`.

A prompt is given as the input feature's text (a string) or as a row (a dict holding every
column the prompt template reads); it becomes the model's input exactly as a dataset's row does
in ``predict`` (the template, the tokenizer, the length cap). Generation settings are the
config's ``generation`` section, with a call's own settings over it.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
import torch
from pydantic import ValidationError

from plait.config.base import format_errors
from plait.config.llm import GenerationConfig
from plait.errors import ConfigError, UsageError
from plait.features import hf_tokens
from plait.features.llm import PromptProcessor
from plait.models.sequence_heads import PAD
from plait.utils.tokens import ID_OFFSET


@dataclass
class Generated:
    """One prompt's generated text."""

    text: str
    prompt_tokens: int
    """Tokens of the prompt as the model read it (after the length cap)."""
    tokens: int
    """Tokens generated, the end token not counted."""
    finish_reason: str
    """stop: the model ended the text; length: it reached max_new_tokens first."""


class Generator:
    """Generation from a trained LLM module (:class:`plait.models.llm.LLM`) in this process."""

    def __init__(self, config, metadata: dict, module: torch.nn.Module):
        self.config, self.module = config, module.eval()
        prompt, target = config.input_features[0], config.output_features[0]
        self.prompts = PromptProcessor(prompt, config)
        self.prompt_metadata = metadata["features"][prompt.name]
        self.tokenizer = metadata["features"][target.name]["hf_tokenizer"]
        self.stop_id = metadata["features"][target.name]["stop_id"]
        self.lock = threading.Lock()
        """One generation at a time: a module's forward is not safe to run from two threads."""

    def settings(self, overrides: dict | GenerationConfig | None = None) -> GenerationConfig:
        return generation_settings(self.config, overrides)

    def rows(self, prompts: Iterable[str | dict]) -> list[dict]:
        """Each prompt as a row of the columns the template reads (a string is the input's text)."""
        column, needed = self.prompts.column, self.prompts.columns
        rows = []
        for prompt in prompts:
            row = {column: prompt} if isinstance(prompt, str) else prompt
            if not isinstance(row, dict):
                raise UsageError(f"a prompt is a string (the {column!r} text) or a dict of the template's columns "
                                 f"({', '.join(needed)}); got {type(prompt).__name__}")
            missing = [name for name in needed if name not in row]
            if missing:
                raise UsageError(f"the prompt template reads the columns {', '.join(needed)}; a prompt lacks "
                                 f"{', '.join(missing)} (give each prompt as a dict of them)")
            rows.append({name: row[name] for name in needed})
        return rows

    def prompt_ids(self, rows: list[dict]) -> torch.Tensor:
        """The rows' prompts as right-padded stored ids ``[rows, longest]``, as predict makes them."""
        table = pa.Table.from_pylist(rows)
        encoded = self.prompts.transform(self.prompts.read(table), self.prompt_metadata).to_pylist()
        ids = torch.zeros(len(encoded), max(1, max(map(len, encoded))), dtype=torch.long)
        for i, row in enumerate(encoded):
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        return ids

    def generate(self, prompts: list[str | dict], overrides: dict | None = None) -> list[Generated]:
        """Each prompt's generated text, the prompts generated together as one batch."""
        settings = self.settings(overrides)
        ids = self.prompt_ids(self.rows(prompts))
        with self.lock:
            output = self.module.generated(ids.to(self._device()), settings)
        tokens = output[..., 1].long().cpu()
        ended = (tokens == PAD) | (tokens == self.stop_id)
        lengths = torch.where(ended.any(1), ended.float().argmax(1), torch.full_like(tokens[:, 0], tokens.shape[1]))
        texts = hf_tokens.decode([row[:n].tolist() for row, n in zip(tokens, lengths)], self.tokenizer)
        stopped = (tokens == self.stop_id).any(1)
        return [Generated(text, int((row > 0).sum()), int(n), "stop" if stop else "length")
                for text, row, n, stop in zip(texts, ids, lengths, stopped)]

    def stream(self, prompt: str | dict, overrides: dict | None = None) -> Iterator[str]:
        """The prompt's generated text in pieces, each yielded as soon as its tokens are
        generated (the pieces joined are what ``generate`` gives)."""
        settings = self.settings(overrides)
        if settings.num_beams > 1:
            raise UsageError("streaming generates one token at a time, which beam search does not (it picks the "
                             "text at the end); set num_beams to 1, or generate without streaming")
        ids = self.prompt_ids(self.rows([prompt]))
        steps = _TokenQueue()

        def run() -> None:
            try:
                with self.lock:
                    self.module.generated(ids.to(self._device()), settings, streamer=steps)
            except BaseException as error:  # handed to the reader, which raises it
                steps.fail(error)

        thread = threading.Thread(target=run, name="plait-generate", daemon=True)
        thread.start()
        try:
            yield from self._pieces(steps)
        finally:
            thread.join()

    def _pieces(self, steps: "_TokenQueue") -> Iterator[str]:
        """Text pieces from the queue's token ids: the whole text decoded again at each step and
        its new end yielded, so that a token that only makes sense with the next (a word split
        in subwords, a character split in bytes) comes out right."""
        generated: list[int] = []
        shown = ""
        for token in steps:
            stored = token + ID_OFFSET
            if stored == self.stop_id:
                break
            generated.append(stored)
            text = hf_tokens.decode([generated], self.tokenizer)[0]
            if text.endswith("\ufffd"):  # an unfinished character: wait for its next bytes
                continue
            if len(text) > len(shown) and text.startswith(shown):
                yield text[len(shown):]
                shown = text

    def _device(self) -> torch.device:
        return next(self.module.parameters()).device


class _TokenQueue:
    """transformers' streamer protocol (``put`` for each step's tokens, ``end``) as an iterator of
    token ids; the first ``put`` is the prompt, which is not generated and is skipped."""

    _END = object()

    def __init__(self):
        self.queue: queue.Queue = queue.Queue()
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for token in value.reshape(-1).tolist():
            self.queue.put(token)

    def end(self) -> None:
        self.queue.put(self._END)

    def fail(self, error: BaseException) -> None:
        self.queue.put(error)

    def __iter__(self) -> Iterator[int]:
        while True:
            item = self.queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


def generation_settings(config, overrides: dict | GenerationConfig | None,
                        setting: str = "generation_config") -> GenerationConfig:
    """An LLM config's generation settings with a call's ``overrides`` over them, checked: a
    ConfigError naming ``setting`` and the key for a bad one."""
    if getattr(config, "model_type", None) != "llm":
        raise UsageError(f"{setting}: only an LLM (model_type: llm) generates text; this model is an ECD model, "
                         f"which has no generation settings")
    if overrides is None:
        return config.generation
    if isinstance(overrides, GenerationConfig):
        return overrides
    if not isinstance(overrides, dict):
        raise UsageError(f"{setting}: got {type(overrides).__name__}; give a mapping of generation settings, such as "
                         f"{{'max_new_tokens': 16}}")
    data = {**config.generation.model_dump(), **overrides}
    try:
        return GenerationConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError([f"{setting}.{line}" for line in format_errors(error, data, GenerationConfig)]) from None
