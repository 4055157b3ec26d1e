"""Every (feature type, encoder) pair builds from its config and encodes a batch to [batch, size]."""

from __future__ import annotations

import pytest
import torch

from plait.models.encoders import ENCODERS, build_encoder

ROWS = 7
# Image encoders take images of sizes each model allows, and torchvision's ask for weights: they
# have tests of their own (test_image_encoders.py, test_torchvision_encoders.py).
PAIRS = sorted(pair for pair in ENCODERS if pair[0] != "image")


@pytest.fixture
def make_encoder(plait_config, input_metadata):
    """make_encoder(type, encoder options) -> the encoder module, built from a validated config."""

    def make(ftype: str, encoder: dict):
        config = plait_config(inputs=[{"name": "f", "type": ftype, "encoder": encoder}])
        return build_encoder(config.input_features[0], input_metadata[ftype])

    return make


@pytest.mark.parametrize("ftype,encoder_type", PAIRS, ids=[f"{t}-{e}" for t, e in PAIRS])
def test_every_encoder_gives_one_vector_of_output_size_per_row(ftype, encoder_type, make_encoder, make_input_batch):
    torch.manual_seed(0)
    encoder = make_encoder(ftype, {"type": encoder_type})
    batch = make_input_batch(ftype, ROWS)
    out = encoder(batch)
    assert out.shape == (ROWS, encoder.output_size)
    assert out.dtype == torch.float32
    # Edge rows (an empty text, the empty set) still encode to finite values.
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("ftype,encoder_type", PAIRS, ids=[f"{t}-{e}" for t, e in PAIRS])
def test_every_encoder_is_trainable_or_parameter_free(ftype, encoder_type, make_encoder, make_input_batch):
    torch.manual_seed(0)
    encoder = make_encoder(ftype, {"type": encoder_type})
    params = [p for p in encoder.parameters() if p.requires_grad]
    if not params:  # passthrough and one-hot have nothing to learn
        assert encoder_type in ("passthrough", "sparse", "onehot")
        return
    encoder(make_input_batch(ftype, ROWS)).pow(2).sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


def test_every_input_type_has_an_encoder_for_its_default():
    from plait.config.encoders import DEFAULT_ENCODER

    for ftype, encoder_type in DEFAULT_ENCODER.items():
        assert (ftype, encoder_type) in ENCODERS


@pytest.mark.parametrize("reduce_output", ["mean", "sum", "max"])
def test_text_embed_reduces_over_tokens_ignoring_padding(reduce_output, make_encoder):
    torch.manual_seed(0)
    encoder = make_encoder("text", {"type": "embed", "embedding_size": 8, "reduce_output": reduce_output})
    tokens = torch.tensor([[2, 3, 0, 0, 0, 0], [2, 3, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    padded_differently = torch.tensor([[2, 3, 0, 0, 0, 0], [2, 0, 3, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    out = encoder(tokens)
    assert out.shape == (3, 8)
    # Where padding sits does not change a bag of embeddings.
    torch.testing.assert_close(encoder(padded_differently), out)
    # An all-padding row encodes to zeros (not NaN or -inf).
    assert torch.equal(out[2], torch.zeros(8))


def test_category_embedding_size_follows_the_vocabulary_unless_set(make_encoder, input_metadata):
    assert make_encoder("category", {"type": "dense"}).output_size == min(50, (len(input_metadata["category"]["vocabulary"]) + 1) // 2 + 1)
    assert make_encoder("category", {"type": "dense", "embedding_size": 11}).output_size == 11


def test_category_vectors_start_small_unless_null_asks_for_unit_normal_ones(make_encoder):
    """Xavier's bound by default (benchmarks/README.md: a value seen in a few rows keeps its start)."""
    torch.manual_seed(0)
    table = make_encoder("category", {"type": "dense", "embedding_size": 400}).embedding.weight
    bound = (6 / sum(table.shape)) ** 0.5
    assert table.abs().max() <= bound and table.abs().max() > 0.9 * bound
    unit = make_encoder("category", {"type": "dense", "embedding_size": 400, "embedding_initializer": None}).embedding.weight
    assert 0.9 < unit.std() < 1.1


def test_one_hot_category_encoding_is_exact(make_encoder):
    encoder = make_encoder("category", {"type": "sparse"})
    out = encoder(torch.tensor([0, 3, 1]))
    assert torch.equal(out, torch.eye(4)[[0, 3, 1]])


@pytest.mark.parametrize("options,size", [
    ({"type": "rnn", "cell_type": "gru", "state_size": 8, "bidirectional": True}, 16),
    ({"type": "rnn", "cell_type": "lstm", "state_size": 8, "num_layers": 2, "dropout": 0.1}, 8),
    ({"type": "parallel_cnn", "num_filters": 4, "filter_sizes": [2, 3]}, 8),
    ({"type": "transformer", "embedding_size": 8, "num_heads": 2, "num_layers": 1}, 8),
])
def test_text_encoder_options_set_the_output_size(options, size, make_encoder, make_input_batch):
    encoder = make_encoder("text", options)
    assert encoder.output_size == size
    assert encoder(make_input_batch("text", ROWS)).shape == (ROWS, size)


def test_dense_encoder_with_layers_and_norm(make_encoder, make_input_batch):
    encoder = make_encoder("vector", {"type": "dense", "num_fc_layers": 2, "output_size": 6, "norm": "layer"})
    assert encoder(make_input_batch("vector", ROWS)).shape == (ROWS, 6)


def test_encoders_are_deterministic_in_eval_mode(make_encoder, make_input_batch):
    encoder = make_encoder("text", {"type": "transformer", "embedding_size": 8, "num_heads": 2, "dropout": 0.5}).eval()
    batch = make_input_batch("text", ROWS)
    assert torch.equal(encoder(batch), encoder(batch))


@pytest.mark.parametrize("encoder_type", ["ple", "bins"])
@pytest.mark.parametrize("normalization", ["zscore", "log1p", "quantile"])
def test_number_bins_cover_the_values_the_model_reads_under_every_normalization(
        encoder_type, normalization, make_processor, fit_transform, plait_config):
    """The bins split the training range in the model's units: under log1p or quantile
    normalization those are not the raw values' (a long-tailed column's values all fell in the
    first of 64 bins cut from its raw range)."""
    skewed = [float(v) for v in range(100)] + [100_000.0]
    processor = make_processor("number", {"normalization": normalization})
    metadata, normalized = fit_transform(processor, skewed)
    config = plait_config(inputs=[{"name": "f", "type": "number", "encoder": {"type": encoder_type, "num_bins": 8}}])
    state = build_encoder(config.input_features[0], metadata).state_dict()
    edges = state.get("edges", state.get("inner_edges"))  # ple keeps every edge, bins the inner ones
    assert min(normalized) == pytest.approx(metadata["model_range"][0], abs=1e-5)
    assert max(normalized) == pytest.approx(metadata["model_range"][1], abs=1e-5)
    bins = torch.bucketize(torch.tensor(normalized), edges[1:-1] if encoder_type == "ple" else edges)
    # zscore: the outlier alone in the last bin; log1p: 0-99 over the first half; quantile: all
    assert len(set(bins.tolist())) >= {"zscore": 2, "log1p": 4, "quantile": 8}[normalization], bins.tolist()
