"""Configs written for older Ludwig versions: old names upgraded (one warning line), fields Ludwig
computes dropped silently, JSON configs, and Ludwig's other top-level keys."""

from __future__ import annotations

import copy
import json
import logging

import pytest
import yaml

from plait.cli import main
from plait.config import load_config
from plait.config.upgrade import upgrade
from plait.errors import ConfigError
from small_config import FEATURES  # a module beside this file


def with_(**sections) -> dict:
    return {**copy.deepcopy(FEATURES), **sections}


def upgraded(config: dict) -> dict:
    return upgrade(config)[0]


def renames_of(config: dict) -> list[str]:
    return upgrade(config)[1]


def problems_of(config) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    return info.value.problems


# ---- the warning -------------------------------------------------------------------------------

def test_one_warning_line_says_what_was_renamed(caplog):
    config = with_(training={"epochs": 3}, combiner={"type": "concat", "fc_size": 64})
    with caplog.at_level(logging.WARNING, logger="plait"):
        loaded = load_config(config)
    assert [r.getMessage() for r in caplog.records] == [
        "upgraded Ludwig names: training -> trainer, combiner.fc_size -> combiner.output_size"]
    assert (loaded.trainer.epochs, loaded.combiner.output_size) == (3, 64)


def test_a_current_config_gets_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="plait"):
        load_config(with_(trainer={"epochs": 3}))
    assert caplog.records == []


def test_the_callers_config_is_left_as_it_was():
    config = with_(training={"epochs": 3, "decay": True}, preprocessing={"force_split": True, "stratify": "city"})
    before = copy.deepcopy(config)
    load_config(config)
    upgrade(config)
    assert config == before


def test_upgrading_twice_changes_nothing_more():
    once, _ = upgrade(with_(training={"decay_steps": 5}, hyperopt={"parameters": {}}))
    twice, renames = upgrade(once)
    assert (twice, renames) == (once, [])


# ---- one test per rule -------------------------------------------------------------------------

def test_training_is_trainer():
    assert load_config(with_(training={"epochs": 3, "batch_size": 16})).trainer.batch_size == 16


def test_training_and_trainer_both_given_the_trainer_wins():
    config = load_config(with_(training={"epochs": 3, "batch_size": 16}, trainer={"epochs": 5}))
    assert (config.trainer.epochs, config.trainer.batch_size) == (5, 16)


def test_fc_size_is_output_size_in_the_combiner_and_its_layer_list():
    out = upgraded(with_(combiner={"type": "concat", "fc_size": 64, "fc_layers": [{"fc_size": 32}]}))
    assert out["combiner"] == {"type": "concat", "output_size": 64, "fc_layers": [{"output_size": 32}]}


def test_transformer_fc_size_is_transformer_output_size():
    config = load_config(with_(combiner={"type": "transformer", "transformer_fc_size": 96}))
    assert config.combiner.transformer_output_size == 96


def test_encoder_settings_at_the_feature_level_move_into_the_encoder():
    config = with_(input_features=[{"name": "review", "type": "text", "encoder": "parallel_cnn", "num_filters": 8,
                                    "fc_size": 16}])
    out = upgraded(config)
    assert out["input_features"][0]["encoder"] == {"type": "parallel_cnn", "num_filters": 8, "output_size": 16}
    encoder = load_config(config).input_features[0].encoder
    assert (encoder.num_filters, encoder.output_size) == (8, 16)


def test_decoder_settings_at_the_feature_level_move_into_the_decoder():
    """The kfold regression example of Ludwig: ``{"name": "MPG", "type": "number", "num_fc_layers": 2, "fc_size": 64}``."""
    config = with_(output_features=[{"name": "bought", "type": "number", "num_fc_layers": 2, "fc_size": 64}])
    decoder = upgraded(config)["output_features"][0]["decoder"]
    assert decoder["num_fc_layers"] == 2
    assert decoder.get("fc_output_size", decoder.get("output_size")) == 64  # Ludwig's name where plait takes it
    assert load_config(config).output_features[0].decoder.num_fc_layers == 2


def test_a_misspelt_feature_key_stays_where_the_user_wrote_it():
    assert problems_of(with_(input_features=[{"name": "age", "type": "number", "colum": "x"}])) == [
        "input_features[0].colum: unknown field; did you mean column?"]


