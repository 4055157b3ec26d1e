"""The texts of an LLM (``model_type: llm``): the prompt and the target (and, for a preference
trainer, the rejected completion), each tokenized by the base model's own tokenizer.

The prompt is the input feature's text put through ``prompt.template`` (which may read other
columns), tokenized as the model reads a text (its special tokens, such as a start token,
included). The target is tokenized bare and ends with the model's end token, so that the model
learns where to stop. Stored ids are the tokenizer's plus one (0 pads), as for every Hugging Face
tokenizer in plait (plait.features.hf_tokens).
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from plait.config.llm import SAMPLE, TASK, template_parts
from plait.errors import ModelError
from plait.features import hf_tokens
from plait.features import stats as st
from plait.features.base import FeatureProcessor, table_column
from plait.features.text_ops import as_strings
from plait.utils.hf_models import MODEL_CONFIG, context_length, model_folder, read_model_config, tokenizer_fingerprint, tokenizer_json
from plait.utils.tokens import ID_OFFSET

log = logging.getLogger("plait")


class LLMTextProcessor(FeatureProcessor):
    """What the prompt and the target share: the tokenizer, the missing values, the length cap."""

    type = "text"
    special_tokens = True
    """Whether the tokenizer adds the model's special tokens (a start token) to this text."""

    def __init__(self, feature, config, is_output: bool):
        super().__init__(feature, is_output)
        self.base_model = config.base_model
        self.setting = "base_model"
        self.global_cap = config.preprocessing.global_max_sequence_length
        self.caps_asked = tuple(f.preprocessing.max_sequence_length or hf_tokens.DEFAULT_LENGTH
                                for f in (config.input_features[0], config.output_features[0]))

    def prepare(self, column: pa.Array) -> pa.Array:
        return as_strings(column)

    def _serialized(self) -> str:
        return tokenizer_json(self.base_model, self.setting)

    def partial_stats(self, column: pa.Array) -> dict:
        """Rows longer than the cap are counted (the tokenizer runs twice: here uncut)."""
        counts = hf_tokens.token_counts(column.fill_null("").to_pylist(), self._serialized(), self.special_tokens)
        counts += 0 if self.special_tokens else 1  # a target ends with the end token
        return {"rows": len(column), "too_long": int((counts > self._cap()).sum()),
                "texts": st.value_counts(column) if self.preprocessing.missing_value_strategy == "fill_with_mode" else None}

    def merge_stats(self, a: dict, b: dict) -> dict:
        return {"rows": a["rows"] + b["rows"], "too_long": a["too_long"] + b["too_long"],
                "texts": st.merge_counts(a["texts"], b["texts"])}

    def _model_config(self) -> dict:
        folder = model_folder(self.base_model, self.setting)
        return read_model_config(folder, self.setting)

    def _cap(self) -> int:
        """The most tokens a row of this text keeps (see ``token_caps``)."""
        return token_caps(self.caps_asked, context_length(self._model_config()), self.global_cap)[self.is_output]

    def finalize(self, stats: dict) -> dict:
        serialized = self._serialized()
        cap = self._cap()
        too_long = stats["too_long"]
        if too_long:
            role = "output" if self.is_output else "input"
            log.warning("%s feature %r: %d of %d training rows have more than %d tokens; they are cut to that length "
                        "(its preprocessing.max_sequence_length, within the model's context and "
                        "global_max_sequence_length).", role.capitalize(), self.name, too_long, stats["rows"], cap)
        return {"hf_tokenizer": serialized, "vocabulary": hf_tokens.vocabulary(serialized), "sequence_length": cap,
                "padding": "right", "fill_value": self.fill_value(stats["texts"])}

    def cache_inputs(self) -> dict:
        return {"hf_tokenizer": tokenizer_fingerprint(self.base_model, self.setting), "llm": [self.type, self._cap()]}


