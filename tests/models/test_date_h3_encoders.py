"""Date and H3 encoders: what each part of the input means to them."""

from __future__ import annotations

import pytest
import torch

from plait.models.encoders import build_encoder

MARCH_5 = [2024, 3, 5, 1, 65, 10, 11, 12, 36672]


@pytest.fixture
def make_encoder(plait_config, input_metadata):
    """make_encoder(type, encoder options) -> the encoder module, built from a validated config."""
    return lambda ftype, encoder: build_encoder(
        plait_config(inputs=[{"name": "f", "type": ftype, "encoder": encoder}]).input_features[0], input_metadata[ftype])


def test_date_wave_puts_december_next_to_january_and_tells_morning_from_evening():
    from plait.models.date_encoders import CycleWaves

    waves = CycleWaves()
    january, december, june = (torch.tensor([[2024, month, 1, 0, 1, 0, 0, 0, 0]]) for month in (1, 12, 6))
    assert (waves(december) - waves(january)).norm() < (waves(june) - waves(january)).norm()
    six, eighteen = (torch.tensor([[2024, 1, 1, 0, 1, hour, 0, 0, hour * 3600]]) for hour in (6, 18))
    assert not torch.allclose(waves(six), waves(eighteen))  # cos alone could not tell them apart


def test_date_embed_reads_years_far_from_training_without_blowing_up(make_encoder):
    torch.manual_seed(0)
    encoder = make_encoder("date", {"type": "embed", "num_fc_layers": 1})
    out = encoder(torch.tensor([MARCH_5, [1900, *MARCH_5[1:]]]))
    assert torch.isfinite(out).all() and out.abs().max() < 100


def test_h3_digits_past_the_resolution_do_not_count(make_encoder, make_input_batch):
    torch.manual_seed(0)
    cells = make_input_batch("h3", 4)
    cells[:, 2] = 3  # resolution 3: digits 4 to 15 are padding
    changed = cells.clone()
    changed[:, 4 + 3:] = 0
    for encoder_type in ("embed", "weighted_sum", "rnn"):
        encoder = make_encoder("h3", {"type": encoder_type})
        torch.testing.assert_close(encoder(cells), encoder(changed))


def test_h3_weighted_sum_learns_its_weights(make_encoder, make_input_batch):
    encoder = make_encoder("h3", {"type": "weighted_sum", "should_softmax": True})
    encoder(make_input_batch("h3", 5)).pow(2).sum().backward()
    assert encoder.weights.grad is not None and encoder.weights.grad.abs().sum() > 0


def test_h3_encoders_keep_the_19_steps_without_a_reduction(make_encoder, make_input_batch):
    for encoder_type, width in (("embed", 6), ("rnn", 4)):
        size = {"embedding_size": 6} if encoder_type == "embed" else {"hidden_size": 2, "bidirectional": True}
        encoder = make_encoder("h3", {"type": encoder_type, "reduce_output": None, **size})
        assert encoder.output_shape == (19, width)
        assert encoder(make_input_batch("h3", 3)).shape == (3, 19, width)