def test_bias_is_use_bias_anywhere_in_a_feature():
    out = upgraded(with_(input_features=[{"name": "age", "type": "number", "encoder": {"type": "dense", "bias": False,
                                                                                      "fc_layers": [{"bias": True}]}}]))
    assert out["input_features"][0]["encoder"] == {"type": "dense", "use_bias": False, "fc_layers": [{"use_bias": True}]}


def test_numerical_is_number():
    config = load_config(with_(input_features=[{"name": "age", "type": "numerical"}],
                               preprocessing={"numerical": {"normalization": "minmax"}}))
    assert config.input_features[0].preprocessing.normalization == "minmax"


def test_old_text_preprocessing_names():
    config = load_config(with_(input_features=[{"name": "review", "type": "text", "preprocessing": {
        "word_tokenizer": "space", "word_most_common": 50, "word_sequence_length_limit": 12}}]))
    preprocessing = config.input_features[0].preprocessing
    assert (preprocessing.tokenizer, preprocessing.most_common, preprocessing.max_sequence_length) == ("space", 50, 12)


def test_an_audio_feature_block_is_unnested_into_the_preprocessing_and_wins_as_in_ludwig():
    block = {"type": "fbank", "window_length_in_s": 0.04, "num_filter_bands": 40}
    config = load_config(with_(input_features=[
        {"name": "clip", "type": "audio", "preprocessing": {
            "audio_file_length_limit_in_s": 3.0, "num_filter_bands": 20, "audio_feature": block}},
        {"name": "other", "type": "audio"}], preprocessing={"audio": {"audio_feature": {"type": "stft"}}}))
    preprocessing = config.input_features[0].preprocessing
    assert (preprocessing.type, preprocessing.window_length_in_s, preprocessing.num_filter_bands,
            preprocessing.audio_file_length_limit_in_s) == ("fbank", 0.04, 40, 3.0)
    assert config.input_features[1].preprocessing.type == "stft"  # the type-level block too


def test_learning_rate_schedule_keys_move_into_the_scheduler():
    out = upgraded(with_(trainer={"decay": True, "decay_steps": 100, "decay_rate": 0.9, "staircase": True,
                                  "learning_rate_warmup_epochs": 2, "reduce_learning_rate_on_plateau": 1,
                                  "reduce_learning_rate_on_plateau_patience": 3,
                                  "reduce_learning_rate_on_plateau_rate": 0.5,
                                  "reduce_learning_rate_eval_metric": "loss",
                                  "reduce_learning_rate_eval_split": "validation"}))
    assert out["trainer"] == {"learning_rate_scheduler": {
        "decay": "exponential", "decay_steps": 100, "decay_rate": 0.9, "staircase": True, "warmup_evaluations": 2,
        "reduce_on_plateau": 1, "reduce_on_plateau_patience": 3, "reduce_on_plateau_rate": 0.5,
        "reduce_eval_metric": "loss", "reduce_eval_split": "validation"}}


def test_learning_rate_schedule_keys_at_the_top_level_move_too():
    config = load_config(with_(decay=True, decay_rate=0.8, training={"epochs": 2}))
    assert (config.trainer.learning_rate_scheduler.decay, config.trainer.learning_rate_scheduler.decay_rate) == (
        "exponential", 0.8)


def test_decay_off_is_no_decay_and_the_new_name_wins():
    out = upgraded(with_(trainer={"decay": False, "decay_rate": 0.5, "learning_rate_scheduler": {"decay_rate": 0.7}}))
    assert out["trainer"]["learning_rate_scheduler"] == {"decay": None, "decay_rate": 0.7}


def test_optimizer_lr_is_the_learning_rate_and_adam_settings_of_ludwig_0_4():
    config = load_config(with_(trainer={"optimizer": {"type": "adam", "lr": 0.01, "beta_1": 0.8, "epsilon": 1e-6}}))
    assert config.trainer.learning_rate == 0.01
    assert (config.trainer.optimizer.betas, config.trainer.optimizer.eps) == ((0.8, 0.999), 1e-6)


def test_optimizer_lr_does_not_override_the_learning_rate():
    assert load_config(with_(trainer={"learning_rate": 0.002, "optimizer": {"lr": 0.01}})).trainer.learning_rate == 0.002


def test_adafactor_keeps_its_own_lr():
    assert upgraded(with_(trainer={"optimizer": {"type": "adafactor", "lr": 0.01}}))["trainer"]["optimizer"]["lr"] == 0.01


