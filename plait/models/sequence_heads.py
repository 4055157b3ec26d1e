"""Heads of sequence and text outputs: a token per step, from a vocabulary whose first four
entries are padding, unknown, start and stop (plait.features.text).

Both heads give, per row, ``[steps, vocabulary + 1]``: the logits of each step, and in the last
channel the token chosen at that step. The tagger chooses the likeliest token of each step; the
generator chooses as it decodes (greedily, or by beam search when predicting), and a beam's
token need not be the likeliest of its step, so the choice travels beside the logits rather than
being read back from them.

The loss of a row is the sum of its steps' cross-entropies over its step count, so the batch's
loss is the mean over tokens. The generator learns the stop token and nothing after it; the
tagger learns every step, padding included: a padded step of the input is labelled padding, and
that is how predictions end where the input does.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from plait.errors import ConfigError
from plait.utils.tokens import PAD_ID, START_ID, STOP_ID
from plait.models.layers import SequenceReducer, fc_stack, linear
from plait.models.outputs import OutputHead, RowLosses

PAD, START, STOP = PAD_ID, START_ID, STOP_ID


class SequenceHead(OutputHead):
    """What both heads share: the token vocabulary, the loss over steps and the predictions."""

    def row_losses(self, output: torch.Tensor, target: torch.Tensor) -> RowLosses:
        logits, target = self.logits(output), self.aligned(target, output.shape[1])
        losses = F.cross_entropy(logits.float().transpose(1, 2), target, reduction="none")
        counted = self.counted(target).to(losses.dtype)
        return RowLosses((losses * counted).sum(-1), counted.sum(-1))

    def counted(self, target: torch.Tensor) -> torch.Tensor:
        """The steps the loss counts: up to and with the stop token (the generator)."""
        return target != PAD

    @staticmethod
    def logits(output: torch.Tensor) -> torch.Tensor:
        return output[..., :-1]

    @staticmethod
    def tokens(output: torch.Tensor) -> torch.Tensor:
        return output[..., -1].long()

    @staticmethod
    def aligned(target: torch.Tensor, steps: int) -> torch.Tensor:
        """The target cut or padded to the head's number of steps."""
        target = target.long()
        if target.shape[1] >= steps:
            return target[:, :steps]
        return F.pad(target, (0, steps - target.shape[1]), value=PAD)

    def predict(self, output: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tokens up to the first padding or stop token; each chosen token's probability."""
        tokens = self.tokens(output)
        probabilities = torch.softmax(self.logits(output).float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return {"prediction": tokens, "probabilities": probabilities, "length": self.lengths(tokens)}

    @staticmethod
    def lengths(tokens: torch.Tensor) -> torch.Tensor:
        """How many tokens each row has before its first padding or stop token."""
        ended = (tokens == PAD) | (tokens == STOP)
        return torch.where(ended.any(1), ended.float().argmax(1), torch.full_like(tokens[:, 0], tokens.shape[1]))


class TaggerHead(SequenceHead):
    """One label per step of the combiner's sequence: optional self-attention, the fully connected
    stack applied at every step, then the projection to the vocabulary."""

    def __init__(self, feature, metadata: dict, input_shape, dependency_size: int = 0):
        nn.Module.__init__(self)
        self.feature, self.metadata = feature, metadata
        shape = (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)
        if len(shape) != 2:
            raise ConfigError(
                f"output_features.{feature.name}.decoder: the tagger labels each step of a sequence, but the "
                f"combiner gives one vector per row; give a sequence or text input reduce_output: null and use "
                f"the sequence_concat or sequence combiner, or use the generator decoder")
        steps, width = shape
        decoder = feature.decoder
        self.attention = None
        if decoder.use_attention:
            self.attend_in = nn.Linear(width, decoder.attention_embedding_size)
            self.attention = nn.MultiheadAttention(decoder.attention_embedding_size, decoder.attention_num_heads,
                                                   batch_first=True)
            width = decoder.attention_embedding_size
        self.fc = fc_stack(width + dependency_size, decoder)
        vocabulary = len(metadata["vocabulary"])
        self.projection = linear(self.fc.output_size, vocabulary, decoder.use_bias, decoder.weights_initializer,
                                 decoder.bias_initializer)

    def decode(self, combined, dependencies=()):
        x = combined if combined.dim() == 3 else combined.unsqueeze(1)  # no rows to predict: [0, width]
        if self.attention is not None:
            x = self.attend_in(x)
            x = self.attention(x, x, x, need_weights=False)[0]
        if dependencies:
            x = torch.cat([x, *(d.unsqueeze(1).expand(-1, x.shape[1], -1) for d in dependencies)], dim=-1)
        hidden = self.fc(x.reshape(-1, x.shape[-1])).reshape(x.shape[0], x.shape[1], self.fc.output_size)
        logits = self.projection(hidden)
        tokens = logits.argmax(-1, keepdim=True).to(logits.dtype)
        return hidden.mean(1), torch.cat([logits, tokens], dim=-1)

    def counted(self, target: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(target, dtype=torch.bool)


class GeneratorHead(SequenceHead):
    """The stack's output starts a recurrent decoder, which reads the previous token and predicts
    the next: the true previous token in training (teacher forcing), its own choice otherwise."""

    reads_target = True
    """The model gives this head its target in training (``ECD.forward``)."""

    def __init__(self, feature, metadata: dict, input_shape, dependency_size: int = 0):
        nn.Module.__init__(self)
        self.feature, self.metadata = feature, metadata
        decoder = feature.decoder
        self.reducer = SequenceReducer.build(feature.reduce_input, input_shape,
                                             f"output_features.{feature.name}.reduce_input")
        self.fc = fc_stack(self.reducer.output_size + dependency_size, decoder)
        width, vocabulary = self.fc.output_size, len(metadata["vocabulary"])
        self.steps, self.beam_width = metadata["sequence_length"], decoder.beam_width
        self.embedding = nn.Embedding(vocabulary, width)
        cell = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[decoder.cell_type]
        self.rnn = cell(width, width, num_layers=decoder.num_layers, batch_first=True)
        self.projection = linear(width, vocabulary, decoder.use_bias, decoder.weights_initializer,
                                 decoder.bias_initializer)

    def forward(self, combined, dependencies=(), return_hidden=False, target=None):
        hidden = self.reducer(combined)
        if dependencies:
            hidden = torch.cat([hidden, *dependencies], dim=-1)
        hidden = self.fc(hidden)
        state = self._initial_state(hidden)
        if target is not None:
            output = self._teacher_forced(state, target.long())
        elif self.beam_width > 1 and not torch.is_grad_enabled():
            output = self._beam_search(state, hidden.shape[0])
        else:
            output = self._greedy(state, hidden.shape[0])
        return (hidden, output) if return_hidden else output

    def _initial_state(self, hidden: torch.Tensor):
        layers = hidden.unsqueeze(0).expand(self.rnn.num_layers, -1, -1).contiguous()
        return (layers, torch.zeros_like(layers)) if isinstance(self.rnn, nn.LSTM) else layers

    def _step(self, tokens: torch.Tensor, state):
        out, state = self.rnn(self.embedding(tokens).unsqueeze(1), state)
        return self.projection(out[:, 0]), state

    def _teacher_forced(self, state, target: torch.Tensor) -> torch.Tensor:
        previous = torch.cat([torch.full_like(target[:, :1], START), target[:, :-1]], dim=1)
        out, _ = self.rnn(self.embedding(previous), state)
        logits = self.projection(out)
        return torch.cat([logits, target.unsqueeze(-1).to(logits.dtype)], dim=-1)

    def _greedy(self, state, rows: int) -> torch.Tensor:
        tokens = torch.full((rows,), START, dtype=torch.long, device=self.embedding.weight.device)
        steps = []
        for _ in range(self.steps):
            logits, state = self._step(tokens, state)
            tokens = logits.argmax(-1)
            steps.append(torch.cat([logits, tokens.unsqueeze(-1).to(logits.dtype)], dim=-1))
        return torch.stack(steps, dim=1)

    def _beam_search(self, state, rows: int) -> torch.Tensor:
        """The likeliest sequence of ``beam_width`` kept at each step (a finished one, which has
        given its stop token, keeps its score and only pads)."""
        k, device = self.beam_width, self.embedding.weight.device
        state = _repeat_state(state, k)
        tokens = torch.full((rows * k,), START, dtype=torch.long, device=device)
        score = torch.full((rows, k), float("-inf"), device=device)
        score[:, 0] = 0.0  # every beam starts as the same empty sequence: keep one of them
        history, logit_history = [], []
        finished = torch.zeros(rows * k, dtype=torch.bool, device=device)
        for _ in range(self.steps):
            logits, state = self._step(tokens, state)
            log_p = torch.log_softmax(logits.float(), dim=-1)
            # A finished beam can only add padding, at no cost.
            log_p = torch.where(finished.unsqueeze(-1), torch.full_like(log_p, float("-inf")), log_p)
            log_p[:, PAD] = torch.where(finished, 0.0, log_p[:, PAD])
            vocabulary = log_p.shape[-1]
            total = (score.reshape(-1, 1) + log_p).reshape(rows, k * vocabulary)
            score, best = total.topk(k, dim=-1)
            origin = (best // vocabulary + torch.arange(rows, device=device).unsqueeze(1) * k).reshape(-1)
            tokens = (best % vocabulary).reshape(-1)
            state = _select_state(state, origin)
            history = [h[origin] for h in history] + [tokens]
            logit_history = [h[origin] for h in logit_history] + [logits[origin]]
            finished = finished[origin] | (tokens == STOP) | (tokens == PAD)
        chosen = torch.arange(rows, device=device) * k + score.argmax(-1)
        tokens = torch.stack(history, dim=1)[chosen]
        logits = torch.stack(logit_history, dim=1)[chosen]
        return torch.cat([logits, tokens.unsqueeze(-1).to(logits.dtype)], dim=-1)


def _repeat_state(state, k: int):
    if isinstance(state, tuple):
        return tuple(s.repeat_interleave(k, dim=1) for s in state)
    return state.repeat_interleave(k, dim=1)


def _select_state(state, index: torch.Tensor):
    if isinstance(state, tuple):
        return tuple(s[:, index] for s in state)
    return state[:, index]

