"""model_type: llm over a tiny random-weight Llama written at test time: full fine-tuning and LoRA
learn a trivial mapping, the saved model holds what it should (the whole model, the adapter
alone, or the adapter merged), and prediction generates the learned text."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file

from hf_models import COLORS, FRENCH, LORA, LORA_TRAINER, colour_rows, local_llm_config, predicted_french, write_colour_llama
from plait.api import Model
from plait.models.llm import _left_aligned
from plait.models.saved import WEIGHTS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def test_left_alignment_moves_each_rows_tokens_to_the_end():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0], [0, 0, 0, 0]])
    assert _left_aligned(tokens).tolist() == [[0, 0, 5, 6], [0, 7, 8, 9], [0, 0, 0, 0]]


def test_full_fine_tuning_learns_the_mapping_and_saves_the_whole_model(base, cache_dir, tmp_path):
    model = Model(local_llm_config(base, cache_dir))
    history = model.train(colour_rows(), progress_bar=False).training_statistics
    assert history[-1]["validation"]["french"]["sequence_accuracy"] == 1.0
    assert history[-1]["validation"]["french"]["loss"] < history[0]["validation"]["french"]["loss"]
    assert predicted_french(model) == FRENCH
    model.save(tmp_path / "model")
    weights = load_file(str(tmp_path / "model" / WEIGHTS))
    assert sum(w.numel() for w in weights.values()) == sum(p.numel() for p in model.module.parameters())
    shutil.rmtree(base.parent / "moved", ignore_errors=True)
    loaded = Model.load(tmp_path / "model")
    assert predicted_french(loaded) == FRENCH, "a fully fine-tuned model predicts without the base model's folder"


def test_lora_trains_the_adapter_alone_and_saves_only_it(base, cache_dir, tmp_path):
    model = Model(local_llm_config(base, cache_dir, adapter=LORA, trainer=LORA_TRAINER))
    before = {n: p.clone() for n, p in model_parameters(base).items()}
    model.train(colour_rows(), progress_bar=False)
    assert predicted_french(model) == FRENCH
    base_weights = {n.split("base_model.model.", 1)[-1].replace(".base_layer", ""): p
                    for n, p in model.module.named_parameters() if "lora_" not in n}
    assert all(torch.equal(base_weights[n], w) for n, w in before.items()), "the base model stays frozen"
    model.save(tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / WEIGHTS))
    assert saved and all("lora_" in key for key in saved), "the saved model is the adapter alone"
    assert predicted_french(Model.load(tmp_path / "model")) == FRENCH, "the adapter on the base model's weights"


def model_parameters(base) -> dict[str, torch.Tensor]:
    return {f"{n}": w for n, w in load_file(str(base / "model.safetensors")).items()}


def test_a_merged_adapter_saves_a_plain_model_that_predicts_the_same(base, cache_dir, tmp_path):
    lora = {**LORA, "postprocessor": {"merge_adapter_into_base_model": True}}
    model = Model(local_llm_config(base, cache_dir, adapter=lora, trainer=LORA_TRAINER))
    model.train(colour_rows(), progress_bar=False)
    model.save(tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / WEIGHTS))
    assert not any("lora_" in key for key in saved) and len(saved) == len(load_file(str(base / "model.safetensors")))
    assert predicted_french(Model.load(tmp_path / "model")) == FRENCH


def test_without_training_the_base_model_answers_as_it_is(base, cache_dir):
    model = Model(local_llm_config(base, cache_dir, trainer={"type": "none"}, generation={"max_new_tokens": 3}))
    result = model.train(colour_rows(2), progress_bar=False)
    assert result.training_statistics == []
    predictions = model.predict(colour_rows(1))
    assert len(predictions) == len(COLORS) and predictions["french_probabilities"].map(len).max() <= 3


def test_generation_settings_reach_the_model(base, cache_dir):
    model = Model(local_llm_config(base, cache_dir, generation={"num_beams": 3, "max_new_tokens": 4}))
    model.train(colour_rows(), progress_bar=False)
    assert predicted_french(model) == FRENCH


def test_evaluation_scores_the_targets_as_validation_does(base, cache_dir):
    model = Model(local_llm_config(base, cache_dir))
    data = model.preprocess(colour_rows())
    history = model.train(colour_rows(), progress_bar=False).training_statistics
    assert model.evaluate_preprocessed(data, "validation")["french"]["loss"] == pytest.approx(
        history[-1]["validation"]["french"]["loss"], rel=1e-5)


@pytest.mark.parametrize("adapter", [
    {"type": "ia3", "target_modules": ["k_proj", "v_proj", "down_proj"], "feedforward_modules": ["down_proj"]},
    {"type": "loha", "r": 4, "target_modules": ["q_proj", "v_proj"]},
    {"type": "lokr", "r": 4, "target_modules": ["q_proj", "v_proj"]},
    {"type": "vera", "r": 16, "target_modules": ["q_proj", "v_proj"]},
    {"type": "tinylora", "u": 8, "target_modules": ["q_proj", "v_proj"]},
])
def test_other_peft_adapters_train_alone_and_reload_from_their_own_weights(base, cache_dir, tmp_path, adapter):
    model = Model(local_llm_config(base, cache_dir, adapter=adapter, trainer={**LORA_TRAINER, "epochs": 1}))
    model.train(colour_rows(), progress_bar=False)
    trained = [n for n, p in model.module.named_parameters() if p.requires_grad]
    frozen = sum(p.numel() for p in model.module.parameters() if not p.requires_grad)
    assert trained and frozen == sum(w.numel() for w in model_parameters(base).values()), "the base model is frozen"
    model.save(tmp_path / "model")
    assert len(load_file(str(tmp_path / "model" / WEIGHTS))) == len(trained), "the saved model is the adapter alone"
    assert predicted_french(Model.load(tmp_path / "model")) == predicted_french(model), "the adapter reloads on the base weights"


def test_a_lora_started_from_the_bases_principal_components_saves_the_changed_base(base, cache_dir, tmp_path):
    lora = {**LORA, "init_lora_weights": "pissa", "alpha": 8}
    model = Model(local_llm_config(base, cache_dir, adapter=lora, trainer={**LORA_TRAINER, "epochs": 1}))
    model.train(colour_rows(), progress_bar=False)
    model.save(tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / WEIGHTS))
    assert any("base_layer" in key for key in saved), "pissa took the principal components out of the base"
    assert predicted_french(Model.load(tmp_path / "model")) == predicted_french(model)
