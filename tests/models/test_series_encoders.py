"""Timeseries and audio encoders: the text encoders over steps of floats, passthrough and dense;
padded steps (NaN) are read as padding_value and left out."""

from __future__ import annotations

import pytest
import torch

from plait.errors import ModelError
from plait.models.encoders import TiedInput, build_encoder

NAN = float("nan")


@pytest.fixture
def make_encoder(plait_config):
    def make(ftype: str, encoder: dict, **metadata):
        config = plait_config(inputs=[{"name": "f", "type": ftype, "encoder": encoder}])
        return build_encoder(config.input_features[0], {"padding_value": 0.0, **metadata})

    return make


@pytest.mark.parametrize("encoder", [{"type": "parallel_cnn", "reduce_output": "mean"},
                                     {"type": "rnn", "reduce_output": "last"},
                                     {"type": "transformer", "reduce_output": "max", "dropout": 0.0}],
                         ids=["parallel_cnn", "rnn", "transformer"])
def test_padded_steps_are_left_out(encoder, make_encoder):
    torch.manual_seed(0)
    short = make_encoder("timeseries", encoder, timeseries_length=3).eval()
    long = make_encoder("timeseries", encoder, timeseries_length=5).eval()
    state = short.state_dict()
    if "body.position" in state:  # learned positions: one per step of the longer series
        state["body.position"] = torch.cat([state["body.position"], long.state_dict()["body.position"][3:]])
    long.load_state_dict(state)
    series = torch.tensor([[1.0, -2.0, 0.5]])
    padded = torch.tensor([[1.0, -2.0, 0.5, NAN, NAN]])
    assert torch.allclose(short(series), long(padded), atol=1e-5)


def test_passthrough_gives_the_steps_with_padding_as_padding_value(make_encoder):
    steps = torch.tensor([[1.0, 2.0, NAN], [NAN, NAN, NAN]])
    flat = make_encoder("timeseries", {"type": "passthrough"}, timeseries_length=3, padding_value=-1.0)
    assert flat.output_shape == (3,) and flat(steps).tolist() == [[1.0, 2.0, -1.0], [-1.0, -1.0, -1.0]]
    sequence = make_encoder("timeseries", {"type": "passthrough", "reduce_output": None}, timeseries_length=3)
    assert sequence.output_shape == (3, 1) and sequence(steps).shape == (2, 3, 1)
    assert make_encoder("timeseries", {"type": "passthrough", "reduce_output": "mean"},
                        timeseries_length=3)(steps).tolist() == [[1.5], [0.0]]


def test_dense_reads_padding_as_padding_value(make_encoder):
    torch.manual_seed(0)
    dense = make_encoder("timeseries", {"type": "dense", "output_size": 4}, timeseries_length=3, padding_value=2.0)
    assert torch.equal(dense(torch.tensor([[1.0, NAN, NAN]])), dense(torch.tensor([[1.0, 2.0, 2.0]])))


def test_audio_frames_of_several_features_per_step(make_encoder):
    encoder = make_encoder("audio", {"type": "stacked_cnn", "num_filters": 8, "num_fc_layers": 1, "output_size": 5},
                           frames=40, channels=7)
    frames = torch.randn(3, 40, 7)
    frames[0, 20:] = NAN
    assert encoder(frames).shape == (3, 5) and torch.isfinite(encoder(frames)).all()


def test_tied_series_of_another_length_are_cut_or_padded_and_audio_needs_the_same_features(make_encoder):
    torch.manual_seed(0)
    shared = make_encoder("timeseries", {"type": "rnn", "state_size": 8, "reduce_output": "last"},
                          timeseries_length=4).eval()
    short = TiedInput(shared, "timeseries", {"timeseries_length": 2}, {"timeseries_length": 4})
    long = TiedInput(shared, "timeseries", {"timeseries_length": 6}, {"timeseries_length": 4})
    expected = shared(torch.tensor([[1.0, 2.0, NAN, NAN]]))
    assert torch.equal(short(torch.tensor([[1.0, 2.0]])), expected)
    assert torch.equal(long(torch.tensor([[1.0, 2.0, NAN, NAN, NAN, NAN]])), expected)
    with pytest.raises(ModelError, match="an audio input of 40 features per step cannot share the encoder of one of 80"):
        TiedInput(shared, "audio", {"frames": 9, "channels": 40}, {"frames": 9, "channels": 80})
