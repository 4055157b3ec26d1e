"""The config of Ludwig's ``model_type: llm``: fine-tuning (or prompting) a pretrained causal
language model on one text input and one text output.

The model is a Hugging Face causal LM read from ``base_model`` (a folder, or a hub name in the
local cache; plait never downloads). The input text goes through ``prompt.template``, both texts
are tokenized by the model's own tokenizer, and the model learns to continue the prompt with the
target. ``adapter`` trains an adapter's weights instead of the model's own (with ``peft``).
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from plait.config.adapters import LORA_INITS_KEEPING_THE_BASE, AdapterSection
from plait.config.backend import AutoBackendConfig, BackendConfig, backend_data
from plait.config.hyperopt import HyperoptConfig, check_hyperopt_target
from plait.config.base import StrictModel, field_error, ludwig_only
from plait.config.preprocessing import CategoryPreprocessing, GlobalPreprocessing, MissingValueStrategy, TextPreprocessing
from plait.config.serve import ServeConfig
from plait.config.tracking import TrackerConfig, check_tracking
from plait.config.trainer import TrainerConfig, _eval_batch_size, _positive_or_auto

SAMPLE, TASK = "__sample__", "__task__"
"""The template's names for the input feature's own text and for ``prompt.task``."""
DEFAULT_TEMPLATE = "{__task__}\n\n{__sample__}\n\n"
"""The template when only a task is given: the task, then the input text."""


class PromptConfig(StrictModel):
    template: str | None = None
    """The prompt each row becomes, with ``{column}`` for a column of the data, ``{__sample__}``
    for the input feature's own text and ``{__task__}`` for ``task``. Null: the input text alone,
    or, with a task, the task then the text."""
    task: str | None = None
    """An instruction put where the template says ``{__task__}`` (by default, before the text)."""
    retrieval: Annotated[dict | None, ludwig_only(None, {"type": None}, {"type": None, "k": 0}, {
        "type": None, "k": 0, "index_name": None, "model_name": None},
        instead="put the examples you want into the template or the data")] = None
    """Ludwig's few-shot retrieval of training rows into the prompt; not implemented."""

    @field_validator("template")
    @classmethod
    def _template_parses(cls, value: str | None) -> str | None:
        if value is not None:
            template_fields(value)
        return value

    @model_validator(mode="after")
    def _task_has_a_place(self):
        if self.task is not None and self.template is not None and TASK not in template_fields(self.template):
            raise field_error("template", "prompt.task is set but the template has no {__task__}; add it where "
                                          "the task goes, or drop prompt.task")
        return self

    def text(self) -> str:
        """The template in force."""
        if self.template is not None:
            return self.template
        return DEFAULT_TEMPLATE if self.task is not None else "{__sample__}"


def template_fields(template: str) -> list[str]:
    """The names a template reads, in order and once each; a ValueError for a malformed one."""
    return list(dict.fromkeys(name for _, name in template_parts(template) if name is not None))


