"""model_type: llm through the command line: an experiment, predictions from the saved model, and
every bad input as one `plait: error:` line before training starts."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from hf_models import FRENCH, colour_rows, llm_config, preference_rows, write_colour_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def local(config: dict, cache_dir: str) -> dict:
    return {**config, "backend": {"type": "local", "cache_dir": cache_dir}}


QLORA = {"adapter": {"type": "lora", "target_modules": ["q_proj", "v_proj", "lm_head"]}, "quantization": {"bits": 4},
         "trainer": {"type": "finetune", "epochs": 3, "batch_size": 16, "learning_rate": 0.02}}
"""QLoRA: LoRA over the base's 4-bit weights (bitsandbytes, on the CPU here)."""
ORPO = {"trainer": {"type": "orpo", "epochs": 3, "batch_size": 16, "learning_rate": 0.003}}
"""ORPO: fine-tuning on the chosen texts with a preference for them over the rejected column's."""


CATEGORY = {"output_features": [{"name": "french", "type": "category", "decoder": {"constrain_to_vocabulary": True},
                                  "preprocessing": {"vocab": FRENCH, "fallback_label": "rouge"}}]}
"""The French names as an LLM's category output (Ludwig's category_extractor)."""


@pytest.mark.parametrize("sections", [{}, QLORA, ORPO, CATEGORY], ids=["full", "qlora", "orpo", "category"])
def test_an_experiment_then_predict_from_the_saved_model(sections, base, tmp_path, cache_dir, write_config,
                                                         make_dataset, cli):
    data = make_dataset(preference_rows(colour_rows()) if sections is ORPO else colour_rows())
    config = write_config(local(llm_config(base, **sections), cache_dir))
    code, out, err = cli("experiment", "--config", config, "--dataset", data, "--output-directory", tmp_path / "runs")
    assert code == 0, err
    assert "french: loss" in out and "sequence_accuracy 1.0000" in out
    model = tmp_path / "runs" / "experiment_run_0" / "model"
    code, out, err = cli("predict", "--model-path", model, "--dataset", make_dataset(colour_rows(1), "new.csv"),
                         "--output-directory", tmp_path / "predictions", "--output-format", "csv")
    assert code == 0, err
    predictions = pd.read_csv(tmp_path / "predictions" / "predictions.csv")
    assert predictions["french_predictions"].tolist() == FRENCH
    if sections is CATEGORY:  # scored as a category: its labels' metrics and probabilities
        statistics = json.loads((tmp_path / "runs" / "experiment_run_0" / "test_statistics.json").read_text())
        assert statistics["french"]["accuracy"] == 1.0 and len(statistics["french"]["confusion_matrix"]) == len(FRENCH)
        assert (predictions[[f"french_probabilities_{label}" for label in FRENCH]].idxmax(axis=1)
                == [f"french_probabilities_{label}" for label in FRENCH]).all()
    resolved = json.loads((model / "model_hyperparameters.json").read_text())
    assert resolved["model_type"] == "llm" and resolved["prompt"]["template"] == "translate : {colour}"


def test_a_grpo_experiment_reports_the_reward(base, tmp_path, cache_dir, write_config, make_dataset, cli):
    """GRPO through the command line (that it learns is tests/models/test_llm_grpo.py's)."""
    grpo = {"adapter": {"type": "lora", "target_modules": ["q_proj", "v_proj", "lm_head"]}, "generation": {"max_new_tokens": 2},
            "trainer": {"type": "grpo", "epochs": 1, "batch_size": 8, "grpo_num_generations": 2}}
    config = write_config(local(llm_config(base, **grpo), cache_dir))
    code, out, err = cli("experiment", "--config", config, "--dataset", make_dataset(colour_rows(2)),
                         "--output-directory", tmp_path / "runs")
    assert code == 0, err
    statistics = json.loads((tmp_path / "runs" / "experiment_run_0" / "test_statistics.json").read_text())
    assert 0 <= statistics["french"]["reward"] <= 1 and statistics["combined"]["loss"] == 1 - statistics["french"]["reward"]


