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
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import torch
from pydantic import ValidationError

from plait.config.base import format_errors
from plait.config.llm import GenerationConfig
from plait.errors import ConfigError, UsageError
from plait.features import hf_tokens
from plait.features.llm import PromptProcessor
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
        self.head = module.head(target.name)
        """The target's head: its end token, and where each generated text ends."""
        self.stop_id = self.head.stop_id
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

    def generate(self, prompts: list[str | dict], overrides: dict | GenerationConfig | None = None,
                 on_piece: Callable[[int, str], None] | None = None) -> list[Generated]:
        """Each prompt's generated text, the prompts generated together as one batch.
        ``on_piece(row, text)``: called on this thread with each new piece of a row's text as
        its tokens are generated (the pieces of a row joined are its text)."""
        settings = self.settings(overrides)
        if on_piece is not None and settings.num_beams > 1:
            raise UsageError("streaming generates one token at a time, which beam search does not (it picks the "
                             "text at the end); set num_beams to 1, or generate without streaming")
        ids = self.prompt_ids(self.rows(prompts))
        streamer = None if on_piece is None else _PieceStreamer(len(ids), self.stop_id, self.tokenizer, on_piece)
        with self.lock:
            output = self.module.generated(ids.to(self._device()), settings, streamer)
        tokens = output[..., 1].long().cpu()
        lengths = self.head.lengths(tokens)
        texts = hf_tokens.decode([row[:n].tolist() for row, n in zip(tokens, lengths)], self.tokenizer)
        stopped = (tokens == self.stop_id).any(1)
        return [Generated(text, int((row > 0).sum()), int(n), "stop" if stop else "length")
                for text, row, n, stop in zip(texts, ids, lengths, stopped)]

    def stream(self, prompt: str | dict, overrides: dict | GenerationConfig | None = None) -> Iterator[str]:
        """The prompt's generated text in pieces, each yielded as soon as its tokens are
        generated (the pieces joined are what ``generate`` gives)."""
        pieces: queue.Queue = queue.Queue()
        done = object()
        settings = self.settings(overrides)  # a bad setting is raised here, on the first next()

        def run() -> None:
            try:
                self.generate([prompt], settings, on_piece=lambda _, piece: pieces.put(piece))
                pieces.put(done)
            except BaseException as error:  # handed to the reader, which raises it
                pieces.put(error)

        thread = threading.Thread(target=run, name="plait-generate", daemon=True)
        thread.start()
        try:
            while (item := pieces.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            thread.join()

    def _device(self) -> torch.device:
        return next(self.module.parameters()).device


class _PieceStreamer:
    """transformers' streamer protocol (``put`` with each step's tokens, one per row; ``end``)
    turned into text pieces per row. Each row's text is decoded whole again at every step and its
    new end handed on, so that a token that only makes sense with the next (a word split in
    subwords, a character split in bytes) comes out right. The first ``put`` is the prompt."""

    def __init__(self, rows: int, stop_id: int, tokenizer: str, on_piece: Callable[[int, str], None]):
        self.stop_id, self.tokenizer, self.on_piece = stop_id, tokenizer, on_piece
        self.tokens: list[list[int]] = [[] for _ in range(rows)]
        self.shown = [""] * rows
        self.ended = [False] * rows
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for row, token in enumerate(value.reshape(-1).tolist()):
            stored = token + ID_OFFSET
            if self.ended[row] or stored == self.stop_id:
                self.ended[row] = True
                continue
            self.tokens[row].append(stored)
            text = hf_tokens.decode([self.tokens[row]], self.tokenizer)[0]
            shown = self.shown[row]
            if text.endswith("\ufffd") or len(text) <= len(shown) or not text.startswith(shown):
                continue  # an unfinished character, or nothing new yet
            self.shown[row] = text
            self.on_piece(row, text[len(shown):])

    def end(self) -> None:
        pass


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
