"""Input encoders: one module per (feature type, encoder type), registered in ``ENCODERS``.

Each takes the feature's batch tensor and returns [batch, output_size]. ``metadata`` is the
feature's preprocessing metadata (vocabulary, sequence length, vector size).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from plait.models.layers import FCStack, fc_stack, masked_mean


class Passthrough(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.output_size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1).float()


class Dense(nn.Module):
    def __init__(self, size: int, config):
        super().__init__()
        self.fc = fc_stack(size, config) if config.num_fc_layers else FCStack(size, 1, config.output_size)
        self.output_size = self.fc.output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.reshape(x.shape[0], -1).float())


class CategoryEmbed(nn.Module):
    def __init__(self, vocab_size: int, config):
        super().__init__()
        size = config.embedding_size or min(50, (vocab_size + 1) // 2 + 1)
        self.embedding = nn.Embedding(vocab_size, size)
        self.dropout = nn.Dropout(config.dropout)
        self.output_size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embedding(x.long()))


class OneHot(nn.Module):
    def __init__(self, vocab_size: int):
        super().__init__()
        self.output_size = vocab_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(x.long(), self.output_size).float()


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size: int, config):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=0)
        self.reduce = config.reduce_output
        self.dropout = nn.Dropout(config.dropout)
        self.output_size = config.embedding_size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, mask = self.embedding(tokens), tokens != 0
        if self.reduce == "sum":
            out = x.sum(1)
        elif self.reduce == "max":
            out = x.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1).nan_to_num(0.0, neginf=0.0)
        else:
            out = masked_mean(x, mask)
        return self.dropout(out)


class ParallelCNN(nn.Module):
    def __init__(self, vocab_size: int, config):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=0)
        self.convs = nn.ModuleList(
            nn.Conv1d(config.embedding_size, config.num_filters, k, padding=k // 2) for k in config.filter_sizes
        )
        self.dropout = nn.Dropout(config.dropout)
        self.output_size = config.num_filters * len(config.filter_sizes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens).transpose(1, 2)  # [N, D, L] for Conv1d
        pooled = [torch.relu(conv(x)).amax(-1) for conv in self.convs]
        return self.dropout(torch.cat(pooled, dim=-1))


class RNN(nn.Module):
    def __init__(self, vocab_size: int, config):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=0)
        cell = nn.LSTM if config.cell_type == "lstm" else nn.GRU
        self.rnn = cell(config.embedding_size, config.state_size, num_layers=config.num_layers, batch_first=True,
                        bidirectional=config.bidirectional, dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.output_size = config.state_size * (2 if config.bidirectional else 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens != 0
        out, _ = self.rnn(self.embedding(tokens))
        return masked_mean(out, mask)


class TextTransformer(nn.Module):
    def __init__(self, vocab_size: int, sequence_length: int, config):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=0)
        self.position = nn.Parameter(torch.randn(sequence_length, config.embedding_size) / math.sqrt(config.embedding_size))
        layer = nn.TransformerEncoderLayer(config.embedding_size, config.num_heads, config.hidden_size,
                                           config.dropout, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.output_size = config.embedding_size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens != 0
        x = self.embedding(tokens) + self.position[: tokens.shape[1]]
        # A row of only padding would attend to nothing; let it attend to position 0.
        padding = ~mask.clone()
        padding[:, 0] = False
        return masked_mean(self.encoder(x, src_key_padding_mask=padding), mask)


class SetEmbed(nn.Module):
    def __init__(self, vocab_size: int, config):
        super().__init__()
        self.embedding = nn.Linear(vocab_size, config.embedding_size, bias=False)  # multi-hot @ E = sum of embeddings
        self.fc = FCStack(config.embedding_size, config.num_fc_layers, config.output_size, dropout=config.dropout)
        self.output_size = self.fc.output_size

    def forward(self, multi_hot: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embedding(multi_hot.float()))


def _vocab(meta: dict) -> int:
    return len(meta["vocabulary"])


# (feature type, encoder type) -> builder(encoder config, feature metadata)
ENCODERS: dict[tuple[str, str], Callable[..., nn.Module]] = {
    ("number", "passthrough"): lambda c, m: Passthrough(1),
    ("number", "dense"): lambda c, m: Dense(1, c),
    ("binary", "passthrough"): lambda c, m: Passthrough(1),
    ("binary", "dense"): lambda c, m: Dense(1, c),
    ("category", "dense"): lambda c, m: CategoryEmbed(_vocab(m), c),
    ("category", "sparse"): lambda c, m: OneHot(_vocab(m)),
    ("category", "onehot"): lambda c, m: OneHot(_vocab(m)),
    ("text", "embed"): lambda c, m: BagOfEmbeddings(_vocab(m), c),
    ("text", "parallel_cnn"): lambda c, m: ParallelCNN(_vocab(m), c),
    ("text", "rnn"): lambda c, m: RNN(_vocab(m), c),
    ("text", "transformer"): lambda c, m: TextTransformer(_vocab(m), m["sequence_length"], c),
    ("set", "embed"): lambda c, m: SetEmbed(_vocab(m), c),
    ("vector", "dense"): lambda c, m: Dense(m["vector_size"], c),
    ("vector", "passthrough"): lambda c, m: Passthrough(m["vector_size"]),
}


def build_encoder(feature, metadata: dict) -> nn.Module:
    return ENCODERS[(feature.type, feature.encoder.type)](feature.encoder, metadata)
