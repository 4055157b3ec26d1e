"""An LLM (``model_type: llm``): a Hugging Face causal language model that continues a prompt.

The model declares the surface the training loop, the metrics and the predictor know
(:class:`~plait.models.base.TrainableModel`): ``input_names`` (the prompt), ``output_names`` (the
target), ``heads`` (one :class:`LLMHead`, which scores and reads the target's tokens) and ``loss``.
So it trains through the same loop and strategies (ddp, fsdp, deepspeed), evaluates with the same
metrics and predicts through the same predictor, locally or in Ray Data actors.

One batch row is its prompt, left-padded, then its target: every target starts at the same
position, so the model's output layer runs on the target's positions only (``logits_to_keep``)
and the prompt costs no vocabulary-sized logits. Without a target (predicting), the model
generates from the prompt.

With an ``adapter`` (LoRA, IA3, LoHa, LoKr, VeRA) the base model's weights stay frozen and the
module's state dict holds the adapter alone: checkpoints, the best weights and the saved model
are the adapter's size, and building the module reads the base weights from ``base_model``.
With ``quantization`` the base's linear layers are read in 4 or 8 bits (bitsandbytes): its weights
are never saved, and an adapter trained on them loads on a quantized or a full-precision base.
"""

from __future__ import annotations

import functools
import inspect
import logging
import shutil
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from plait.errors import BackendError, ModelError
from plait.utils.tokens import ID_OFFSET
from plait.models.base import TrainableModel, module_key
from plait.models.formats import FormatConstraint
from plait.models.grpo import GRPO, REWARD, GRPOObjective, token_f1
from plait.models.labels import LABEL_PROBABILITIES, WRITTEN
from plait.models.hf_encoders import import_peft, import_transformers
from plait.models.sequence_heads import PAD, SequenceHead
from plait.models.outputs import RowLosses
from plait.models.preference import PREFERENCE, PreferenceScores, preference_objective
from plait.utils.folder import Folder, built_locally
from plait.utils.hf_models import MODEL_CONFIG, check_weights, model_folder, transformers_config

log = logging.getLogger("plait")

BITSANDBYTES_KEYS = ("llm_int8_threshold", "llm_int8_has_fp16_weight", "bnb_4bit_compute_dtype",
                     "bnb_4bit_use_double_quant", "bnb_4bit_quant_type")
