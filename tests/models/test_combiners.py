"""Combiners merge the encoder outputs into one hidden vector per row."""

from __future__ import annotations

import pytest
import torch

from plait.models.combiners import COMBINERS, build_combiner

SIZES = [1, 4, 7]
ROWS = 5
# Combiners are built from each input's output shape by feature name (comparator and the sequence
# combiners name features) and return a Combined(hidden, auxiliary_loss).
SHAPES = {f"in_{i}": (size,) for i, size in enumerate(SIZES)}


def _encoded(rows: int = ROWS):
    g = torch.Generator().manual_seed(0)
    return {f"in_{i}": torch.randn(rows, size, generator=g) for i, size in enumerate(SIZES)}


@pytest.mark.parametrize("norm", ["batch", "layer", None])
def test_concat_combiner_gives_output_size_with_each_norm(plait_config, norm):
    config = plait_config(combiner={"type": "concat", "num_fc_layers": 2, "output_size": 12, "norm": norm})
    combiner = build_combiner(config.combiner, SHAPES)
    out = combiner(_encoded()).hidden
    assert out.shape == (ROWS, 12) and combiner.output_size == 12
    assert torch.isfinite(out).all()
    layers = [type(m).__name__ for m in combiner.modules()]
    assert ("BatchNorm1d" in layers) == (norm == "batch")
    assert ("LayerNorm" in layers) == (norm == "layer")


def test_concat_combiner_without_layers_is_the_concatenation(plait_config):
    config = plait_config(combiner={"type": "concat", "num_fc_layers": 0})
    combiner = build_combiner(config.combiner, SHAPES)
    encoded = _encoded()
    assert combiner.output_size == sum(SIZES)
    assert torch.equal(combiner(encoded).hidden, torch.cat(list(encoded.values()), dim=-1))


def test_batch_norm_combiner_evaluates_a_single_row(plait_config):
    config = plait_config(combiner={"type": "concat", "norm": "batch"})
    combiner = build_combiner(config.combiner, SHAPES).eval()
    assert combiner(_encoded(rows=1)).hidden.shape == (1, combiner.output_size)


@pytest.mark.parametrize("reduce_output", ["mean", "sum", "concat"])
def test_transformer_combiner_reduces_feature_tokens(plait_config, reduce_output):
    torch.manual_seed(0)
    config = plait_config(combiner={"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1,
                                    "transformer_output_size": 16, "reduce_output": reduce_output,
                                    "num_fc_layers": 1, "output_size": 10})
    combiner = build_combiner(config.combiner, SHAPES)
    out = combiner(_encoded()).hidden
    assert out.shape == (ROWS, 10) and combiner.output_size == 10
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(p.grad is not None for p in combiner.projections.parameters())


@pytest.mark.parametrize("reduce_output,pooled", [("mean", 8), ("sum", 8), ("concat", 8 * len(SIZES))])
def test_transformer_combiner_without_fc_layers_returns_the_pooled_tokens(plait_config, reduce_output, pooled):
    config = plait_config(combiner={"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1,
                                    "reduce_output": reduce_output, "num_fc_layers": 0})
    combiner = build_combiner(config.combiner, SHAPES).eval()
    assert combiner.output_size == pooled
    assert combiner(_encoded()).hidden.shape == (ROWS, pooled)


def test_transformer_combiner_sum_is_the_mean_times_the_feature_count(plait_config):
    def build(reduce_output):
        torch.manual_seed(0)
        config = plait_config(combiner={"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1,
                                        "reduce_output": reduce_output, "num_fc_layers": 0})
        return build_combiner(config.combiner, SHAPES).eval()

    encoded = _encoded()
    torch.testing.assert_close(build("sum")(encoded).hidden, build("mean")(encoded).hidden * len(SIZES))


def test_every_config_combiner_type_is_built():
    from typing import get_args

    from plait.config.combiners import CombinerConfig

    union = get_args(CombinerConfig)[0]
    types = {member.model_fields["type"].default for member in get_args(union)}
    assert types == set(COMBINERS)
