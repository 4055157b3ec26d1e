"""The sequence heads: greedy and beam search against a hand-computed case, the tagger's shape."""

from __future__ import annotations

import math

import pytest
import torch

from plait.errors import ConfigError
from plait.models.sequence_heads import GeneratorHead, TaggerHead

VOCABULARY = ["<PAD>", "<UNK>", "<SOS>", "<EOS>", "A", "B"]
A, B, STOP = 4, 5, 3

# The next token's probabilities given the previous one (a Markov chain the heads decode).
NEXT = {2: {A: 0.6, B: 0.4}, A: {A: 0.5, B: 0.2, STOP: 0.3}, B: {STOP: 0.9, A: 0.1}}


def tiny_generator(plait_config, beam_width: int, steps: int = 3) -> GeneratorHead:
    config = plait_config(outputs=[{"name": "s", "type": "sequence", "decoder": {"beam_width": beam_width}}])
    head = GeneratorHead(config.output_features[0], {"vocabulary": VOCABULARY, "sequence_length": steps}, (8,))

    def step(tokens, state):  # the chain's log-probabilities; the state goes along unchanged
        logits = torch.full((len(tokens), len(VOCABULARY)), -1e9)
        for row, token in enumerate(tokens.tolist()):
            for following, p in NEXT.get(token, {0: 1.0}).items():
                logits[row, following] = math.log(p)
        return logits, state

    head._step = step
    return head


def decoded(head, output) -> list[list[str]]:
    out = head.predict(output)
    return [[VOCABULARY[t] for t in row[:n]] for row, n in zip(out["prediction"].tolist(), out["length"].tolist())]


def test_greedy_takes_the_likeliest_token_at_each_step(plait_config):
    head = tiny_generator(plait_config, beam_width=1)
    # A (0.6), then A again (0.5), then A (0.5): 0.15 in all, though B then stop has 0.36.
    assert decoded(head, head._greedy(torch.zeros(1, 2, 1), 2)) == [["A", "A", "A"]] * 2


def test_beam_search_finds_the_likeliest_sequence(plait_config):
    head = tiny_generator(plait_config, beam_width=2)
    output = head._beam_search(torch.zeros(1, 2, 1), 2)
    assert decoded(head, output) == [["B"]] * 2  # B then stop: 0.4 * 0.9 = 0.36, the likeliest
    probabilities = head.predict(output)["probabilities"][0, :2]
    assert torch.allclose(probabilities, torch.tensor([0.4, 0.9]))


def test_the_tagger_needs_a_sequence_from_the_combiner(plait_config):
    config = plait_config(outputs=[{"name": "s", "type": "sequence", "decoder": "tagger"}])
    with pytest.raises(ConfigError, match="give a sequence or text input reduce_output: null"):
        TaggerHead(config.output_features[0], {"vocabulary": VOCABULARY, "sequence_length": 3}, (8,))


def test_the_tagger_labels_every_step_and_its_loss_counts_them_all(plait_config):
    config = plait_config(outputs=[{"name": "s", "type": "sequence", "decoder": "tagger"}])
    head = TaggerHead(config.output_features[0], {"vocabulary": VOCABULARY, "sequence_length": 3}, (3, 8))
    output = head(torch.randn(2, 3, 8))
    assert output.shape == (2, 3, len(VOCABULARY) + 1)
    rows = head.row_losses(output, torch.tensor([[A, B, 0], [A, 0, 0]]))
    assert rows.weights.tolist() == [3.0, 3.0]