def test_split_settings_of_ludwig_0_4():
    config = load_config(with_(preprocessing={"force_split": False, "split_probabilities": [0.6, 0.2, 0.2]}))
    assert (config.preprocessing.split.type, config.preprocessing.split.probabilities) == ("random", [0.6, 0.2, 0.2])
    config = load_config(with_(preprocessing={"stratify": "city", "split_probabilities": [0.5, 0.25, 0.25]}))
    assert (config.preprocessing.split.type, config.preprocessing.split.column) == ("stratify", "city")


def test_per_type_preprocessing_stays_where_ludwig_0_17_has_it():
    out = upgraded(with_(preprocessing={"image": {"height": 12}}, defaults={"image": {"preprocessing": {"width": 5}}}))
    assert out["preprocessing"]["image"] == {"height": 12} and out["defaults"]["image"]["preprocessing"] == {"width": 5}
    load_config(out)


def test_missing_value_strategy_backfill_and_pad():
    out = upgraded(with_(input_features=[{"name": "age", "type": "number", "preprocessing": {
        "missing_value_strategy": "backfill"}}], defaults={"category": {"preprocessing": {"missing_value_strategy": "pad"}}}))
    assert out["input_features"][0]["preprocessing"]["missing_value_strategy"] == "bfill"
    assert out["defaults"]["category"]["preprocessing"]["missing_value_strategy"] == "ffill"


def test_class_weights_of_one_mean_none():
    config = load_config(with_(output_features=[{"name": "bought", "type": "category", "loss": {"class_weights": 1}}]))
    assert config.output_features[0].loss.class_weights is None


def test_eval_batch_size_zero_means_unset():
    assert load_config(with_(trainer={"eval_batch_size": 0})).trainer.eval_batch_size is None


def test_increase_batch_size_on_plateau_max_is_max_batch_size():
    out = upgraded(with_(trainer={"increase_batch_size_on_plateau_max": 512}))
    assert out["trainer"] == {"max_batch_size": 512}


def test_trainer_type_is_dropped():
    assert renames_of(with_(trainer={"type": "trainer"})) == ["trainer.type (removed: model_type decides the trainer)"]
    load_config(with_(trainer={"type": "trainer", "epochs": 2}))