def test_predict_takes_generation_settings_from_a_file_or_its_text(base, tmp_path, cache_dir, write_config,
                                                                    make_dataset, cli):
    config = write_config(local(llm_config(base, trainer={"type": "none"}), cache_dir))
    code, _, err = cli("train", "--config", config, "--dataset", make_dataset(colour_rows(2)), "--output-directory",
                       tmp_path / "runs")
    assert code == 0, err
    model, data = tmp_path / "runs" / "experiment_run_0" / "model", make_dataset(colour_rows(1), "new.csv")
    settings = tmp_path / "generation.yaml"
    settings.write_text("max_new_tokens: 3\nmin_new_tokens: 3\n")
    for given, words in ((settings, 3), ("{max_new_tokens: 2, min_new_tokens: 2}", 2)):
        code, _, err = cli("predict", "--model-path", model, "--dataset", data, "--generation_config", given,
                           "--output-directory", tmp_path / str(words))
        assert code == 0, err
        tokens = pd.read_parquet(tmp_path / str(words) / "predictions.parquet")["french_probabilities"]
        assert [len(probabilities) for probabilities in tokens] == [words] * len(FRENCH)
    code, _, err = cli("predict", "--model-path", model, "--dataset", data, "-gc", "{num_beams: 0}")
    assert code == 2 and "generation_config.num_beams: Input should be greater than 0" in err


def without_weights(folder):
    (folder / "model.safetensors").unlink()
    return folder


def without_tokenizer(folder):
    (folder / "tokenizer.json").unlink()
    return folder


def damaged_weights(folder):
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # a copy cut short
    return folder


def unknown_architecture(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama9000"}))
    return folder


BAD_FOLDERS = {
    "no weights": (without_weights, "base_model: {folder} has no model.safetensors; it has no weights"),
    "no tokenizer": (without_tokenizer, "base_model: {folder} has no tokenizer (tokenizer.json, or the vocabulary "
                                        "files of one"),
    "damaged weights": (damaged_weights, "base_model: {folder}/model.safetensors is damaged ("),
    "unknown architecture": (unknown_architecture, "base_model: its config.json names model_type 'llama9000', which "
                                                   "transformers"),
}


@pytest.mark.parametrize("case", BAD_FOLDERS)
def test_a_base_model_folder_that_lacks_a_part_is_named(case, base, tmp_path, cache_dir, write_config, make_dataset,
                                                         cli_error):
    make, message = BAD_FOLDERS[case]
    folder = make(shutil.copytree(base, tmp_path / "model"))
    error = cli_error("train", "--config", write_config(local(llm_config(folder), cache_dir)),
                      "--dataset", make_dataset(colour_rows(2)))
    assert message.format(folder=folder) in error


def test_a_hub_name_not_in_the_local_cache_says_how_to_get_it(tmp_path, monkeypatch, cache_dir, write_config,
                                                              make_dataset, cli_error):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    config = {**llm_config(tmp_path), "base_model": "meta-llama/Llama-3.2-1B"}
    error = cli_error("train", "--config", write_config(local(config, cache_dir)), "--dataset", make_dataset(colour_rows(2)))
    assert "'meta-llama/Llama-3.2-1B' is neither a folder nor in the local Hugging Face cache" in error
    assert "run `hf download meta-llama/Llama-3.2-1B`" in error


@pytest.mark.parametrize("sections, message", [
    ({"adapter": {"type": "lora", "target_modules": ["q_proj", "query"]}},
     "adapter.target_modules: 'query' matches no module of the base model; its linear layers are named: down_proj, "
     "gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj"),
    ({"prompt": {"template": "translate : {colour} to {language}"}},
     "has no column 'language' (for input feature 'colour')"),
    (ORPO, "has no column 'rejected' (for trainer.rejected_column (the rejected completions))"),
])
def test_a_bad_setting_is_refused_before_training(sections, message, base, cache_dir, write_config, make_dataset,
                                                  cli_error):
    error = cli_error("train", "--config", write_config(local(llm_config(base, **sections), cache_dir)),
                      "--dataset", make_dataset(colour_rows(2)))
    assert message in error


def test_a_config_mistake_is_named_by_its_path(base, write_config, cli):
    code, _, err = cli("validate", "--config", write_config({**llm_config(base), "generation": {"max_new_token": 8}}))
    assert code == 2 and "Traceback" not in err
    assert "generation.max_new_token: unknown field; did you mean max_new_tokens?" in err


@pytest.mark.parametrize("trainer, message", [
    ({"type": "grpo"}, "adapter: is null with trainer.type grpo and grpo_beta 0.04: the KL penalty compares"),
    ({"type": "dpo", "beta": 0.1}, "trainer.beta: is not a key of Ludwig's trainer schema"),
    ({"type": "finetune", "kto_beta": 0.1}, "trainer.kto_beta: a key of trainer.type kto"),
    ({"type": "dpo"}, "adapter: is null with trainer.type dpo, which compares the model with a frozen reference"),
    ({"type": "orpo", "rejected_column": "french"}, "trainer.rejected_column: is 'french', the output feature's"),
])
def test_a_preference_trainer_mistake_is_named_by_its_path(trainer, message, base, write_config, cli):
    code, _, err = cli("validate", "--config", write_config({**llm_config(base), "trainer": trainer}))
    assert code == 2 and "Traceback" not in err
    assert message in err