"""The quantization section's keys that are transformers' BitsAndBytesConfig's own."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5", ".index.json")
"""Files of a model folder that hold (or index) its weights."""
MAX_LABELS_SCORED = 100
"""A category output with more labels gives no per-label probabilities (each costs a scoring pass
per row), as an ECD category output gives no per-label columns past 100 labels."""
LABEL_ROWS_PER_PASS = 256
"""Prompt-and-label pairs scored in one forward pass (rows x labels)."""
ADAPTER_MERGED = "adapter_merged"
"""The metadata key saying the adapter was merged into the saved weights (a plain model)."""


class LLMHead(SequenceHead):
    """The target's tokens. Teacher-forced outputs are ``[rows, steps, vocabulary + 1]`` (the
    model's logits, then the likeliest token as a stored id); generated ones ``[rows, steps, 2]``
    (each chosen token's probability, then the token)."""

    metrics_type = "text"
    """Whose metrics an LLM's output gets: a text's, a category output's label being text too."""

    def __init__(self, feature, metadata: dict):
        nn.Module.__init__(self)
        self.feature, self.metadata = feature, metadata
        self.stop_id = metadata["stop_id"]

    def row_losses(self, output: torch.Tensor, target: torch.Tensor) -> RowLosses:
        logits, target = self.logits(output), self.aligned(target, output.shape[1])
        counted = target != PAD
        # Stored ids are the tokenizer's plus one; a padded step has no token to score.
        losses = F.cross_entropy(logits.float().transpose(1, 2), (target - ID_OFFSET).clamp(min=0), reduction="none")
        counted_float = counted.to(losses.dtype)
        return RowLosses((losses * counted_float).sum(-1), counted_float.sum(-1))

    def predict(self, output: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens = self.tokens(output)
        return {"prediction": tokens, "probabilities": output[..., 0].float(), "length": self.lengths(tokens)}

    def lengths(self, tokens: torch.Tensor) -> torch.Tensor:
        ended = (tokens == PAD) | (tokens == self.stop_id)
        return torch.where(ended.any(1), ended.float().argmax(1), torch.full_like(tokens[:, 0], tokens.shape[1]))


class LLM(TrainableModel):
    def __init__(self, config, metadata: dict, load_pretrained: bool = False):
        """``load_pretrained``: start from the base model's weights (a model about to train). A
        model whose saved weights are an adapter reads them anyway; one whose saved weights are
        whole (full fine-tuning, or a merged adapter) is built empty and loaded."""
        super().__init__()
        prompt, target = config.input_features[0], config.output_features[0]
        features = metadata["features"]
        self.input_names, self.output_names = [prompt.name], [target.name]
        self.target_readers = [target.name]  # the target is read in the forward (teacher forcing)
        self.batch_padded = [prompt.name, target.name]
        self.loss_weights = {target.name: 1.0}
        self.preference = preference_objective(config.trainer)
        """The preference trainer's objective (None: finetune's cross-entropy); the rejected
        completions, ``rejected_name``, are read in the forward pass as the target is."""
        self.grpo = GRPOObjective(config.trainer) if config.trainer.type == "grpo" else None
        """GRPO's objective: its training batches are the model's own sampled completions."""
        self.rejected_name = config.rejected_column
        if self.preference is not None:
            self.target_readers.append(self.rejected_name)
            self.batch_padded.append(self.rejected_name)
        self.generation = config.generation
        eval_batch = config.trainer.eval_batch_size
        self.prediction_batch_rows = eval_batch if isinstance(eval_batch, int) and eval_batch > 0 else 16
        """Rows per prediction batch (the predictor's; generation holds a cache per row)."""
        self.target_length = features[target.name]["sequence_length"]
        self.constraint = _generation_constraint(target, features[target.name])
        """What generation may write, where the output's decoder says: a category output's labels
        (constrain_to_vocabulary), a text_parser's format; else None."""
        self.warned_of_cut_answers = False
        """Whether a text_parser's answer cut by the token limit was named already (once is enough)."""
        self.writes_labels = target.type == "category"
        """A category output: evaluation also generates each row's answer, whose label it scores."""
        labels = features[target.name].get("label_ids", [])
        self.label_ids = labels if self.writes_labels and len(labels) <= MAX_LABELS_SCORED else None
        """A category output's labels as stored ids (each with the end token), when predict gives
        each one's probability (up to MAX_LABELS_SCORED of them); else None."""
        merged = metadata.get(ADAPTER_MERGED, False)
        adapter = None if merged else config.adapter
        frozen_base = adapter is not None or config.quantization is not None
        self.model = build_causal_lm(config, features[prompt.name][MODEL_CONFIG], load_pretrained or frozen_base,
                                     adapter)
        self.pad_id = _pad_id(self.model.config, features[target.name]["stop_id"] - ID_OFFSET)
        self.keeps_logits = "logits_to_keep" in inspect.signature(self._causal_lm().forward).parameters
        self.heads = nn.ModuleDict({module_key(target.name): LLMHead(target, features[target.name])})
        saves_base = getattr(adapter, "changes_base_weights", False)
        self.adapter_keys = frozenset(n for n, p in self.named_parameters() if p.requires_grad) \
            if frozen_base and not saves_base else None
        """The weights this model saves when its base is read from base_model (an adapter's, or
        none for a quantized base used as it is); None: it saves them all (full fine-tuning, or
        an adapter whose initialization changed the base weights, such as pissa)."""
        self.adapter_hooks = [] if self.adapter_keys is None else [
            self.register_state_dict_post_hook(_adapter_only),
            self.register_load_state_dict_post_hook(_base_weights_not_missing)]

    def _causal_lm(self) -> nn.Module:
        """The transformers model under the adapter, if any."""
        return self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The target's teacher-forced logits when the batch carries it, else generated tokens;
        for a preference trainer's batches (which carry the rejected completions: training and
        validation), also each row's log-probabilities (``PREFERENCE``)."""
        name = self.output_names[0]
        prompt = _left_aligned(inputs[self.input_names[0]].long())
        if name not in inputs:
            generated = {name: self._generated(prompt)}
            if self.label_ids is not None:
                generated[LABEL_PROBABILITIES] = self._label_probabilities(prompt)
            return generated
        target = inputs[name].long()
        if self.grpo is not None and self.training:
            return self._grpo_outputs(prompt, target)
        if self.preference is not None and self.rejected_name in inputs:
            outputs = self._preference_outputs(prompt, target, inputs[self.rejected_name].long())
        else:
            outputs = {name: self._scored(prompt, target)}
        if not self.training:
            outputs.update(self._answered(prompt, target))
        return outputs

    @torch.no_grad()
    def _answered(self, prompt: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """What evaluation scores beyond the target's likelihood, from the answer the model
        writes for each row (the config's generation, as predict writes it): GRPO's reward of it
        against the target, and a category output's answer itself (its label is the metrics')."""
        if self.grpo is None and not self.writes_labels:
            return {}
        written = self._generated(prompt)[..., 1].long()
        answered = {WRITTEN: written} if self.writes_labels else {}
        if self.grpo is not None:
            stop = self.head(self.output_names[0]).stop_id
            answered[REWARD] = token_f1(_token_lists(written, stop), _token_lists(target, stop)).to(prompt.device)
        return answered

    def _preference_outputs(self, prompt: torch.Tensor, chosen: torch.Tensor,
                            rejected: torch.Tensor) -> dict[str, torch.Tensor]:
        """The chosen completions' scored outputs (for the metrics, and ORPO's cross-entropy) and
        the batch's PreferenceScores, chosen and rejected rows scored in one pass."""
        name, rows = self.output_names[0], prompt.shape[0]
        width = max(chosen.shape[1], rejected.shape[1])
        prompts = torch.cat([prompt, prompt])
        completions = torch.cat([F.pad(chosen, (0, width - chosen.shape[1])), F.pad(rejected, (0, width - rejected.shape[1]))])
        scored = self._scored(prompts, completions)
        log_probs, tokens = self._log_probs(scored, completions)
        reference = torch.zeros_like(log_probs)
        mismatched = reference_mismatched = reference[:rows]
        if self.preference.needs_reference:
            with torch.no_grad(), self.model.disable_adapter():
                reference = self._log_probs(self._scored(prompts, completions), completions)[0]
        if self.preference.needs_mismatched:
            others = chosen.roll(1, dims=0)  # each prompt with the row before's chosen completion
            with torch.no_grad():
                mismatched = self._log_probs(self._scored(prompt, others), others)[0]
                with self.model.disable_adapter():
                    reference_mismatched = self._log_probs(self._scored(prompt, others), others)[0]
        scores = PreferenceScores(log_probs[:rows], log_probs[rows:], tokens[:rows], tokens[rows:],
                                  reference[:rows], reference[rows:], mismatched, reference_mismatched)
        return {name: scored[:rows, :chosen.shape[1]], PREFERENCE: scores.columns()}

    def _grpo_outputs(self, prompt: torch.Tensor, answer: torch.Tensor) -> dict[str, torch.Tensor]:
        """GRPO's training pass: completions sampled from the policy, each rewarded against its
        row's target, scored under the policy and the reference (the adapter off)."""
        stop = self.head(self.output_names[0]).stop_id
        prompts = prompt.repeat_interleave(self.grpo.generations, dim=0)
        completions = self._sampled(prompts)
        answers = answer.repeat_interleave(self.grpo.generations, dim=0)
        rewards = token_f1(_token_lists(completions, stop), _token_lists(answers, stop))
        log_probs, counted = self._token_log_probs(prompts, completions)
        reference = torch.zeros_like(log_probs)
        if self.grpo.needs_reference:
            with torch.no_grad(), self.model.disable_adapter():
                reference = self._token_log_probs(prompts, completions)[0]
        return {GRPO: self.grpo.losses(log_probs, reference, counted, rewards.to(log_probs.device))}

    @torch.no_grad()
    def _label_probabilities(self, prompt: torch.Tensor) -> torch.Tensor:
        """``[rows, labels]``: each label's probability as the whole answer to each row (its
        tokens and the end token, scored by teacher forcing), normalized over the labels. Labels
        that begin alike are still told apart, which their first tokens' scores alone would not."""
        labels = self.label_ids
        width = max(len(ids) for ids in labels)
        answers = torch.tensor([ids + [PAD] * (width - len(ids)) for ids in labels], device=prompt.device)
        rows_per_pass = max(1, LABEL_ROWS_PER_PASS // len(labels))
        parts = []
        for start in range(0, prompt.shape[0], rows_per_pass):
            prompts = prompt[start:start + rows_per_pass]
            pairs = prompts.repeat_interleave(len(labels), dim=0), answers.repeat(prompts.shape[0], 1)
            log_probs = self._log_probs(self._scored(*pairs), pairs[1])[0]
            parts.append(log_probs.view(prompts.shape[0], len(labels)).float().softmax(-1))
        return torch.cat(parts) if parts else prompt.new_zeros(0, len(labels), dtype=torch.float32)

    @torch.no_grad()
    def _sampled(self, prompt: torch.Tensor) -> torch.Tensor:
        """Completions sampled at temperature 1 (dropout off), as stored ids up to and with their
        end token, PAD after it."""
        ids, mask = self._model_ids(prompt)
        stop = self.head(self.output_names[0]).stop_id - ID_OFFSET
        training = self.model.training
        self.model.eval()
        try:
            sequences = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                                            top_k=0, top_p=1.0, max_new_tokens=self.target_length,
                                            pad_token_id=self.pad_id, eos_token_id=stop)
        finally:
            self.model.train(training)
        new = sequences[:, ids.shape[1]:]
        ended = (new == stop).long().cumsum(1) - (new == stop).long() > 0  # after the first end token
        return torch.where(ended, PAD, new + ID_OFFSET)

    def _token_log_probs(self, prompt: torch.Tensor, completions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each completion token's log-probability (0 past the completion's end), and which
        steps are tokens of it."""
        head = self.head(self.output_names[0])
        scored = self._scored(prompt, completions)
        target = head.aligned(completions, scored.shape[1])
        counted = target != PAD
        log_probs = -F.cross_entropy(head.logits(scored).float().transpose(1, 2), (target - ID_OFFSET).clamp(min=0),
                                     reduction="none")
        return log_probs * counted, counted

    def _log_probs(self, scored: torch.Tensor, completions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's completion log-probability (the sum over its tokens, the end token
        included) and its token count."""
        losses = self.head(self.output_names[0]).row_losses(scored, completions)
        return -losses.losses, losses.weights

    def _model_ids(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mask = ids > 0
        return torch.where(mask, ids - ID_OFFSET, self.pad_id), mask.long()

    def _scored(self, prompt: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        ids, mask = self._model_ids(torch.cat([prompt, target], dim=1))
        positions = (mask.cumsum(1) - 1).clamp(min=0)  # left padding: each row's tokens count from 0
        steps = target.shape[1]
        kwargs = {"logits_to_keep": steps + 1} if self.keeps_logits else {}
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False,
                            **kwargs).logits
        logits = logits[:, -(steps + 1):-1]  # the logits at step i predict the target's token i
        tokens = logits.argmax(-1, keepdim=True) + ID_OFFSET
        return torch.cat([logits, tokens.to(logits.dtype)], dim=-1)

    @torch.no_grad()
    def generated(self, prompt: torch.Tensor, generation=None, streamer=None) -> torch.Tensor:
        """Generated outputs ``[rows, max_new_tokens, 2]`` (each token's probability, then the
        token as a stored id; PAD after a row's end) from right-padded prompts of stored ids, with
        ``generation`` (a GenerationConfig; default the config's), handing each step's tokens to
        ``streamer`` (transformers' ``put``/``end`` protocol) where given."""
        return self._generated(_left_aligned(prompt.long()), generation, streamer)

    @torch.no_grad()
    def _generated(self, prompt: torch.Tensor, generation=None, streamer=None) -> torch.Tensor:
        ids, mask = self._model_ids(prompt)
        generation = generation or self.generation
        settings = generation.transformers_kwargs()
        settings["max_new_tokens"] = settings.get("max_new_tokens") or self.target_length
        stop = self.head(self.output_names[0]).stop_id - ID_OFFSET
        pad = generation.pad_token_id if generation.pad_token_id is not None else self.pad_id
        if self.constraint is not None:
            processors = import_transformers().LogitsProcessorList([self.constraint.after(ids.shape[1])])
            settings["logits_processor"] = processors
        # A sharded model's forward is a collective: every worker steps until all have ended.
        out = self.model.generate(input_ids=ids, attention_mask=mask, pad_token_id=pad, eos_token_id=stop,
                                  output_scores=True, return_dict_in_generate=True, streamer=streamer,
                                  synced_gpus=_sharded(self.model), **settings)
        new = out.sequences[:, ids.shape[1]:]
        # Greedy and sampled steps' scores are logits; beam search's are log-probabilities already.
        beams = getattr(out, "beam_indices", None)
        scores = self._causal_lm().compute_transition_scores(out.sequences, out.scores, beams,
                                                             normalize_logits=beams is None)
        ended = (new == stop).long().cumsum(1) - (new == stop).long() > 0  # after the first end token
        if isinstance(self.constraint, FormatConstraint) and not self.warned_of_cut_answers:
            self.warned_of_cut_answers = _warn_if_cut((new == stop).any(1), settings["max_new_tokens"])
        tokens = torch.where(ended, PAD, new + ID_OFFSET)
        probabilities = torch.where(ended, 1.0, scores.float().exp())
        output = torch.stack([probabilities, tokens.float()], dim=-1)
        # Every batch as wide as the longest allowed text (generation stops early once all rows
        # have ended), so that batches concatenate.
        return F.pad(output, (0, 0, 0, settings["max_new_tokens"] - output.shape[1]))

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        name = self.output_names[0]
        if GRPO in logits:  # a GRPO training batch: the sampled completions' loss
            loss = logits[GRPO].mean()
            return loss, {name: loss}
        loss = self.head(name).loss(logits[name], targets[name])
        if PREFERENCE in logits:
            return self.preference.loss(PreferenceScores.of(logits[PREFERENCE]), loss), {name: loss}
        return loss, {name: loss}

    def no_rows_outputs(self, device) -> dict[str, torch.Tensor]:
        """What predicting no rows gives: generated outputs of zero rows."""
        outputs = {self.output_names[0]: torch.zeros(0, 0, 2, device=device)}
        if self.label_ids is not None:
            outputs[LABEL_PROBABILITIES] = torch.zeros(0, len(self.label_ids), device=device)
        return outputs

    def merge_adapter(self) -> None:
        """Fold the adapter into the base weights: a plain model, saved whole."""
        if self.adapter_keys is None:
            return
        self.model = self.model.merge_and_unload()
        self.adapter_keys = None
        for hook in self.adapter_hooks:  # the state dict is the whole model's again
            hook.remove()
        self.adapter_hooks = []


class LabelConstraint:
    """Generation held to a set of token sequences (a category output's labels, each ending with
    the end token): at each step, every token that continues none of them is ruled out."""

    def __init__(self, label_ids: list[list[int]]):
        self.allowed: dict[tuple, set[int]] = {}
        """For each sequence of tokens generated so far that begins a label, the tokens that may
        come next (model ids)."""
        for label in label_ids:
            tokens = [i - ID_OFFSET for i in label]
            for depth, token in enumerate(tokens):
                self.allowed.setdefault(tuple(tokens[:depth]), set()).add(token)
        self.prompt_width = 0

    def after(self, prompt_width: int) -> LabelConstraint:
        """This constraint for prompts ``prompt_width`` tokens wide (generated tokens follow)."""
        constraint = LabelConstraint([])
        constraint.allowed, constraint.prompt_width = self.allowed, prompt_width
        return constraint

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ruled_out = torch.zeros_like(scores, dtype=torch.bool)
        for row, generated in enumerate(input_ids[:, self.prompt_width:].tolist()):
            allowed = self.allowed.get(tuple(generated))
            if allowed is not None:  # None: the row has ended (its end token is behind it)
                ruled_out[row] = True
                ruled_out[row, sorted(allowed)] = False
        return scores.masked_fill(ruled_out, float("-inf"))


def _generation_constraint(target, metadata: dict) -> LabelConstraint | FormatConstraint | None:
    decoder = getattr(target, "decoder", None)
    if getattr(decoder, "constrain_to_vocabulary", False):
        return LabelConstraint(metadata["label_ids"])
    if getattr(decoder, "type", None) == "text_parser":
        return FormatConstraint(decoder, metadata["hf_tokenizer"], metadata["stop_id"] - ID_OFFSET)
    return None


def _warn_if_cut(finished: torch.Tensor, max_new_tokens: int) -> bool:
    """A text_parser's answer that reached the token limit before its format could end is cut
    short, so not valid: say so, with the fix, rather than hand it over silently. Whether it
    warned (once per model is enough: the limit is the same for every batch)."""
    cut = int((~finished).sum())
    if cut:
        log.warning("answers reached generation.max_new_tokens (%d) before their text_parser format ended (%d of "
                    "the %d of a batch), so they are cut short and do not follow it; raise "
                    "generation.max_new_tokens", max_new_tokens, cut, len(finished))
    return cut > 0


def _sharded(model: nn.Module) -> bool:
    """Whether the model's weights are sharded over workers (FSDP's DTensors, ZeRO-3's
    partitioned parameters), so that each of its forward passes gathers them from all."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) or hasattr(p, "ds_id") for p in model.parameters())


def _token_lists(tokens: torch.Tensor, stop_id: int) -> list[list[int]]:
    """Each row's stored ids, without padding and the end token."""
    return [[t for t in row if t not in (PAD, stop_id)] for row in tokens.tolist()]


def _left_aligned(tokens: torch.Tensor) -> torch.Tensor:
    """Right-padded rows of stored ids, moved right so that each ends at the last column."""
    width = tokens.shape[1]
    if width == 0:
        return tokens.new_zeros(tokens.shape[0], 1)  # an empty prompt: one padded step to predict from
    lengths = (tokens > 0).sum(1, keepdim=True)
    source = torch.arange(width, device=tokens.device).unsqueeze(0) - (width - lengths)
    return torch.where(source >= 0, tokens.gather(1, source.clamp(min=0)), 0)


def _pad_id(model_config, stop: int) -> int:
    pad = getattr(model_config, "pad_token_id", None)
    return pad if isinstance(pad, int) else stop


def _adapter_only(module: LLM, state_dict: dict, prefix: str, local_metadata) -> None:
    """The state dict keeps the adapter's weights only (the base model's stay in base_model)."""
    for key in [k for k in state_dict if k.startswith(prefix) and k[len(prefix):] not in module.adapter_keys]:
        del state_dict[key]


def _base_weights_not_missing(module: LLM, incompatible) -> None:
    """Loading an adapter's state dict: the frozen base weights are not missing, they come from
    base_model. (Keys may carry a wrapper's prefix, such as DDP's ``module.``.)"""
    incompatible.missing_keys[:] = [k for k in incompatible.missing_keys
                                    if any(k == a or k.endswith("." + a) for a in module.adapter_keys)]


def build_causal_lm(config, model_config: dict, load_pretrained: bool, adapter) -> nn.Module:
    """The transformers model of ``base_model`` (its weights where ``load_pretrained``, quantized
    where the config says), with an adapter where ``adapter`` is set."""
    transformers = import_transformers()
    config_of_model = transformers_config(transformers, model_config, "base_model")
    if config.quantization is not None:
        model = quantized_causal_lm(transformers, config.base_model, config_of_model, config.quantization)
    elif load_pretrained:
        folder = model_folder(config.base_model, "base_model")
        check_weights(folder, "base_model")
        model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), config=config_of_model,
                                                                  local_files_only=True, use_safetensors=True,
                                                                  dtype=torch.float32)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config_of_model, dtype=torch.float32)
    return with_adapter(model, adapter) if adapter is not None else model