def test_hyperopt_is_kept_upgraded():
    config = load_config(with_(hyperopt={
        "parameters": {"training.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 0.1}},
        "sampler": {"type": "ray", "search_alg": "hyperopt", "num_samples": 4},
        "executor": {"type": "serial"}}))
    assert config.hyperopt.model_dump(include={"parameters", "search_alg"}, exclude_defaults=True) == {
        "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 0.1}},
        "search_alg": {"type": "hyperopt"}}
    assert (config.hyperopt.executor.type, config.hyperopt.executor.num_samples) == ("ray", 4)


def test_empty_hyperopt_means_none():
    assert load_config(with_(hyperopt={})).hyperopt is None


def test_the_type_key_some_ludwig_releases_wrote_into_defaults():
    config = load_config(with_(defaults={"number": {"type": "number", "preprocessing": {"normalization": "minmax"}}}))
    assert config.input_features[0].preprocessing.normalization == "minmax"


def test_removed_text_encoders_are_auto_transformer():
    out = upgraded(with_(input_features=[{"name": "review", "type": "text", "encoder": {"type": "ctrl"}}]))
    assert out["input_features"][0]["encoder"] == {"type": "auto_transformer"}



def test_adam_betas_one_key_each_as_the_docs_of_ludwig_0_5_wrote_them():
    config = load_config(with_(trainer={"optimizer": {"type": "adam", "beta1": 0.85, "beta2": 0.99}}))
    assert config.trainer.optimizer.betas == (0.85, 0.99)


def test_clipping_on_the_optimizer_moves_to_gradient_clipping():
    config = with_(trainer={"optimizer": {"type": "adam", "clip_global_norm": 2.0, "clipnorm": None, "clip_value": 0.1}})
    assert renames_of(config) == ["trainer.optimizer.clip_global_norm -> trainer.gradient_clipping.clipglobalnorm",
                                  "trainer.optimizer.clipnorm -> trainer.gradient_clipping.clipnorm",
                                  "trainer.optimizer.clip_value -> trainer.gradient_clipping.clipvalue"]
    clipping = load_config(config).trainer.gradient_clipping
    assert (clipping.clipglobalnorm, clipping.clipnorm, clipping.clipvalue) == (2.0, None, 0.1)


def test_clipping_already_in_gradient_clipping_wins():
    out = upgraded(with_(trainer={"gradient_clipping": {"clipvalue": 0.5}, "optimizer": {"clipvalue": 0.1}}))
    assert out["trainer"] == {"gradient_clipping": {"clipvalue": 0.5}, "optimizer": {}}


def test_weight_regularization_null_is_dropped_and_any_value_refused():
    config = with_(output_features=[{"name": "bought", "type": "binary", "weight_regularization": None}])
    assert renames_of(config) == ["output_features[0].weight_regularization (removed: null; no Ludwig version reads it)"]
    load_config(config)
    with pytest.raises(ConfigError) as info:
        upgrade(with_(output_features=[{"name": "bought", "type": "binary", "weight_regularization": "l2"}]))
    assert info.value.problems[0].startswith(
        "output_features[0].weight_regularization: got 'l2'; no Ludwig version read this key")
    assert "trainer.regularization_type and trainer.regularization_lambda" in info.value.problems[0]


def test_bn_virtual_divider_is_the_batch_size_over_the_divider():
    config = load_config(with_(combiner={"type": "tabnet", "bn_virtual_divider": 32}, trainer={"batch_size": 1024}))
    assert config.combiner.bn_virtual_bs == 32
    assert renames_of(with_(combiner={"type": "tabnet", "bn_virtual_divider": 32}, trainer={"batch_size": 1024})) == [
        "combiner.bn_virtual_divider 32 -> combiner.bn_virtual_bs 32 (trainer.batch_size 1024 / 32)"]


def test_bn_virtual_divider_beside_bn_virtual_bs_is_dropped():
    config = load_config(with_(combiner={"type": "tabnet", "bn_virtual_divider": 32, "bn_virtual_bs": 512},
                               trainer={"batch_size": 1024}))
    assert config.combiner.bn_virtual_bs == 512


@pytest.mark.parametrize("trainer", [{}, {"batch_size": "auto"}])
def test_bn_virtual_divider_without_a_batch_size_is_refused(trainer):
    with pytest.raises(ConfigError) as info:
        upgrade(with_(combiner={"type": "tabnet", "bn_virtual_divider": 32}, trainer=trainer))
    assert info.value.problems[0].startswith("combiner.bn_virtual_divider: got 32 with trainer.batch_size")
    assert info.value.problems[0].endswith("give the virtual batch's rows instead: combiner.bn_virtual_bs")


def test_scheduler_type_is_the_decay_unless_decay_is_given():
    config = with_(trainer={"learning_rate_scheduler": {"type": "cosine"}})
    assert renames_of(config) == ["trainer.learning_rate_scheduler.type cosine -> trainer.learning_rate_scheduler.decay cosine"]
    assert load_config(config).trainer.learning_rate_scheduler.decay == "cosine"
    out = upgraded(with_(trainer={"learning_rate_scheduler": {"type": "cosine", "decay": "linear"}}))
    assert out["trainer"]["learning_rate_scheduler"] == {"decay": "linear"}


def test_rnn_cell_is_cell_type():
    config = load_config(with_(input_features=[{"name": "title", "type": "text",
                                                "encoder": {"type": "rnn", "cell": "lstm"}}]))
    assert config.input_features[0].encoder.cell_type == "lstm"

# ---- fields Ludwig computes --------------------------------------------------------------------

RENDERED_FEATURES = {
    "input_features": [
        {"name": "age", "type": "number", "column": "age", "proc_column": "age_mZFLky",
         "preprocessing": {"normalization": "zscore", "computed_fill_value": 0.0, "computed_outlier_fill_value": None},
         "encoder": {"type": "passthrough", "input_size": 1}},
        {"name": "city", "type": "category", "proc_column": "city_mZFLky",
         "preprocessing": {"computed_fill_value": "<UNK>"},
         "encoder": {"type": "dense", "vocab": ["<UNK>", "Oslo", "Lima"], "skip": False}},
        {"name": "review", "type": "text", "proc_column": "review_abc",
         "preprocessing": {"max_sequence_length": 40, "compute_idf": False},
         "encoder": {"type": "parallel_cnn", "vocab": ["a"], "vocab_size": 1, "max_sequence_length": 12,
                     "should_embed": True, "pad_idx": 0, "num_tokens": 1, "str2freq": {"a": 1}, "str2idf": None}},
        {"name": "v", "type": "vector", "encoder": {"type": "dense", "input_size": 4}},
    ],
    "output_features": [{"name": "bought", "type": "category", "proc_column": "bought_x", "input_size": 128,
                         "num_classes": 2, "default_validation_metric": "accuracy",
                         "decoder": {"type": "classifier", "input_size": 128, "num_classes": 2, "str2idx": {"y": 0}}}],
}


def test_computed_fields_are_dropped_without_a_word(caplog):
    with caplog.at_level(logging.WARNING, logger="plait"):
        config = load_config(RENDERED_FEATURES)
    assert caplog.records == []
    assert config.input_features[2].preprocessing.max_sequence_length == 40  # a setting under preprocessing
    assert config.input_features[2].encoder.type == "parallel_cnn"


def test_computed_fields_in_defaults_are_dropped_too():
    load_config(with_(defaults={"category": {"encoder": {"type": "dense", "vocab": None, "skip": False},
                                             "decoder": {"type": "classifier", "input_size": None, "num_classes": None},
                                             "preprocessing": {"computed_fill_value": None}}}))


def test_a_config_nested_far_too_deeply_is_refused_with_one_clean_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("input_features:\n  - name: x\n    type: number\n    encoder: " + "[" * 20_000 + "]" * 20_000 +
                    "\noutput_features:\n  - name: y\n    type: binary\n")
    [problem] = problems_of(path)
    assert problem.startswith("input_features[0].encoder[0][0]") and problem.endswith(
        "...: nested more than 100 levels deep; a config never is, so this is refused (check the file for runaway "
        "brackets)")


# ---- JSON configs ------------------------------------------------------------------------------

def test_a_model_hyperparameters_json_is_read_as_json(tmp_path):
    """JSON writes 1e-08; read as YAML 1.1 that would be the string '1e-08'."""
    path = tmp_path / "model_hyperparameters.json"
    path.write_text(json.dumps({**RENDERED_FEATURES, "trainer": {"optimizer": {"type": "adam", "eps": 1e-08}},
                                "model_type": "ecd", "ludwig_version": "0.17.8", "hyperopt": None, "preset": None}))
    config = load_config(path)
    assert config.trainer.optimizer.eps == 1e-08
    assert config.ludwig_version == "0.17.8"


def test_invalid_json_names_the_place(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"input_features": [}')
    with pytest.raises(ConfigError, match=r"c\.json: invalid JSON at line 1, column 21"):
        load_config(path)


# ---- Ludwig's other top-level keys -------------------------------------------------------------

def test_llm_only_keys_are_refused_in_an_ecd_config_unless_unset():
    load_config(with_(base_model=None, prompt=None, adapter=None, quantization=None, generation=None,
                      model_parameters=None, trust_remote_code=False))
    [problem] = problems_of(with_(base_model="gpt2", prompt={"template": "{x}"}))
    assert problem.startswith("base_model, prompt: these are settings of Ludwig's LLM model type; set model_type: "
                              "llm to fine-tune a language model, or remove them")


def test_preset_only_unset():
    assert load_config(with_(preset=None)).preset is None
    [problem] = problems_of(with_(preset="high_quality"))
    assert problem.startswith("preset: got 'high_quality'; plait does not implement this Ludwig setting")


def test_an_unknown_model_type_gets_a_suggestion():
    assert problems_of(with_(model_type="ecdd")) == ["model_type: got 'ecdd'; did you mean ecd?"]


# ---- through the command line ------------------------------------------------------------------

def test_plait_validate_upgrades_an_old_ludwig_config(write_config, capsys):
    old = with_(training={"epochs": 4, "decay": True},
                combiner={"type": "concat", "fc_size": 48}, preprocessing={"split_probabilities": [0.8, 0.1, 0.1]})
    code = main(["validate", "--config", write_config(old)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.splitlines()[0] == (
        "upgraded Ludwig names: training -> trainer, combiner.fc_size -> combiner.output_size, "
        "preprocessing.split_probabilities -> preprocessing.split.probabilities, "
        "trainer.decay -> trainer.learning_rate_scheduler.decay")
    shown = yaml.safe_load(out)
    assert (shown["trainer"]["epochs"], shown["combiner"]["output_size"]) == (4, 48)
    assert shown["preprocessing"]["split"]["probabilities"] == [0.8, 0.1, 0.1]