def template_parts(template: str) -> list[tuple[str, str | None]]:
    """The template as (literal text, name or None) pairs. A name is any column name, taken
    whole (``{a.b}`` is the column ``a.b``): no index, attribute, conversion or format spec."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"the template is malformed ({error}); write {{column}} for a value and {{{{ }}}} for a "
                         f"literal brace") from None
    for _, name, spec, conversion in parsed:
        if name is not None and (not name or spec or conversion):
            raise ValueError(f"the template has {{{name}{'!' + conversion if conversion else ''}"
                             f"{':' + spec if spec else ''}}}; write {{column}} with a column name (no "
                             f"conversion or format spec), and {{{{ }}}} for a literal brace")
    return [(literal, name) for literal, name, _, _ in parsed]


_GENERATE_MOVED = "transformers 5 moved it out of generate() to a hub repository, which plait never downloads"


class GenerationConfig(StrictModel):
    """How text is generated when predicting (transformers' generation settings)."""

    max_new_tokens: int | None = Field(32, gt=0)
    """The most tokens generated after the prompt (null: up to the output's max_sequence_length)."""
    min_new_tokens: int | None = Field(None, ge=0)
    """The fewest tokens generated before the end token may end the text."""
    do_sample: bool = Field(False, json_schema_extra={"ludwig_default": True})
    """Sample each token (with temperature, top_k and top_p) instead of taking the likeliest.
    plait's default is greedy (Ludwig's samples), so predictions are repeatable."""
    temperature: float | None = Field(0.1, ge=0)
    """Divides the logits before sampling (with do_sample): lower is closer to greedy."""
    top_k: int | None = Field(50, gt=0)
    """Sample among this many likeliest tokens (with do_sample)."""
    top_p: float | None = Field(1.0, ge=0, le=1)
    """Sample among the likeliest tokens whose probabilities add up to this (with do_sample)."""
    num_beams: int = Field(1, gt=0)
    """Beam search with this many beams (1: none)."""
    repetition_penalty: float = Field(1.0, ge=0)
    """Above 1: tokens already in the text become less likely."""
    no_repeat_ngram_size: int = Field(0, ge=0)
    """Above 0: no n-gram of this size appears twice."""
    length_penalty: float = 1.0
    """With beams: above 0 favours longer texts, below 0 shorter ones."""
    use_cache: bool = True
    """Reuse the attention keys and values of earlier steps (faster, same result)."""
    max_length: int | None = Field(32, gt=0)
    """Prompt plus text, in tokens, as transformers reads it: max_new_tokens, which plait always
    sets, takes precedence (as in transformers), so this has no effect."""
    min_length: int = Field(0, ge=0)
    """The fewest tokens of prompt plus text before the end token may end it (see min_new_tokens)."""
    early_stopping: bool | Literal["never"] = False
    """Beam search: stop once num_beams texts are complete (true), or as transformers' heuristic."""
    max_time: float | None = Field(None, gt=0)
    """Stop generating after this many seconds."""
    typical_p: float = Field(1.0, gt=0, le=1)
    """Sampling: keep the tokens whose information is closest to the expected (typical sampling)."""
    epsilon_cutoff: float = Field(0.0, ge=0, lt=1)
    """Sampling: drop the tokens less likely than this."""
    eta_cutoff: float = Field(0.0, ge=0, lt=1)
    """Sampling: eta sampling's cutoff."""
    encoder_repetition_penalty: float = Field(1.0, gt=0)
    """Above 1: tokens of the prompt become less likely (below 1: more)."""
    bad_words_ids: list[list[int]] | None = None
    """Token id sequences (the tokenizer's ids) that are never generated."""
    renormalize_logits: bool = False
    """Normalize the scores again after every logits processor."""
    forced_bos_token_id: int | None = None
    """A token id forced as the first generated token."""
    forced_eos_token_id: int | list[int] | None = None
    """A token id (or ids) forced as the last token when max_new_tokens is reached."""
    remove_invalid_values: bool = False
    """Replace nan and inf scores so that generation does not crash."""
    exponential_decay_length_penalty: tuple[int, float] | None = None
    """(start, factor): after ``start`` tokens, the end token becomes exponentially more likely."""
    suppress_tokens: list[int] | None = None
    """Token ids never generated."""
    begin_suppress_tokens: list[int] | None = None
    """Token ids not generated as the first token."""
    sequence_bias: list[list] | dict | None = None
    """Biases added to the scores of token sequences (transformers' sequence_bias)."""
    prompt_lookup_num_tokens: int | None = Field(None, gt=0)
    """Prompt lookup decoding: draft this many tokens from n-grams of the prompt (same text, faster
    where the answer copies the prompt)."""
    pad_token_id: int | None = None
    """The padding token id; null: the model's (or its end token)."""
    num_beam_groups: Annotated[int, ludwig_only(1, instead=f"{_GENERATE_MOVED} (group beam search)")] = 1
    diversity_penalty: Annotated[float, ludwig_only(0.0, 0, instead=f"{_GENERATE_MOVED} (group beam search)")] = 0.0
    penalty_alpha: Annotated[float | None, ludwig_only(None, instead=f"{_GENERATE_MOVED} (contrastive search)")] = None
    force_words_ids: Annotated[list | None, ludwig_only(None, instead=f"{_GENERATE_MOVED} (constrained beam search)")] = None
    forced_decoder_ids: Annotated[list | None, ludwig_only(None, instead="transformers 5 removed it; use "
                                                                         "forced_bos_token_id")] = None
    guidance_scale: Annotated[float | None, ludwig_only(None, instead="classifier-free guidance needs an "
                                                                      "unconditional prompt, which plait does not make")] = None
    bos_token_id: Annotated[int | None, ludwig_only(None, instead="a causal LM's prompt already starts with its "
                                                                  "start token; leave it null")] = None
    eos_token_id: Annotated[int | list[int] | None, ludwig_only(None, instead=(
        "plait ends the text at the end token the model was taught to write (the base model's); leave it null"))] = None

    def transformers_kwargs(self) -> dict[str, Any]:
        """The settings as ``generate()`` keywords: sampling settings only when sampling, and only
        the settings that change something (transformers warns of the others)."""
        kwargs = self.model_dump(exclude_none=True)
        for key in ("pad_token_id", "max_length", *LUDWIG_ONLY_GENERATION):  # the model passes the pad id
            kwargs.pop(key, None)
        if not self.do_sample:
            for key in SAMPLING_ONLY:
                kwargs.pop(key, None)
        return {key: value for key, value in kwargs.items() if NEUTRAL.get(key, _NONE) != value}


SAMPLING_ONLY = ("temperature", "top_k", "top_p", "typical_p", "epsilon_cutoff", "eta_cutoff")
LUDWIG_ONLY_GENERATION = ("num_beam_groups", "diversity_penalty", "penalty_alpha", "force_words_ids",
                          "forced_decoder_ids", "guidance_scale", "bos_token_id", "eos_token_id")
_NONE = object()
NEUTRAL = {"min_length": 0, "early_stopping": False, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
           "encoder_repetition_penalty": 1.0, "renormalize_logits": False, "remove_invalid_values": False}
"""Generation settings at the value that changes nothing: not passed (transformers warns of some)."""


class QuantizationConfig(StrictModel):
    """Load the base model's linear layers in 4 or 8 bits with bitsandbytes (on a CUDA GPU or on
    the CPU): a quarter or half of the memory of 16-bit weights. The base stays frozen, so a model
    that trains needs an adapter (QLoRA: LoRA over a quantized base)."""

    backend: Annotated[Literal["bitsandbytes", "torchao"], ludwig_only("bitsandbytes", instead=(
        "plait quantizes with bitsandbytes; torchao's modes are not implemented"))] = "bitsandbytes"
    """Ludwig's choice of library; plait implements bitsandbytes."""
    mode: Annotated[str | None, ludwig_only(None, instead="torchao's modes are not implemented")] = None
    qat: Annotated[bool, ludwig_only(False, instead="quantization-aware training (torchao) is not implemented; "
                                                    "QLoRA trains an adapter over the quantized base")] = False
    bits: Literal[4, 8] = 4
    """4: each weight is a 4-bit code (bnb_4bit_quant_type) with a scale per block of 64; 8:
    LLM.int8(), 8-bit weights with the outlier features in 16 bits."""
    llm_int8_threshold: float = 6.0
    """8 bits: input features larger than this stay in 16 bits (LLM.int8()'s outliers)."""
    llm_int8_has_fp16_weight: bool = False
    """8 bits: keep 16-bit master weights beside the 8-bit ones (more memory)."""
    bnb_4bit_compute_dtype: Literal["float32", "float16", "bfloat16"] = "float16"
    """4 bits: the dtype the dequantized weights compute in."""
    bnb_4bit_use_double_quant: bool = True
    """4 bits: quantize the per-block scales too (about 0.4 bits per weight less)."""
    bnb_4bit_quant_type: Literal["fp4", "nf4"] = "nf4"
    """4 bits: the code; nf4 (NormalFloat) suits weights drawn from a normal distribution."""


_NO_LAYERS = "an LLM's text goes from the model's own output layer; leave Ludwig's default"


class PassthroughEncoder(StrictModel):
    """Ludwig's encoder of an LLM's input: the tokens go to the model as they are."""

    type: Literal["passthrough"] = "passthrough"
    skip: Annotated[bool, ludwig_only(False, instead=_NO_LAYERS)] = False
    adapter: Annotated[dict | None, ludwig_only(None, instead="an LLM's adapter goes in the config's adapter "
                                                              "section")] = None


class TextExtractorDecoder(StrictModel):
    """Ludwig's decoder of an LLM's text output, accepted as Ludwig renders it: the text is what
    the model generates, with the base model's tokenizer."""

    type: Literal["text_extractor"] = "text_extractor"
    fc_layers: Annotated[list | None, ludwig_only(None, instead=_NO_LAYERS)] = None
    num_fc_layers: Annotated[int, ludwig_only(0, instead=_NO_LAYERS)] = 0
    fc_output_size: Annotated[int, ludwig_only(256, instead=_NO_LAYERS)] = 256
    fc_use_bias: Annotated[bool, ludwig_only(True, instead=_NO_LAYERS)] = True
    fc_weights_initializer: Annotated[str, ludwig_only("xavier_uniform", instead=_NO_LAYERS)] = "xavier_uniform"
    fc_bias_initializer: Annotated[str, ludwig_only("zeros", instead=_NO_LAYERS)] = "zeros"
    fc_norm: Annotated[str | None, ludwig_only(None, instead=_NO_LAYERS)] = None
    fc_norm_params: Annotated[dict | None, ludwig_only(None, instead=_NO_LAYERS)] = None
    fc_activation: Annotated[str, ludwig_only("relu", instead=_NO_LAYERS)] = "relu"
    fc_dropout: Annotated[float, ludwig_only(0.0, instead=_NO_LAYERS)] = 0.0
    tokenizer: Annotated[str, ludwig_only("hf_tokenizer", instead="an LLM's text is read with the base model's "
                                                                  "tokenizer")] = "hf_tokenizer"
    pretrained_model_name_or_path: str | None = ""
    """Ludwig fills in base_model; the base model's tokenizer is used whatever it says."""
    vocab_file: str | None = ""
    """As pretrained_model_name_or_path."""
    max_new_tokens: int | None = None
    """Ludwig copies generation.max_new_tokens here; plait reads generation's."""
    match_strategy: Annotated[str, ludwig_only("contains", instead="Ludwig's text_extractor reads it and does "
                                                                   "nothing with it; leave contains")] = "contains"


class TextParserDecoder(StrictModel):
    """Structured generation (the ``text_parser`` decoder of Ludwig's structured-output example):
    at each step the model may take only tokens that keep the text a prefix of the format, so
    every answer is JSON valid under ``json_schema``, or a full match of ``regex``. Training is
    unchanged (the model still learns the target text); predict, evaluate, generate and serve
    are held to the format."""

    type: Literal["text_parser"]
    json_schema: dict | None = None
    """A JSON schema (as a mapping) every answer follows."""
    regex: str | None = None
    """A regular expression every answer matches whole."""
    grammar: None = None
    """Not read (see the refusal): a JSON schema or a regular expression says the format."""

    @model_validator(mode="after")
    def _one_format(self):
        given = [key for key in ("json_schema", "regex") if getattr(self, key) is not None]
        if len(given) != 1:
            raise field_error("json_schema", f"a text_parser decoder needs exactly one format, json_schema or regex; "
                                             f"got {' and '.join(given) or 'neither'}")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as error:
                raise field_error("regex", f"is not a regular expression ({error}); fix the pattern")
        return self


class NextTokenLoss(StrictModel):
    """Ludwig's loss of an LLM's output, accepted as Ludwig renders it: the cross-entropy of the
    target's next tokens."""

    type: Literal["next_token_softmax_cross_entropy"] = "next_token_softmax_cross_entropy"
    weight: Annotated[float, ludwig_only(1.0, instead="an LLM has one loss; scale the learning rate instead")] = 1.0
    class_weights: Annotated[Any, ludwig_only(None, instead="tokens are not weighted")] = None
    robust_lambda: Annotated[float, ludwig_only(0, instead="not implemented for next-token loss")] = 0
    confidence_penalty: Annotated[float, ludwig_only(0, instead="not implemented for next-token loss")] = 0
    class_similarities: Annotated[Any, ludwig_only(None, instead="not implemented for next-token loss")] = None
    class_similarities_temperature: Annotated[float, ludwig_only(0, instead="not implemented for next-token "
                                                                             "loss")] = 0
    unique: Annotated[bool, ludwig_only(False, instead="not implemented for next-token loss")] = False


class LLMFeature(StrictModel):
    """What the prompt's and the target's features share."""

    name: str = Field(min_length=1)
    type: Literal["text"] = "text"
    """An LLM reads and writes text."""
    column: str | None = None
    """The data column (default: the name)."""
    active: Annotated[bool, ludwig_only(True, instead="an LLM has one input and one output; remove the feature "
                                                      "instead")] = True

    @property
    def source_column(self) -> str:
        return self.column or self.name


class LLMInputFeature(LLMFeature):
    preprocessing: TextPreprocessing = Field(default_factory=TextPreprocessing)
    """max_sequence_length caps the prompt's tokens (its start is kept); the tokenizer is always the
    base model's, and the other text keys are accepted with no effect."""
    encoder: PassthroughEncoder | None = None
    """Ludwig writes passthrough: the tokens go to the model as they are."""
    tied: Annotated[str | None, ludwig_only(None, instead="an LLM has one input")] = None


class LLMOutputFeature(LLMFeature):
    @model_validator(mode="before")
    @classmethod
    def _refused_kinds(cls, data: Any) -> Any:
        """Ludwig's LLM outputs plait does not produce, each named with the reason."""
        if not isinstance(data, dict):
            return data
        decoder = data.get("decoder")
        if isinstance(decoder, dict) and decoder.get("type") == "text_parser" and decoder.get("grammar") is not None:
            raise ValueError("decoder.grammar: a grammar is not read: plait holds generation to a format with "
                             "lm-format-enforcer, which takes a JSON schema or a regular expression; write the "
                             "format as decoder.json_schema or decoder.regex")
        return data

    preprocessing: TextPreprocessing = Field(
        default_factory=lambda: TextPreprocessing(missing_value_strategy="drop_row"))
    """max_sequence_length caps the target's tokens (the end token included)."""
    decoder: Annotated[TextExtractorDecoder | TextParserDecoder, Field(discriminator="type")] | None = None
    """Ludwig writes text_extractor: the text the model generates; text_parser (Ludwig's
    structured-output example) holds generation to a JSON schema or a regular expression."""
    loss: NextTokenLoss | None = None
    """Ludwig writes next_token_softmax_cross_entropy: what the model learns."""
    class_similarities: Annotated[Any, ludwig_only(None, instead="an LLM's output is text")] = None
    dependencies: Annotated[list | None, ludwig_only(None, [], instead="an LLM has one output")] = None
    reduce_input: Annotated[str | None, ludwig_only(None, "sum", instead="an LLM's output is a sequence")] = None
    reduce_dependencies: Annotated[str | None, ludwig_only(None, "sum", instead="an LLM has one output")] = None


class MatchRule(StrictModel):
    """How a label is found in the generated text (Ludwig's ``match`` entries)."""

    type: Literal["contains", "regex", "json_schema"]
    """contains: the value is a substring of the text; regex: the value (a Python regular
    expression) matches somewhere in it; json_schema: the text is JSON (a Markdown code fence
    around it is dropped) whose value (or its ``label``, ``value`` or ``category`` key, else its
    first value) equals the value, ignoring case."""
    value: str
    """The substring, the regular expression, or the JSON value."""

    @model_validator(mode="after")
    def _regex_compiles(self):
        if self.type == "regex":
            try:
                re.compile(self.value)
            except re.error as error:
                raise field_error("value", f"is not a regular expression Python reads ({error}); fix the pattern")
        return self


class CategoryExtractorDecoder(StrictModel):
    """Ludwig's decoder of an LLM's category output: the model generates text, and the first
    label whose ``match`` rule fits it is the prediction (else ``preprocessing.fallback_label``)."""

    type: Literal["category_extractor"] = "category_extractor"
    match: dict[str, MatchRule] | None = None
    """Each label's rule, tried in this order; labels without one (or all, when null) match a
    text that is the label itself (ignoring case and surrounding spaces and punctuation), then
    one that contains it."""
    constrain_to_vocabulary: bool = False
    """Generate only the labels' token sequences (each step may take only a token that continues
    some label), so that every prediction is a label."""
    fallback_label: str | None = ""
    """Ludwig copies preprocessing.fallback_label here; plait reads preprocessing's."""
    str2idx: Annotated[dict | None, ludwig_only(None, instead="the labels are preprocessing.vocab")] = None
    tokenizer: Annotated[str, ludwig_only("hf_tokenizer", instead="an LLM's text is read with the base model's "
                                                                  "tokenizer")] = "hf_tokenizer"
    pretrained_model_name_or_path: str | None = ""
    """Ludwig fills in base_model; the base model's tokenizer is used whatever it says."""
    vocab_file: str | None = ""
    """As pretrained_model_name_or_path."""
    max_new_tokens: int | None = None
    """Ludwig's; plait generates at most generation.max_new_tokens (the labels' length, when it
    is null)."""
    input_size: int | None = None
    """Ludwig's; unused."""
    match_strategy: Annotated[str, ludwig_only("contains", instead="each label's rule says how it matches: "
                                                                   "match.<label>.type")] = "contains"


class LLMCategoryPreprocessing(CategoryPreprocessing):
    """Preprocessing of an LLM's category output (Ludwig's ``category_llm``)."""

    missing_value_strategy: MissingValueStrategy = "drop_row"
    vocab: list[str] = Field(min_length=1)
    """The labels the model may predict (required, as in Ludwig)."""
    fallback_label: str
    """The prediction when the generated text matches no label (required, as in Ludwig; added to
    the labels if it is not one)."""

    @property
    def max_sequence_length(self) -> None:
        """A label's tokens are never cut: the longest label sets the target's length."""
        return None

    @property
    def labels(self) -> list[str]:
        """The vocabulary, then the fallback label if it is not in it."""
        return list(dict.fromkeys([*self.vocab, self.fallback_label]))


class LLMCategoryOutputFeature(LLMFeature):
    """An LLM's category output (Ludwig's): the model learns to write each row's label, and the
    text it generates is matched to one of ``preprocessing.vocab``."""

    type: Literal["category"]
    preprocessing: LLMCategoryPreprocessing
    """``vocab`` and ``fallback_label`` (required)."""
    decoder: CategoryExtractorDecoder = Field(default_factory=CategoryExtractorDecoder)
    """How the generated text becomes a label."""
    loss: NextTokenLoss | None = None
    """Ludwig writes next_token_softmax_cross_entropy: the model learns the label's text."""
    dependencies: Annotated[list | None, ludwig_only(None, [], instead="an LLM has one output")] = None
    reduce_input: Annotated[str | None, ludwig_only(None, "sum", instead="an LLM's output is generated text")] = None
    reduce_dependencies: Annotated[str | None, ludwig_only(None, "sum", instead="an LLM has one output")] = None
    top_k: Annotated[int, ludwig_only(3, instead="the prediction is the one label the text matches")] = 3
    calibration: Annotated[bool, ludwig_only(False, instead="the prediction is matched from generated text")] = False

    @model_validator(mode="after")
    def _rules_name_labels(self):
        labels = self.preprocessing.labels
        for label in self.decoder.match or {}:
            if label not in labels:
                raise field_error(f"decoder.match.{label}", f"names a label that is not in preprocessing.vocab "
                                                            f"({', '.join(map(repr, labels))}); add it there")
        return self


LLMOutput = Annotated[LLMOutputFeature | LLMCategoryOutputFeature, Field(discriminator="type")]
"""An LLM's output: text, or a category matched from the generated text."""


class LLMTextDefaults(StrictModel):
    """``defaults.text`` of an LLM config: settings its text input starts from."""

    preprocessing: TextPreprocessing = Field(default_factory=TextPreprocessing)
    """Preprocessing the input feature's own settings go over (as in Ludwig, the input only: the
    target keeps its own, which drop the rows without a target)."""
    encoder: PassthroughEncoder | None = None
    decoder: TextExtractorDecoder | None = None
    loss: NextTokenLoss | None = None


class LLMDefaults(StrictModel):
    """Ludwig's ``defaults`` of an LLM config: its one feature type, text."""

    text: LLMTextDefaults = Field(default_factory=LLMTextDefaults)


class LLMTrainerConfig(TrainerConfig):
    batch_size: Annotated[int | Literal["auto"], _positive_or_auto("the batch size", "rows per step, such as 4")] = 1
    """Rows per step per worker (Ludwig's LLM default); auto as for any model."""
    eval_batch_size: Annotated[int | Literal["auto"] | None, AfterValidator(_eval_batch_size)] = 2
    """Rows per evaluation batch, and per generation batch when predicting (Ludwig's LLM default)."""
    type: Literal["finetune", "none"] = "none"
    """finetune: train the model (or its adapter) on the data; none: use the base model as it is
    (zero-shot or in-context prediction through the prompt), as in Ludwig, whose default it is;
    dpo, kto, orpo: learn to prefer the target over the completion in ``rejected_column``; grpo:
    learn from completions the model samples, rewarded by how close each is to the target."""
    base_learning_rate: Annotated[float, ludwig_only(0.0, instead="set learning_rate")] = 0.0
    """Ludwig's; plait accepts only 0."""

    @model_validator(mode="before")
    @classmethod
    def _keys_of_other_types(cls, data: Any) -> Any:
        """Ludwig's alignment example configs write ``beta`` and KTO's ``desirable_weight``, keys
        its schema lacks: each is named with the key that means it."""
        if not isinstance(data, dict):
            return data
        for key, instead in MISNAMED_PREFERENCE_KEYS.items():
            if key in data:
                raise field_error(key, f"is not a key of Ludwig's trainer schema (Ludwig's alignment examples write "
                                       f"it, and Ludwig refuses it too); {instead}")
        return data

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        owners = [kind.model_fields["type"].annotation.__args__[0] for kind in TRAINER_TYPE_CONFIGS
                  if key in kind.model_fields and key not in cls.model_fields]
        if owners:
            return f"a key of trainer.type {' or '.join(owners)} (this trainer's type is another); set type: {owners[0]}"
        return None


class PreferenceTrainerConfig(LLMTrainerConfig):
    """What the preference trainers share: the chosen completion is the output feature's column,
    the rejected one is ``rejected_column``, both after the same prompt."""

    type: Literal["dpo", "kto", "orpo"]
    compares_with_reference: ClassVar[bool] = True
    """Whether the objective compares the model with a reference (the base with the adapter off),
    so that the model must train an adapter."""
    rejected_column: str = Field("rejected", min_length=1)
    """The column of the rejected (dispreferred) completions; the chosen ones are the output
    feature's column. Preprocessed as the output is, and needed only to train."""


class DPOTrainerConfig(PreferenceTrainerConfig):
    """Direct preference optimization (Rafailov et al., 2023): the policy's log-probability margin
    of chosen over rejected, against the reference model's (the base with the adapter off)."""

    type: Literal["dpo"]
    dpo_beta: float = Field(0.1, gt=0)
    """How far the policy may move from the reference: higher keeps it closer."""
    dpo_loss_type: Literal["sigmoid", "ipo"] = "sigmoid"
    """sigmoid: DPO's logistic loss; ipo: identity preference optimization's squared loss (on each
    completion's mean token log-probability)."""
    dpo_label_smoothing: float = Field(0.0, ge=0.0, le=0.5)
    """The chance that a pair's preference is wrong (conservative DPO); sigmoid only."""

    @model_validator(mode="after")
    def _smoothing_is_sigmoid(self):
        if self.dpo_label_smoothing and self.dpo_loss_type != "sigmoid":
            raise field_error("dpo_label_smoothing", f"is {self.dpo_label_smoothing} with dpo_loss_type "
                                                     f"{self.dpo_loss_type}; label smoothing is the sigmoid loss's. "
                                                     f"Set it to 0, or use sigmoid")
        return self


class KTOTrainerConfig(PreferenceTrainerConfig):
    """Kahneman-Tversky optimization (Ethayarajh et al., 2024), each pair read as a desirable
    (chosen) and an undesirable (rejected) completion of its prompt."""

    type: Literal["kto"]
    kto_beta: float = Field(0.1, gt=0)
    """How far the policy may move from the reference."""


class ORPOTrainerConfig(PreferenceTrainerConfig):
    """Odds ratio preference optimization (Hong et al., 2024): the chosen completion's
    cross-entropy plus ``orpo_beta`` times the log odds ratio loss; no reference model."""

    type: Literal["orpo"]
    compares_with_reference: ClassVar[bool] = False
    orpo_beta: float = Field(0.1, ge=0)
    """The odds ratio loss's weight beside the chosen completion's cross-entropy."""


class GRPOTrainerConfig(LLMTrainerConfig):
    """Group relative policy optimization (Shao et al., 2024): for each prompt the model samples
    ``grpo_num_generations`` completions; each is rewarded, its advantage is its reward against
    its group's (mean and spread), and the policy-gradient loss, clipped as PPO's, raises the
    better ones, with a KL penalty towards the reference model (the base with the adapter off).

    The reward is plait's, as Ludwig's schema names none: how close the completion is to the row's
    target text (the output feature's column, a verifiable answer), the F1 of their tokens, 1 for
    the same text. Completions are sampled at temperature 1, up to the target's length."""

    type: Literal["grpo"]
    grpo_beta: float = Field(0.04, ge=0)
    """The KL penalty's weight (0: no penalty, and no reference: any model trains)."""
    grpo_epsilon: float = Field(0.2, ge=0, le=1)
    """PPO's clipping of the probability ratio."""
    grpo_num_generations: int = Field(4, ge=2)
    """Completions sampled per prompt: the group whose rewards each one's advantage is measured
    against (two at least)."""

    @property
    def compares_with_reference(self) -> bool:
        return self.grpo_beta > 0


PREFERENCE_CONFIGS = (DPOTrainerConfig, KTOTrainerConfig, ORPOTrainerConfig)
TRAINER_TYPE_CONFIGS = (*PREFERENCE_CONFIGS, GRPOTrainerConfig)
"""The trainer types with keys of their own."""

LLMTrainer = Annotated[LLMTrainerConfig | DPOTrainerConfig | KTOTrainerConfig | ORPOTrainerConfig | GRPOTrainerConfig,
                       Field(discriminator="type")]
"""An LLM's trainer: finetune or none, one of the preference trainers, or grpo (their own keys)."""

MISNAMED_PREFERENCE_KEYS = {
    "beta": "use dpo_beta, kto_beta or orpo_beta (trainer.type's own)",
    "loss_type": "use dpo_loss_type",
    "label_smoothing": "use dpo_label_smoothing",
    "desirable_weight": "KTO here weighs the chosen and rejected completions of a pair alike",
    "undesirable_weight": "KTO here weighs the chosen and rejected completions of a pair alike",
}


class LLMPreprocessing(GlobalPreprocessing):
    global_max_sequence_length: int | None = Field(None, gt=0)
    """The most tokens of prompt and target together; a longer row keeps its target and the end of
    the room for the prompt (counted in the log). Null: the model's context length."""


class LLMConfig(StrictModel):
    model_type: Literal["llm"]
    """A pretrained causal language model, fine-tuned or prompted."""
    base_model: str = Field(min_length=1)
    """The model: a folder (config.json, model.safetensors, tokenizer.json) or a hub name found in
    the local Hugging Face cache (HF_HUB_CACHE). Never downloaded."""
    input_features: list[LLMInputFeature] = Field(min_length=1, max_length=1)
    """The one text the prompt is made from."""
    output_features: list[LLMOutput] = Field(min_length=1, max_length=1)
    """The one text the model learns to write (type text), or a label it writes (type category)."""
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    """How each row becomes the model's input."""
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    """How predictions are generated."""
    adapter: AdapterSection = None
    """null: full fine-tuning (every weight trains); otherwise the adapter that trains instead of
    the base model's weights (its type: lora, ia3, loha, lokr or vera)."""
    quantization: QuantizationConfig | None = None
    """Load the base model in 4 or 8 bits (bitsandbytes, on a GPU or the CPU): QLoRA with an adapter."""
    trainer: LLMTrainer = Field(default_factory=LLMTrainerConfig)
    """How the model is trained: Ludwig's trainer keys, with type finetune or none, or a preference
    trainer (dpo, kto, orpo) with its own keys."""
    preprocessing: LLMPreprocessing = Field(default_factory=LLMPreprocessing)
    """The split, sampling, and the cap on prompt plus target tokens."""
    backend: BackendConfig = Field(default_factory=AutoBackendConfig)
    """Where and how the work runs (as for any model)."""
    trust_remote_code: Annotated[bool, ludwig_only(False, instead="plait runs no code from model folders; use a "
                                                              "model whose architecture transformers implements")] = False
    model_parameters: Annotated[dict | None, ludwig_only(None, instead="rope scaling and NEFTune are not "
                                                                       "implemented")] = None
    serve: ServeConfig | None = None
    """How ``plait serve`` answers requests (saved with the model)."""
    defaults: LLMDefaults = Field(default_factory=LLMDefaults)
    """Settings the text input starts from (``defaults.text.preprocessing``)."""
    hyperopt: HyperoptConfig | None = None
    """Ludwig's hyperparameter search over this config (``plait hyperopt``): each trial is a
    fine-tuning run, on the backend the config names (sharded across its workers as it says)."""
    tracking: list[TrackerConfig] = Field(default_factory=list)
    """Experiment trackers the run logs to (as for any model)."""
    ludwig_version: str | None = None
    """Accepted for Ludwig compatibility and ignored."""
    adapters: Annotated[dict | None, ludwig_only(None, instead="Ludwig's named adapters (several, switched or "
                                                               "merged) are not implemented; use adapter")] = None
    is_multimodal: Annotated[bool, ludwig_only(False, instead="vision-language models are not implemented: plait's "
                                                              "LLM reads text")] = False

    @field_validator("tracking")
    @classmethod
    def _one_tracker_per_type(cls, value: list) -> list:
        return check_tracking(value)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_type(cls, value: Any) -> Any:
        return backend_data(value)

    @field_validator("output_features", mode="before")
    @classmethod
    def _output_type(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [{"type": "text", **f} if isinstance(f, dict) else f for f in value]  # text unless it says

    @field_validator("trainer", mode="before")
    @classmethod
    def _trainer_type(cls, value: Any) -> Any:
        return {"type": "none", **value} if isinstance(value, dict) else value  # Ludwig's default type

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        """The input feature's preprocessing over ``defaults.text.preprocessing`` (raw dicts; a
        bad default is reported at its own path)."""
        if not isinstance(data, dict):
            return data
        defaults = ((data.get("defaults") or {}).get("text") or {}) if isinstance(data.get("defaults"), dict) else {}
        shared = defaults.get("preprocessing") if isinstance(defaults, dict) else None
        features = data.get("input_features")
        if not isinstance(shared, dict) or not shared or not isinstance(features, list):
            return data
        merged = [{**f, "preprocessing": {**shared, **(f.get("preprocessing") or {})}} if isinstance(f, dict) else f
                  for f in features]
        return {**data, "input_features": merged}

    @model_validator(mode="after")
    def _hyperopt_target(self):
        if self.hyperopt is not None:
            check_hyperopt_target(self.hyperopt, {self.output_features[0].name: "text"})  # a label is text too
        return self

    @model_validator(mode="after")
    def _names_unique(self):
        if self.input_features[0].name == self.output_features[0].name:
            raise field_error("output_features.0.name", "the input and output features have the same name; "
                                                        "rename one")
        return self

    @model_validator(mode="after")
    def _trainer_type_fits(self):
        # Compared with the defaults, not by presence: a rendered config writes every default out.
        defaults = LLMTrainerConfig()
        trained = [key for key in ("epochs", "train_steps", "learning_rate", "optimizer")
                   if getattr(self.trainer, key) != getattr(defaults, key)]
        if self.trainer.type == "none" and trained:
            raise field_error("trainer.type", f"is none (no training, Ludwig's default for an LLM) but trainer."
                                              f"{trained[0]} is set; set trainer.type: finetune to train")
        return self

    @model_validator(mode="after")
    def _quantization_fits(self):
        if self.quantization is None:
            return self
        if self.trainer.type != "none" and self.adapter is None:
            raise field_error("quantization", "a quantized base model cannot train its own weights (they are 4 or 8 "
                                              "bit codes, with no gradient); add an adapter (adapter: {type: lora} "
                                              "is QLoRA), or remove quantization for full fine-tuning")
        if self.adapter is not None and self.adapter.postprocessor.merge_adapter_into_base_model:
            raise field_error("adapter.postprocessor.merge_adapter_into_base_model", (
                "is true with quantization: merging would round the adapter into 4 or 8 bit weights; keep the adapter "
                "apart (it loads on the quantized base or a full-precision one), or save a full-precision base "
                "with save_dequantized_base_model and train on that"))
        if getattr(self.adapter, "changes_base_weights", False):
            raise field_error("adapter.init_lora_weights", f"is {self.adapter.init_lora_weights} with quantization: it "
                                                           f"changes the base weights, which a quantized base cannot "
                                                           f"hold; use {', '.join(LORA_INITS_KEEPING_THE_BASE)}")
        strategy = getattr(getattr(self.backend, "trainer", None), "strategy", None)
        sharded = strategy is not None and (strategy.type == "fsdp" or (
            strategy.type == "deepspeed" and strategy.zero_optimization.stage == 3))
        if sharded:
            raise field_error("quantization", f"is set with the {strategy.type} strategy, which shards the parameters "
                                              f"across workers; bitsandbytes' 4 and 8 bit weights cannot be sharded. "
                                              f"Use ddp (or deepspeed stage 0-2), or remove quantization")
        return self

    @model_validator(mode="after")
    def _preference_fits(self):
        if not isinstance(self.trainer, PreferenceTrainerConfig):
            return self
        rejected = self.trainer.rejected_column
        taken = {self.input_features[0].source_column: "the input feature's",
                 self.output_features[0].source_column: "the output feature's (the chosen completions)"}
        if rejected in taken or rejected in self.template_columns:
            whose = taken.get(rejected, "a column the prompt template reads")
            raise field_error("trainer.rejected_column", f"is {rejected!r}, {whose} column; name the column of the "
                                                         f"rejected completions")
        if self.trainer.compares_with_reference:
            # The reference model is the base with the adapter switched off: no second copy.
            if self.adapter is None:
                raise field_error("adapter", f"is null with trainer.type {self.trainer.type}, which compares the "
                                             f"model with a frozen reference: plait's reference is the base model "
                                             f"with the adapter off, so {self.trainer.type} trains an adapter (add "
                                             f"adapter: {{type: lora}}); orpo needs no reference and trains any way")
            if getattr(self.adapter, "changes_base_weights", False):
                raise field_error("adapter.init_lora_weights", f"is {self.adapter.init_lora_weights} with trainer.type "
                                                               f"{self.trainer.type}: it changes the base weights, "
                                                               f"which are the reference; use "
                                                               f"{', '.join(LORA_INITS_KEEPING_THE_BASE)}")
        return self

    @model_validator(mode="after")
    def _grpo_fits(self):
        if not isinstance(self.trainer, GRPOTrainerConfig):
            return self
        if self.output_features[0].type != "text":
            raise field_error("trainer.type", f"is grpo, which rewards generated texts, but the output feature is of "
                                              f"type {self.output_features[0].type}; use a text output (as Ludwig "
                                              f"requires), or trainer.type finetune")
        if self.trainer.compares_with_reference and self.adapter is None:
            raise field_error("adapter", f"is null with trainer.type grpo and grpo_beta {self.trainer.grpo_beta}: the "
                                         f"KL penalty compares the model with the base with the adapter off, so grpo "
                                         f"trains an adapter (add adapter: {{type: lora}}), or set grpo_beta: 0")
        strategy = getattr(getattr(self.backend, "trainer", None), "strategy", None)
        if strategy is not None and (strategy.type == "fsdp" or (
                strategy.type == "deepspeed" and strategy.zero_optimization.stage == 3)):
            raise field_error("trainer.type", f"is grpo with the {strategy.type} strategy: grpo samples completions "
                                              f"at every step, which needs each worker's whole model, not a shard; "
                                              f"use ddp (or deepspeed stage 0-2)")
        return self

    @model_validator(mode="after")
    def _template_reads_the_row(self):
        """Ludwig's rule: the template reads the row ({__sample__}, the input's text, or any
        column: the input's own column need not appear), and never the target's column."""
        names = template_fields(self.prompt.text())
        target = self.output_features[0].source_column
        if target in names:
            raise field_error("prompt.template", f"names the output column {{{target}}}: the target is what the model "
                                                 f"learns to write after the prompt, so the prompt cannot hold it; "
                                                 f"remove it")
        if not any(name != TASK for name in names):
            raise field_error("prompt.template", f"names no column of the data and not {{{SAMPLE}}} (the input "
                                                 f"feature's text); the prompt must contain something of the row")
        return self

    @property
    def features(self) -> list:
        return [*self.input_features, *self.output_features]

    @property
    def rejected_column(self) -> str | None:
        """The column of a preference trainer's rejected completions; None for other trainers."""
        return self.trainer.rejected_column if isinstance(self.trainer, PreferenceTrainerConfig) else None

    @property
    def template_columns(self) -> list[str]:
        """The data columns the prompt reads, the input's own first."""
        column = self.input_features[0].source_column
        names = [n for n in template_fields(self.prompt.text()) if n not in (SAMPLE, TASK)]
        return list(dict.fromkeys([column, *names]))