class PromptProcessor(LLMTextProcessor):
    """The input: each row's prompt, made from the template and the row's columns."""

    def __init__(self, feature, config):
        super().__init__(feature, config, is_output=False)
        self.parts = template_parts(config.prompt.text())
        self.task = config.prompt.task or ""
        self.template_columns = config.template_columns

    @property
    def columns(self) -> list[str]:
        return self.template_columns

    def read(self, table: pa.Table) -> pa.Array:
        """The prompts; null where the input's own column is (its missing-value strategy applies)."""
        own = as_strings(table_column(table, self.column))
        pieces = []
        for literal, name in self.parts:
            if literal:
                pieces.append(literal)
            if name is None:
                continue
            if name == TASK:
                pieces.append(self.task)
            elif name in (SAMPLE, self.column):
                pieces.append(own)
            else:
                pieces.append(pc.fill_null(as_strings(table_column(table, name)), ""))
        if not any(isinstance(p, pa.Array) for p in pieces):
            return own
        arrays = [p if isinstance(p, pa.Array) else pa.array([p] * len(own), pa.string()) for p in pieces]
        prompts = pc.binary_join_element_wise(*arrays, "")
        return pc.if_else(pc.is_null(own), pa.scalar(None, pa.string()), prompts)

    def finalize(self, stats: dict) -> dict:
        """The tokens' metadata, and the model's config: a saved model builds its skeleton from it."""
        model_config = self._model_config()
        if "model_type" not in model_config:
            raise ModelError(f"{self.setting}: the model's config.json names no model_type, so transformers cannot "
                             f"tell its architecture")
        return {**super().finalize(stats), MODEL_CONFIG: model_config}

    def cache_inputs(self) -> dict:
        return {**super().cache_inputs(), "prompt": [self.parts, self.task]}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        column = self.fill(column, metadata["fill_value"])
        return hf_tokens.encode(column.fill_null("").to_pylist(), metadata["hf_tokenizer"], metadata["sequence_length"])


class TargetProcessor(LLMTextProcessor):
    """The output: the target's tokens, bare, then the model's end token."""

    special_tokens = False

    def __init__(self, feature, config):
        super().__init__(feature, config, is_output=True)

    def finalize(self, stats: dict) -> dict:
        return {**super().finalize(stats), "stop_id": end_token(self._model_config(), self.setting) + ID_OFFSET,
                "generated": True}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        column = self.fill(column, metadata["fill_value"])
        return hf_tokens.encode_ending(column.fill_null("").to_pylist(), metadata["hf_tokenizer"],
                                       metadata["sequence_length"], metadata["stop_id"])


class CategoryTargetProcessor(TargetProcessor):
    """An LLM's category output: each row's label, written as a text target is; its metadata adds
    the labels and each label's tokens (what generation is held to with constrain_to_vocabulary)."""

    def finalize(self, stats: dict) -> dict:
        metadata = super().finalize(stats)
        labels = self.preprocessing.labels
        ids = hf_tokens.encode_ending(labels, metadata["hf_tokenizer"], metadata["sequence_length"],
                                      metadata["stop_id"]).to_pylist()
        return {**metadata, "labels": labels, "label_ids": ids}


class RejectedProcessor(TargetProcessor):
    """A preference trainer's rejected completions (``trainer.rejected_column``): tokenized as the
    target is, with its settings and length, to train only."""

    training_only = True

    def __init__(self, config):
        target = config.output_features[0]
        column = config.rejected_column
        super().__init__(target.model_copy(update={"name": column, "column": column}), config)

    @property
    def described(self) -> str:
        return "trainer.rejected_column (the rejected completions)"


def token_caps(asked: tuple[int, int], context: int | None, total: int | None) -> tuple[int, int]:
    """The most tokens of (prompt, target) a row keeps: each feature's max_sequence_length, and
    together within the model's context and global_max_sequence_length, of which the target gets
    at most half and the prompt the rest."""
    limits = [c for c in (context, total) if c is not None]
    if not limits:
        return asked
    room = max(2, min(limits))
    target = min(asked[1], room // 2)
    return min(asked[0], room - target), target


def end_token(model_config: dict, setting: str) -> int:
    """The model's end-of-text token id (the first, where its config lists several)."""
    eos = model_config.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    if not isinstance(eos, int):
        raise ModelError(f"{setting}: the model's config.json has no eos_token_id, so plait cannot teach it where a "
                         f"text ends; add the end token's id to config.json")
    return eos


def llm_processors(config, directory: str | None = None) -> list[FeatureProcessor]:
    """The prompt's and the target's processors of an LLM config."""
    target = config.output_features[0]
    target_class = CategoryTargetProcessor if target.type == "category" else TargetProcessor
    processors = [PromptProcessor(config.input_features[0], config), target_class(target, config)]
    if config.rejected_column is not None:
        processors.append(RejectedProcessor(config))
    for processor in processors:
        processor.data_directory = directory
    return processors
