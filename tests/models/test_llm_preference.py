"""The preference trainers (``trainer.type`` dpo, kto, orpo) on the colour task: each learns to
prefer the chosen French name over the rejected one, the log-probabilities they compare are the
model's own (checked against transformers run by hand), and the losses are the papers'."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from hf_models import COLORS, FRENCH, LORA, colour_rows, local_llm_config, predicted_french, preference_rows, write_colour_llama
from plait.api import Model
from plait.config import load_config
from plait.models.hf_encoders import import_transformers
from plait.models.preference import PREFERENCE, PreferenceScores, preference_objective
from plait.utils.tokens import ID_OFFSET

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def ranked_rows(repeats: int = 3) -> pd.DataFrame:
    """Every colour with its French name chosen over each other French name."""
    return pd.DataFrame([(c, f, r) for _ in range(repeats) for c, f in zip(COLORS, FRENCH) for r in FRENCH if r != f],
                        columns=["colour", "french", "rejected"])


def first_words(model) -> list[str]:
    return [text.split(" ")[0] for text in predicted_french(model)]


@pytest.fixture(scope="module")
def dpo_model(base, tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache"))
    trainer = {"type": "dpo", "epochs": 4, "batch_size": 16, "learning_rate": 0.02}
    model = Model(local_llm_config(base, cache, adapter=LORA, trainer=trainer))
    result = model.train(ranked_rows(), progress_bar=False)
    return model, result.training_statistics


def test_dpo_learns_which_name_is_preferred_and_reports_its_loss_and_reward_accuracy(dpo_model, tmp_path):
    model, history = dpo_model
    # From a random base DPO cannot learn where a text ends (both completions end alike), but
    # it learns which word comes first.
    assert first_words(model) == FRENCH
    validation = [record["validation"] for record in history]
    assert validation[-1]["french"]["reward_accuracy"] > validation[0]["french"]["reward_accuracy"]
    assert validation[-1]["french"]["reward_accuracy"] >= 0.9
    # The combined loss is DPO's (log 2 when policy and reference agree), not the cross-entropy.
    assert validation[-1]["combined"]["loss"] < math.log(2) < validation[-1]["french"]["loss"]
    model.save(tmp_path / "model")
    again = Model.load(tmp_path / "model")
    assert first_words(again) == FRENCH
    # Predicting and evaluating read no rejected column.
    metrics = again.evaluate(colour_rows(1))
    assert "reward_accuracy" not in metrics["french"] and metrics["french"]["loss"] > 0


def stored_ids(tokenizer, text: str, special: bool, end: int | None = None) -> list[int]:
    ids = tokenizer(text, add_special_tokens=special)["input_ids"] + ([end] if end is not None else [])
    return [i + ID_OFFSET for i in ids]


def log_probability(causal_lm, prompt: list[int], completion: list[int]) -> float:
    """log p(completion | prompt) by transformers itself, on the unpadded sequence."""
    ids = torch.tensor([prompt + completion]) - ID_OFFSET
    with torch.no_grad():
        logits = causal_lm(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
    return float(torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt):, None]).sum())


def test_the_compared_log_probabilities_are_the_policys_and_the_base_models(dpo_model, base):
    model, _ = dpo_model
    transformers = import_transformers()
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(str(base))
    end = model.module.head("french").stop_id - ID_OFFSET
    prompts = [stored_ids(tokenizer, f"translate : {c}", True) for c in COLORS[:3]]
    chosen = [stored_ids(tokenizer, f, False, end) for f in FRENCH[:3]]
    rejected = [stored_ids(tokenizer, f"{f} {f}", False, end) for f in FRENCH[3:6]]  # longer than chosen

    def padded(rows):
        return torch.tensor([row + [0] * (max(map(len, rows)) - len(row)) for row in rows])

    module = model.module.eval()
    with torch.no_grad():
        outputs = module({"colour": padded(prompts), "french": padded(chosen), "rejected": padded(rejected)})
    scores = PreferenceScores.of(outputs[PREFERENCE])
    policy = module._causal_lm()  # the adapter on
    reference = transformers.AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    for row in range(3):
        assert float(scores.chosen[row]) == pytest.approx(log_probability(policy, prompts[row], chosen[row]), abs=1e-4)
        assert float(scores.rejected[row]) == pytest.approx(log_probability(policy, prompts[row], rejected[row]), abs=1e-4)
        assert float(scores.reference_chosen[row]) == pytest.approx(
            log_probability(reference, prompts[row], chosen[row]), abs=1e-4)
        assert float(scores.reference_rejected[row]) == pytest.approx(
            log_probability(reference, prompts[row], rejected[row]), abs=1e-4)
        assert float(scores.chosen_tokens[row]) == len(chosen[row])
        assert float(scores.rejected_tokens[row]) == len(rejected[row])


def objective(**trainer):
    config = load_config({"model_type": "llm", "base_model": "unused", "adapter": {"type": "lora"},
                          "input_features": [{"name": "p", "type": "text"}],
                          "output_features": [{"name": "c", "type": "text"}], "trainer": trainer})
    return preference_objective(config.trainer)


SCORES = PreferenceScores(*torch.tensor([
    # chosen, rejected, chosen tokens, rejected tokens, reference chosen, reference rejected, mismatched, ref. mismatched
    [-2.0, -3.0, 2.0, 3.0, -2.5, -2.8, -4.0, -4.5],
    [-1.0, -0.5, 1.0, 1.0, -1.2, -0.9, -3.0, -3.1],
]).unbind(1))


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_the_losses_are_the_papers():
    margins = [(-2.0 + 3.0) - (-2.5 + 2.8), (-1.0 + 0.5) - (-1.2 + 0.9)]
    dpo = sum(-math.log(sigmoid(0.5 * m)) * 0.9 - math.log(sigmoid(-0.5 * m)) * 0.1 for m in margins) / 2
    got = objective(type="dpo", dpo_beta=0.5, dpo_label_smoothing=0.1).loss(SCORES, torch.tensor(0.0))
    assert float(got) == pytest.approx(dpo, rel=1e-6)

    per_token = [(-2.0 / 2 + 3.0 / 3) - (-2.5 / 2 + 2.8 / 3), (-1.0 + 0.5) - (-1.2 + 0.9)]
    ipo = sum((m - 1 / (2 * 0.5)) ** 2 for m in per_token) / 2
    assert float(objective(type="dpo", dpo_beta=0.5, dpo_loss_type="ipo").loss(SCORES, torch.tensor(0.0))) == \
        pytest.approx(ipo, rel=1e-6)

    drift = max(0.0, ((-4.0 + 4.5) + (-3.0 + 3.1)) / 2)
    kto = [1 - sigmoid(0.1 * ((-2.0 + 2.5) - drift)), 1 - sigmoid(0.1 * ((-1.0 + 1.2) - drift)),
           1 - sigmoid(0.1 * (drift - (-3.0 + 2.8))), 1 - sigmoid(0.1 * (drift - (-0.5 + 0.9)))]
    assert float(objective(type="kto").loss(SCORES, torch.tensor(0.0))) == pytest.approx(sum(kto) / 4, rel=1e-6)

    def log_odds(log_p: float) -> float:
        return log_p - math.log(1 - math.exp(log_p))

    ratios = [log_odds(-2.0 / 2) - log_odds(-3.0 / 3), log_odds(-1.0) - log_odds(-0.5)]
    orpo = 1.5 - 0.2 * sum(math.log(sigmoid(r)) for r in ratios) / 2
    assert float(objective(type="orpo", orpo_beta=0.2).loss(SCORES, torch.tensor(1.5))) == pytest.approx(orpo, rel=1e-6)


def test_orpo_fine_tunes_every_weight_and_kto_an_adapter(base, cache_dir):
    # ORPO has no reference model, so it trains a model without an adapter too.
    orpo = Model(local_llm_config(base, cache_dir, trainer={"type": "orpo", "epochs": 3, "batch_size": 16,
                                                            "learning_rate": 0.003}))
    orpo.train(preference_rows(colour_rows()), progress_bar=False)
    assert predicted_french(orpo) == FRENCH
    kto = Model(local_llm_config(base, cache_dir, adapter=LORA, trainer={"type": "kto", "epochs": 3, "batch_size": 16,
                                                                         "learning_rate": 0.02}))
    kto.train(preference_rows(colour_rows()), progress_bar=False)
    assert first_words(kto) == FRENCH
