"""GRPO (``trainer.type: grpo``) on the colour task: the model's own sampled completions, rewarded
by how close each is to the row's French name, raise the reward; the loss is the paper's clipped
policy gradient with the k3 KL penalty, computed by hand; the config is checked as Ludwig's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hf_models import FRENCH, LORA, colour_rows, local_llm_config, predicted_french, write_colour_llama
from plait.api import Model
from plait.config import load_config
from plait.errors import ConfigError
from plait.models.grpo import GRPOObjective, token_f1

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def objective(beta=0.1, epsilon=0.2, generations=2) -> GRPOObjective:
    return GRPOObjective(SimpleNamespace(grpo_beta=beta, grpo_epsilon=epsilon, grpo_num_generations=generations,
                                         compares_with_reference=beta > 0))


def test_the_reward_is_the_f1_of_the_tokens():
    rewards = token_f1([[5, 6], [5, 6], [7], [], [5, 9, 9, 6]], [[5, 6], [6, 8], [5], [], [5, 6]])
    assert rewards.tolist() == pytest.approx([1.0, 0.5, 0.0, 1.0, 2 * 0.5 * 1.0 / 1.5])


def test_the_loss_is_the_clipped_policy_gradient_with_the_k3_penalty_by_hand():
    grpo = objective(beta=0.1)
    log_probs = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-1.5, -1.0], [-3.0, 0.0]], requires_grad=True)
    reference = torch.tensor([[-1.2, -1.8], [-0.5, 0.0], [-1.0, -1.0], [-2.0, 0.0]])
    counted = torch.tensor([[True, True], [True, False], [True, True], [True, False]])
    rewards = torch.tensor([1.0, 0.0, 0.25, 0.25])  # two groups of two; the second all alike
    losses = grpo.losses(log_probs * counted, reference * counted, counted, rewards)
    advantage = 0.5 / (torch.tensor([1.0, 0.0]).std() + 1e-4)  # (reward - mean) / (std + 1e-4)
    advantages = [advantage, -advantage, 0.0, 0.0]
    expected = []
    for row in range(4):
        steps = [s for s in range(2) if counted[row, s]]
        drift = [float(reference[row, s] - log_probs[row, s]) for s in steps]
        kl = [torch.tensor(d).exp().item() - d - 1 for d in drift]
        expected.append(sum(-(float(advantages[row]) - 0.1 * k) for k in kl) / len(steps))
    assert losses.tolist() == pytest.approx(expected, rel=1e-5)
    losses.mean().backward()  # the batch's loss, as LLM.loss takes it
    # The ratio's gradient is the log-probability's: -advantage / tokens, and the penalty's.
    assert log_probs.grad[2, 0] == pytest.approx(0.1 * (1 - float(torch.tensor(0.5).exp())) / 2 / 4, rel=1e-4)
    assert log_probs.grad[0, 0] < 0 < log_probs.grad[1, 0], "the better completion is raised, the worse lowered"


def test_grpo_learns_from_its_own_rewarded_samples(tmp_path):
    """From a random base: completions of two tokens (a French name and the end), eight sampled
    per prompt; the reward of the model's greedy completions on the validation rows rises
    (validation reports it, and keeps the best epoch's weights by it)."""
    base = write_colour_llama(tmp_path / "llama")
    trainer = {"type": "grpo", "epochs": 8, "batch_size": 8, "learning_rate": 0.02, "grpo_num_generations": 8,
               "early_stop": -1}
    output = [{"name": "french", "type": "text", "preprocessing": {"max_sequence_length": 2}}]
    config = local_llm_config(base, str(tmp_path / "cache"), adapter=LORA, trainer=trainer, output_features=output,
                              generation={"max_new_tokens": 2}, preprocessing={"split": {"probabilities": [0.5, 0.5, 0]}})
    model = Model(config)
    history = model.train(colour_rows(4), progress_bar=False).training_statistics
    rewards = [record["validation"]["french"]["reward"] for record in history]
    assert max(rewards) >= rewards[0] + 0.15, rewards
    assert [record["validation"]["combined"]["loss"] for record in history] == pytest.approx([1 - r for r in rewards])
    model.save(tmp_path / "model")
    again = Model.load(tmp_path / "model")
    assert again.predict(colour_rows(1))["french_predictions"].tolist() == predicted_french(model)
    assert 0 <= again.evaluate(colour_rows(1))["french"]["reward"] <= 1


@pytest.mark.parametrize("change, message", [
    ({"output_features": [{"name": "french", "type": "category", "preprocessing": {"vocab": FRENCH,
                                                                                    "fallback_label": "rouge"}}]},
     "trainer.type: is grpo, which rewards generated texts, but the output feature is of type category"),
    ({"adapter": None}, "adapter: is null with trainer.type grpo and grpo_beta 0.04"),
    ({"trainer": {"type": "grpo", "grpo_num_generations": 1}}, "trainer.grpo_num_generations"),
    ({"trainer": {"type": "dpo", "grpo_beta": 0.1}}, "trainer.grpo_beta: a key of trainer.type grpo"),
    ({"backend": {"type": "ray", "trainer": {"strategy": "fsdp"}}}, "is grpo with the fsdp strategy"),
])
def test_a_grpo_config_mistake_is_named(tmp_path, change, message):
    config = local_llm_config(tmp_path, str(tmp_path), adapter=LORA, trainer={"type": "grpo"})
    config.update(change)
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert message in str(info.value)


def test_grpo_without_the_penalty_needs_no_adapter(tmp_path):
    config = local_llm_config(tmp_path, str(tmp_path), trainer={"type": "grpo", "grpo_beta": 0})
    assert load_config(config).trainer.compares_with_reference is False
