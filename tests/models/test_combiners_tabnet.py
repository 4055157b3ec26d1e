"""TabNet checked against small cases computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from plait.models.combiners import build_combiner
from plait.models.combiners.sparse_attention import EntmaxBisect, Entmax15, Sparsemax
from plait.models.combiners.tabnet import ENTROPY_EPSILON


def test_sparsemax_of_a_known_vector():
    # tau = (1 + 0.5 - 1) / 2 = 0.25 over the support {1, 0.5}; -1 falls below it.
    p = Sparsemax.apply(torch.tensor([[1.0, 0.5, -1.0], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(p, torch.tensor([[0.75, 0.25, 0.0], [1 / 3, 1 / 3, 1 / 3]]))


def test_entmax15_of_a_known_vector():
    # z / 2 shifted to max 0: (0, -0.25, -1); on the support of two, (0 - tau)^2 + (-0.25 - tau)^2 = 1.
    tau = (-0.5 - math.sqrt(0.25 + 7.5)) / 4
    expected = torch.tensor([[tau**2, (-0.25 - tau) ** 2, 0.0]])
    torch.testing.assert_close(Entmax15.apply(torch.tensor([[1.0, 0.5, -1.0]])), expected)
    torch.testing.assert_close(EntmaxBisect.apply(torch.tensor([[1.0, 0.5, -1.0]]), 1.5), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("normalize", [Sparsemax.apply, Entmax15.apply, lambda z: EntmaxBisect.apply(z, 1.3)])
def test_sparse_maps_have_the_exact_gradient(normalize):
    z = torch.randn(4, 6, dtype=torch.double, generator=torch.Generator().manual_seed(0)).requires_grad_()
    assert torch.autograd.gradcheck(normalize, (z,), atol=1e-5)


def _tabnet(plait_config, **settings):
    config = plait_config(combiner={"type": "tabnet", **settings})
    return build_combiner(config.combiner, {"x": (2,)})


def test_one_decision_step_with_weights_set_by_hand(plait_config):
    combiner = _tabnet(plait_config, size=1, output_size=1, num_steps=1, num_total_blocks=1, num_shared_blocks=0,
                       bn_epsilon=1e-12, dropout=0.0).eval()  # eval: batch norms use running statistics 0 and 1
    tabnet = combiner.tabnet
    with torch.no_grad():
        tabnet.attentive_transformers[0].linear.weight.zero_()  # equal logits: the mask is (0.5, 0.5)
        # Block rows: two values (a1, a2), then two gates (b1, b2); the first unit is the decision.
        tabnet.feature_transformers[1].blocks[0].linear.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [0, 0], [0, 0]]))
        tabnet.final_projection.weight.fill_(2.0)
        tabnet.final_projection.bias.fill_(0.25)
    out, entropy, masks = tabnet(torch.tensor([[2.0, -4.0]]))
    # masked input (1, -2); decision relu(1 * sigmoid(0)) = 0.5; output 2 * 0.5 + 0.25.
    torch.testing.assert_close(masks, torch.tensor([[[0.5, 0.5]]]))
    torch.testing.assert_close(out, torch.tensor([[1.25]]))
    torch.testing.assert_close(entropy, torch.tensor(-math.log(0.5 + ENTROPY_EPSILON)))


def test_sparsity_loss_of_uniform_masks_is_sparsity_times_log_width(plait_config):
    combiner = _tabnet(plait_config, size=4, output_size=4, num_steps=3, sparsity=0.01)
    for attentive in combiner.tabnet.attentive_transformers:
        torch.nn.init.zeros_(attentive.linear.weight)  # every step's mask is uniform, 1/2 each
    out = combiner({"x": torch.randn(8, 2)})
    torch.testing.assert_close(out.auxiliary_loss, torch.tensor(0.01 * -math.log(0.5 + ENTROPY_EPSILON)))
    assert out.hidden.shape == (8, 4)


def test_sparsity_loss_reaches_the_attention_weights(plait_config):
    combiner = _tabnet(plait_config, size=4, output_size=4, num_steps=2, sparsity=1.0)
    combiner({"x": torch.randn(8, 2)}).auxiliary_loss.backward()
    assert combiner.tabnet.attentive_transformers[0].linear.weight.grad.abs().sum() > 0


def test_ghost_batch_norm_normalizes_each_virtual_batch(plait_config):
    combiner = _tabnet(plait_config, bn_virtual_bs=4)
    norm = combiner.tabnet.attentive_transformers[0].norm.train()
    x = torch.cat([torch.randn(4, 2) * 10 + 100, torch.randn(4, 2)]).repeat(1, norm.bn.num_features // 2)
    y = norm(x)
    torch.testing.assert_close(y[:4].mean(0), torch.zeros(y.shape[1]), atol=1e-4, rtol=0)
    torch.testing.assert_close(y[4:].mean(0), torch.zeros(y.shape[1]), atol=1e-4, rtol=0)
