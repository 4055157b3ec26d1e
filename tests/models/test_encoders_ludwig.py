"""Ludwig's encoder settings build what they say: shapes, reductions, layers, initializers,
pretrained embeddings, tied encoders, and a short training run with text encoders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from plait.config import load_config
from plait.models.encoders import build_encoder, build_encoders

ROWS = 5

SETTINGS = [
    ("number", {"type": "dense", "num_layers": 2, "output_size": 6, "activation": "tanh", "norm": "batch",
                "norm_params": {"momentum": 0.2}, "use_bias": False, "weights_initializer": "kaiming_normal"}),
    ("number", {"type": "dense", "fc_layers": [{"output_size": 5}, {"output_size": 3, "activation": "elu"}]}),
    ("number", {"type": "periodic", "num_frequencies": 4, "output_size": 7, "sigma": 0.5}),
    ("number", {"type": "ple", "num_bins": 5, "output_size": 7}),
    ("number", {"type": "bins", "num_bins": 5, "output_size": 7}),
    ("binary", {"type": "dense", "output_size": 4, "bias_initializer": {"type": "constant", "val": 0.1}}),
    ("category", {"type": "dense", "embedding_size": 6, "embedding_initializer": "xavier_uniform",
                  "embeddings_trainable": True, "dropout": 0.2}),
    ("category", {"type": "sparse", "embeddings_trainable": True}),
    ("category", {"type": "hash", "num_hash_buckets": 3, "embedding_size": 5}),
    ("category", {"type": "passthrough"}),
    ("set", {"type": "embed", "representation": "sparse", "num_fc_layers": 2, "output_size": 6, "norm": "layer"}),
    ("set", {"type": "embed", "embedding_size": 8, "fc_layers": [{"output_size": 4, "dropout": 0.1}]}),
    ("vector", {"type": "dense", "output_size": 3, "weights_initializer": "orthogonal"}),
    ("text", {"type": "embed", "embedding_size": 6, "reduce_output": "last", "representation": "sparse"}),
    ("text", {"type": "parallel_cnn", "embedding_size": 8, "num_filters": 3, "conv_layers": [
        {"filter_size": 2}, {"filter_size": 3, "num_filters": 5}], "reduce_output": "sum", "num_fc_layers": 1,
        "output_size": 7, "norm": "batch"}),
    ("text", {"type": "parallel_cnn", "embedding_size": 8, "num_filters": 2, "num_fc_layers": None}),
    ("text", {"type": "stacked_cnn", "embedding_size": 8, "num_filters": 4, "conv_layers": [
        {"filter_size": 3, "pool_size": 2}, {"filter_size": 2, "strides": 2, "padding": "valid"}],
        "num_fc_layers": 1, "output_size": 5, "reduce_output": "max", "pool_function": "average"}),
    ("text", {"type": "stacked_parallel_cnn", "embedding_size": 8, "num_filters": 2, "num_stacked_layers": 2,
              "num_fc_layers": 0, "reduce_output": "mean", "norm": "layer"}),
    ("text", {"type": "rnn", "cell_type": "rnn", "activation": "relu", "state_size": 4, "num_layers": 2,
              "recurrent_dropout": 0.1, "bidirectional": True, "reduce_output": "attention",
              "num_fc_layers": 1, "output_size": 3, "fc_activation": "selu", "fc_dropout": 0.1}),
    ("text", {"type": "rnn", "cell_type": "gru", "state_size": 4, "reduce_output": "concat"}),
    ("text", {"type": "cnnrnn", "embedding_size": 8, "num_filters": 4, "filter_size": 3, "state_size": 5,
              "num_rec_layers": 2, "cell_type": "lstm", "conv_activation": "gelu", "conv_dropout": 0.1}),
    ("text", {"type": "transformer", "embedding_size": 6, "hidden_size": 8, "num_heads": 2,
              "transformer_output_size": 16, "num_layers": 1, "num_fc_layers": 1, "output_size": 4}),
]


# The metadata and batches of tests/models/conftest.py, repeated here: a test module cannot
# import a conftest by name when pytest also collects tests/config (which has its own).
TEXT_VOCAB = ["<PAD>", "<UNK>", "the", "cat", "sat", "on", "a", "mat"]
SEQUENCE_LENGTH = 6
INPUT_METADATA = {
    "number": {"min": -2.0, "max": 2.0, "shift": 0.0, "scale": 1.0},
    "binary": {},
    "category": {"vocabulary": ["<UNK>", "a", "b", "c"]},
    "text": {"vocabulary": TEXT_VOCAB, "sequence_length": SEQUENCE_LENGTH},
    "set": {"vocabulary": ["<UNK>", "red", "green", "blue"]},
    "vector": {"vector_size": 5},
}


def input_batch(ftype: str, rows: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if ftype in ("number", "binary"):
        return torch.randn(rows, generator=g) if ftype == "number" else torch.randint(0, 2, (rows,), generator=g).float()
    if ftype == "category":
        return torch.randint(0, 4, (rows,), generator=g)
    if ftype == "text":
        tokens = torch.randint(1, len(TEXT_VOCAB), (rows, SEQUENCE_LENGTH), generator=g)
        tokens[:, 4:] = 0
        tokens[0] = 0  # an empty text
        return tokens
    if ftype == "set":
        return torch.randint(0, 2, (rows, 4), generator=g).float()
    return torch.randn(rows, 5, generator=g)


def make_plait_config(inputs: list[dict]):
    return load_config({"input_features": inputs, "output_features": [{"name": "y", "type": "binary"}]})


def encoder_for(ftype: str, encoder: dict):
    config = make_plait_config([{"name": "f", "type": ftype, "encoder": encoder}])
    return build_encoder(config.input_features[0], INPUT_METADATA[ftype])


@pytest.mark.parametrize("ftype,encoder", SETTINGS, ids=[f"{f}-{e['type']}-{i}" for i, (f, e) in enumerate(SETTINGS)])
def test_encoder_settings_build_and_train(ftype, encoder):
    torch.manual_seed(0)
    module = encoder_for(ftype, encoder)
    out = module(input_batch(ftype, ROWS))
    assert out.shape == (ROWS, *module.output_shape) and module.output_shape == (module.output_size,)
    assert torch.isfinite(out).all()
    trainable = [p for p in module.parameters() if p.requires_grad]
    if trainable:
        out.pow(2).sum().backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainable)


@pytest.mark.parametrize("name,options", [("embed", {}), ("parallel_cnn", {"num_filters": 3}),
                                          ("stacked_cnn", {"conv_layers": [{"pool_size": 2}], "num_filters": 3}),
                                          ("rnn", {"state_size": 3, "bidirectional": True}),
                                          ("cnnrnn", {"num_filters": 3, "state_size": 4}),
                                          ("transformer", {"embedding_size": 8, "num_heads": 2})])
def test_no_reduction_hands_the_sequence_on(name, options):
    module = encoder_for("text", {"type": name, "embedding_size": 8, "reduce_output": None, **options})
    length, width = module.output_shape
    out = module(input_batch("text", ROWS))
    assert out.shape == (ROWS, length, width) and width == module.output_size
    pooled = name in ("stacked_cnn", "cnnrnn")  # their first convolution pools by 2 (3 for cnnrnn)
    assert length == (SEQUENCE_LENGTH if not pooled else (SEQUENCE_LENGTH + 1) // 2 if name == "stacked_cnn" else 2)
    assert torch.equal(out[0], torch.zeros(length, width))  # the empty text: all padding, zeroed


def test_reduce_output_last_takes_the_last_real_token_wherever_padding_sits():
    torch.manual_seed(0)
    module = encoder_for("text", {"type": "embed", "embedding_size": 4, "reduce_output": "last"})
    right = torch.tensor([[2, 3, 4, 0, 0, 0]])
    left = torch.tensor([[0, 0, 0, 2, 3, 4]])
    torch.testing.assert_close(module(right), module.embedding(torch.tensor([4])))
    torch.testing.assert_close(module(left), module(right))
    assert encoder_for("text", {"type": "embed", "embedding_size": 4, "reduce_output": "concat"}).output_size == 24


def test_ludwig_default_layers_of_sequence_encoders():
    stacked = encoder_for("text", {"type": "stacked_cnn", "embedding_size": 4, "num_filters": 2})
    assert [layer.conv.kernel_size[0] for layer in stacked.body.layers] == [7, 7, 3, 3, 3, 3]
    assert [layer.output_size for layer in stacked.fc.stack] == [512, 256]
    parallel = encoder_for("text", {"type": "parallel_cnn", "num_filters": 2})
    assert [layer.conv.kernel_size[0] for layer in parallel.body.layers] == [2, 3, 4, 5]
    assert parallel.output_size == 8  # plait: no fully connected layers unless asked
    assert encoder_for("text", {"type": "parallel_cnn", "num_filters": 2, "num_fc_layers": None}).output_size == 256


def test_recurrent_initializers_and_forget_bias():
    module = encoder_for("text", {"type": "rnn", "cell_type": "lstm", "state_size": 4, "embedding_size": 4,
                                  "bias_initializer": "zeros", "recurrent_initializer": "orthogonal"})
    rnn = module.body.rnn
    assert torch.equal(rnn.bias_ih_l0, torch.tensor([0.0] * 4 + [1.0] * 4 + [0.0] * 8))
    torch.testing.assert_close(rnn.weight_hh_l0.T @ rnn.weight_hh_l0, torch.eye(4), atol=1e-5, rtol=0)


def test_sparse_representation_is_a_fixed_one_hot():
    module = encoder_for("text", {"type": "embed", "representation": "sparse", "reduce_output": "sum"})
    assert module.output_size == len(TEXT_VOCAB) and not module.embedding.weight.requires_grad
    assert torch.equal(module(torch.tensor([[2, 2, 3, 0, 0, 0]]))[0, 2:4], torch.tensor([2.0, 1.0]))


def test_pretrained_embeddings_are_read_from_a_glove_file(tmp_path):
    glove = tmp_path / "vectors.txt"
    glove.write_text("cat 1 2 3\nmat 4 5 6\nunrelated 7 8 9\nb 0 1 0\n")
    module = encoder_for("text", {"type": "embed", "pretrained_embeddings": str(glove), "embeddings_trainable": False})
    assert module.output_size == 3 and not module.embedding.weight.requires_grad
    assert module.embedding.weight[TEXT_VOCAB.index("mat")].tolist() == [4.0, 5.0, 6.0]
    category = encoder_for("category", {"type": "dense", "pretrained_embeddings": str(glove)})
    assert category.output_size == 3 and category(torch.tensor([2])).tolist() == [[0.0, 1.0, 0.0]]


def test_tied_features_share_one_encoder_through_their_own_vocabulary():
    config = make_plait_config([{"name": "a", "type": "text", "encoder": {"type": "rnn", "state_size": 4}},
                                       {"name": "b", "type": "text", "tied": "a"}])
    own_vocab = ["<PAD>", "<UNK>", "mat", "cat", "dog"]  # b's vocabulary: other words, other order
    metadata = {"a": INPUT_METADATA["text"], "b": {"vocabulary": own_vocab, "sequence_length": 4}}
    encoders = build_encoders(config.input_features, metadata)
    assert encoders["b"].shared is encoders["a"]
    b_tokens = torch.tensor([[3, 2, 4, 0]])  # cat mat dog, 4 tokens long
    a_tokens = torch.tensor([[3, 7, 1, 0, 0, 0]])  # the same words in a's vocabulary (dog unknown), 6 long
    torch.testing.assert_close(encoders["b"](b_tokens), encoders["a"](a_tokens))
    assert list(encoders["b"].parameters()) == []  # the weights are a's, held once


def test_tied_set_features_map_their_multi_hot_columns():
    config = make_plait_config([{"name": "a", "type": "set"}, {"name": "b", "type": "set", "tied": "a"}])
    metadata = {"a": INPUT_METADATA["set"], "b": {"vocabulary": ["<UNK>", "blue", "pink"]}}
    encoders = build_encoders(config.input_features, metadata)
    torch.testing.assert_close(encoders["b"](torch.tensor([[0.0, 1.0, 1.0]])),
                               encoders["a"](torch.tensor([[1.0, 0.0, 0.0, 1.0]])))  # pink is unknown


def _text_frame(rows: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = np.array(["good", "bad", "fine", "awful", "the", "a", "movie", "plot"])
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) for _ in range(rows)]
    label = ["good" in t or "fine" in t for t in texts]
    return pd.DataFrame({"review": texts, "title": texts[::-1], "summary": [t.split()[0] for t in texts],
                         "liked": label})


def test_text_encoders_and_a_tied_one_train_and_predict_through_the_api(tmp_path):
    from plait.api import Model

    config = {
        "input_features": [
            {"name": "review", "type": "text", "encoder": {
                "type": "stacked_cnn", "embedding_size": 8, "num_filters": 4, "output_size": 8,
                "conv_layers": [{"filter_size": 3, "pool_size": 2}, {"filter_size": 2}], "num_fc_layers": 1}},
            {"name": "title", "type": "text", "encoder": {
                "type": "cnnrnn", "embedding_size": 8, "num_filters": 4, "state_size": 6, "num_fc_layers": 0}},
            {"name": "summary", "type": "text", "tied": "review"},  # review's encoder and weights
        ],
        "output_features": [{"name": "liked", "type": "binary"}],
        "trainer": {"epochs": 2, "batch_size": 16},
        "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
    }
    frame = _text_frame()
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    predictions = model.predict(frame.drop(columns=["liked"]))
    assert len(predictions) == len(frame) and predictions.liked_probability.between(0, 1).all()
    assert model.module.encoder("summary").shared is model.module.encoder("review")
    reloaded = Model.load(model.save(tmp_path / "model"))  # the resolved config validates again
    pd.testing.assert_frame_equal(reloaded.predict(frame), predictions)