def quantized_causal_lm(transformers, base_model: str, config_of_model, quantization) -> nn.Module:
    """``base_model`` with its linear layers in 4 or 8 bits (bitsandbytes' ``Linear4bit`` or
    ``Linear8bitLt``), on the device this process computes on, ready for an adapter to train
    over it (peft's ``prepare_model_for_kbit_training``: frozen, norms in float32)."""
    folder = model_folder(base_model, "base_model")
    check_weights(folder, "base_model")
    import_bitsandbytes()
    # bitsandbytes quantizes as the weights reach their device, so they are loaded on the device
    # that computes (a worker's GPU, else the CPU), not moved there afterwards.
    device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    settings = quantization.model_dump(include=set(BITSANDBYTES_KEYS))
    bits = transformers.BitsAndBytesConfig(load_in_4bit=quantization.bits == 4, load_in_8bit=quantization.bits == 8,
                                           **settings)
    # LLM.int8() computes in float16 and logs so on every step of a float32 model: plait chose
    # float32 for the unquantized layers, so the notice says nothing new.
    logging.getLogger("bitsandbytes.autograd._functions").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bitsandbytes' notices while it quantizes
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(folder), config=config_of_model, local_files_only=True, use_safetensors=True, dtype=torch.float32,
            quantization_config=bits, device_map={"": device})
    _unpacked_on_the_cpu(model)
    return import_peft().prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _unpacked_on_the_cpu(model: nn.Module) -> None:
    """Keep bitsandbytes' 4-bit layers in the format they trained in on every CPU. On a CPU with
    AVX512-BF16, a Linear4bit repacks its weights in place at its first forward pass without
    gradients (a validation, a prediction): that fails on layers whose input width is not a
    multiple of the quantization block ("shape '[32, 0]' is invalid"), and it rounds the scales
    to bfloat16, so such a CPU would predict otherwise than the one the model trained on."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def save_dequantized_base(config, location) -> None:
    """Write ``config.base_model`` as its quantized weights give it back, in float16, as a
    Hugging Face model folder at ``location`` (a path or fsspec URL, published whole): a base to
    fine-tune or predict on without bitsandbytes, whose weights hold the quantization's rounding
    (what a model trained over the quantized base saw)."""
    if config.quantization is None:
        raise ModelError("save_dequantized_base_model: the config has no quantization section, so its base model is "
                         "not quantized; set quantization: {bits: 4} (or 8), or use base_model as it is")
    transformers = import_transformers()
    folder = model_folder(config.base_model, "base_model")
    config_of_model = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    model = quantized_causal_lm(transformers, config.base_model, config_of_model, config.quantization)
    model = model.dequantize().to(torch.float16)
    with built_locally(Folder(location), marker="config.json") as tmp:
        model.save_pretrained(tmp)
        # The tokenizer and the files that describe it come along (the weights are the new ones).
        for file in folder.iterdir():
            if file.is_file() and not (tmp / file.name).exists() and not file.name.endswith(WEIGHT_SUFFIXES):
                shutil.copyfile(file, tmp / file.name)


def with_adapter(model: nn.Module, adapter) -> nn.Module:
    """``model`` with ``adapter`` (a LoRA, IA3, LoHa, LoKr or VeRA config) on the layers its
    ``target_modules`` name."""
    peft = import_peft()
    linear = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)})
    for target in adapter.target_modules or []:
        if not any(name == target or name.endswith("." + target) for name, _ in model.named_modules()):
            raise ModelError(f"adapter.target_modules: {target!r} matches no module of the base model; its linear "
                             f"layers are named: {', '.join(linear)}")
    try:
        with warnings.catch_warnings():  # peft asks transformers a question transformers calls deprecated
            warnings.simplefilter("ignore", FutureWarning)
            return peft.get_peft_model(model, adapter.peft_config(peft))
    except ValueError as error:
        raise ModelError(f"adapter: peft cannot place {adapter.type} adapters on this model ({error}); name the "
                         f"layers in adapter.target_modules, among: {', '.join(linear)}") from None


@functools.cache
def import_bitsandbytes():
    try:
        import bitsandbytes
    except ImportError:
        raise BackendError("quantization needs bitsandbytes: pip install plait[hf]") from None
    return bitsandbytes
