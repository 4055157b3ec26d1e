"""The config schema: defaults, Ludwig compatibility, and the messages a user sees for mistakes."""

from __future__ import annotations

import time

import pytest

from plait.config.features import INPUT_TYPES, OUTPUT_TYPES
import yaml
from pydantic import BaseModel

from plait.config import PlaitConfig, load_config
from plait.config.render import resolved_dict
from plait.errors import ConfigError

MINIMAL = {
    "input_features": [{"name": "x", "type": "number"}],
    "output_features": [{"name": "y", "type": "category"}],
}

LUDWIG_YAML = """
input_features:
  - name: review
    type: text
    encoder:
      type: parallel_cnn
      num_filters: 32
    preprocessing:
      tokenizer: space
  - name: age
    type: number
  - name: city
    type: category
  - name: owner
    type: category
    preprocessing:
      most_common: 7
output_features:
  - name: label
    type: binary
preprocessing:
  split:
    type: random
    probabilities: [0.8, 0.1, 0.1]
  number:
    normalization: minmax
defaults:
  category:
    preprocessing:
      most_common: 5
trainer:
  epochs: 3
  batch_size: 16
  learning_rate: 0.001
  optimizer:
    type: adam
backend:
  type: local
  cache_dir: {cache_dir}
model_type: ecd
ludwig_version: 0.10.1
"""


def problems_of(config) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    return info.value.problems


def with_(**sections) -> dict:
    return {**MINIMAL, **sections}


def assert_every_field_shown(model: BaseModel, shown: dict, path: str = "") -> None:
    assert set(shown) == set(type(model).model_fields), f"{path or '<config>'} is missing fields"
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            assert_every_field_shown(value, shown[name], f"{path}.{name}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    assert_every_field_shown(item, shown[name][i], f"{path}.{name}[{i}]")


# ---- defaults ----------------------------------------------------------------------------------

def test_resolved_config_shows_every_field_of_every_section():
    config = load_config(MINIMAL)
    assert_every_field_shown(config, resolved_dict(config))


def test_minimal_config_gets_documented_defaults():
    config = load_config(MINIMAL)
    shown = resolved_dict(config)
    x, y = shown["input_features"][0], shown["output_features"][0]
    assert x["column"] == "x"
    assert x["preprocessing"] == {"missing_value_strategy": "fill_with_const", "fill_value": 0.0, "normalization": "auto",
                                  "outlier_strategy": None, "outlier_threshold": 3.0,
                                  "clip_to_training_range": True}
    assert x["encoder"] == {"type": "passthrough"}
    assert y["preprocessing"]["missing_value_strategy"] == "drop_row"
    assert y["decoder"]["type"] == "classifier"
    assert y["loss"]["type"] == "softmax_cross_entropy"
    assert shown["preprocessing"]["split"] == {"type": "random", "probabilities": [0.7, 0.1, 0.2]}
    assert shown["preprocessing"]["sample_ratio"] == 1.0
    assert shown["combiner"]["type"] == "concat"
    assert shown["trainer"]["epochs"] == 100
    assert shown["trainer"]["batch_size"] == "auto"
    assert shown["trainer"]["learning_rate"] == "auto"
    assert shown["trainer"]["optimizer"]["type"] == "adam"
    assert shown["backend"]["type"] == "auto"
    assert shown["backend"]["trainer"]["strategy"] == {"type": "ddp", "find_unused_parameters": False}


def test_resolved_config_lists_name_and_type_first():
    shown = resolved_dict(load_config(MINIMAL))
    assert list(shown["input_features"][0])[:3] == ["name", "type", "column"]


def test_resolved_config_validates_back_to_the_same_config():
    config = load_config(MINIMAL)
    again = load_config(yaml.safe_load(yaml.safe_dump(resolved_dict(config))))
    assert again == config


def test_input_encoders_default_per_feature_type():
    config = load_config({
        "input_features": [{"name": t, "type": t} for t in ("binary", "number", "category", "text", "set", "vector")],
        "output_features": [{"name": "y", "type": "binary"}],
    })
    encoders = {f.name: f.encoder.type for f in config.input_features}
    assert encoders == {"binary": "passthrough", "number": "passthrough", "category": "dense", "text": "parallel_cnn", "set": "embed", "vector": "dense"}


# ---- Ludwig configs ----------------------------------------------------------------------------

@pytest.fixture
def ludwig_config(tmp_path) -> PlaitConfig:
    path = tmp_path / "ludwig.yaml"
    path.write_text(LUDWIG_YAML.replace("{cache_dir}", str(tmp_path / "cache")))
    return load_config(path)


def test_ludwig_config_validates_unchanged(ludwig_config, tmp_path):
    features = {f.name: f for f in ludwig_config.features}
    assert features["review"].encoder.type == "parallel_cnn"
    assert features["review"].encoder.num_filters == 32
    assert features["review"].preprocessing.tokenizer == "space"
    assert ludwig_config.preprocessing.split.probabilities == [0.8, 0.1, 0.1]
    assert ludwig_config.trainer.epochs == 3
    assert ludwig_config.trainer.batch_size == 16
    assert ludwig_config.trainer.learning_rate == 0.001
    assert ludwig_config.trainer.optimizer.type == "adam"
    assert ludwig_config.backend.type == "local"
    assert ludwig_config.backend.cache_dir == str(tmp_path / "cache")


def test_top_level_type_preprocessing_reaches_every_feature_of_that_type(ludwig_config):
    age = next(f for f in ludwig_config.input_features if f.name == "age")
    assert age.preprocessing.normalization == "minmax"


def test_type_defaults_reach_features_and_the_feature_own_setting_wins(ludwig_config):
    features = {f.name: f for f in ludwig_config.features}
    assert features["city"].preprocessing.most_common == 5
    assert features["owner"].preprocessing.most_common == 7


def test_preprocessing_precedence_is_feature_then_defaults_then_top_level():
    def most_common(feature_setting=None, defaults=None, top=None):
        feature = {"name": "c", "type": "category"}
        if feature_setting:
            feature["preprocessing"] = {"most_common": feature_setting}
        config = {"input_features": [feature], "output_features": [{"name": "y", "type": "binary"}]}
        if defaults:
            config["defaults"] = {"category": {"preprocessing": {"most_common": defaults}}}
        if top:
            config["preprocessing"] = {"category": {"most_common": top}}
        return load_config(config).input_features[0].preprocessing.most_common

    assert most_common(top=3) == 3
    assert most_common(defaults=5, top=3) == 5
    assert most_common(feature_setting=7, defaults=5, top=3) == 7
    assert most_common() == 10000


def test_type_defaults_set_encoders_unless_the_feature_picks_another():
    config = load_config({
        "input_features": [{"name": "a", "type": "text"}, {"name": "b", "type": "text", "encoder": {"type": "rnn"}},
                           {"name": "c", "type": "text", "encoder": {"embedding_size": 8}}],
        "output_features": [{"name": "y", "type": "binary"}],
        "defaults": {"text": {"encoder": {"type": "parallel_cnn", "num_filters": 16}}},
    })
    a, b, c = config.input_features
    assert (a.encoder.type, a.encoder.num_filters) == ("parallel_cnn", 16)
    assert b.encoder.type == "rnn"
    assert (c.encoder.type, c.encoder.num_filters, c.encoder.embedding_size) == ("parallel_cnn", 16, 8)


def test_encoder_given_as_a_name():
    config = load_config({"input_features": [{"name": "a", "type": "text", "encoder": "rnn"}], "output_features": [{"name": "y", "type": "binary"}]})
    assert config.input_features[0].encoder.type == "rnn"


def test_output_feature_keeps_dropping_rows_with_missing_targets_when_defaults_touch_its_preprocessing():
    config = load_config({
        "input_features": [{"name": "x", "type": "number"}],
        "output_features": [{"name": "y", "type": "category", "preprocessing": {"most_common": 3}},
                            {"name": "z", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_mean"}}],
        "defaults": {"category": {"preprocessing": {"lowercase": True}}},
    })
    y, z = config.output_features
    assert (y.preprocessing.missing_value_strategy, y.preprocessing.most_common, y.preprocessing.lowercase) == ("drop_row", 3, True)
    assert z.preprocessing.missing_value_strategy == "fill_with_mean"


def test_column_defaults_to_the_feature_name_and_can_be_set():
    config = load_config({"input_features": [{"name": "x", "type": "number"}, {"name": "x2", "column": "x", "type": "number"}],
                          "output_features": [{"name": "y", "type": "binary"}]})
    assert [f.source_column for f in config.input_features] == ["x", "x"]


def test_split_without_type_is_random():
    config = load_config(with_(preprocessing={"split": {"probabilities": [0.5, 0.25, 0.25]}}))
    assert config.preprocessing.split.type == "random"


@pytest.mark.parametrize("split", [{"type": "fixed"}, {"type": "fixed", "column": "fold"}, {"type": "stratify", "column": "y"}])
def test_other_split_types_validate(split):
    assert load_config(with_(preprocessing={"split": split})).preprocessing.split.type == split["type"]


# ---- distributed strategy ----------------------------------------------------------------------

def test_strategy_given_as_a_name_gets_its_defaults():
    strategy = load_config(with_(backend={"trainer": {"strategy": "fsdp"}})).backend.trainer.strategy
    assert (strategy.type, strategy.state_dict_type, strategy.cpu_offload) == ("fsdp", "sharded", False)


def test_strategy_given_as_a_section():
    config = load_config(with_(backend={"trainer": {"strategy": {"type": "deepspeed", "zero_optimization": {"stage": 3}}}}))
    assert config.backend.trainer.strategy.zero_optimization.stage == 3


def test_strategy_typo_suggests_the_right_name():
    assert problems_of(with_(backend={"trainer": {"strategy": "fsdpp"}})) == [
        "backend.trainer.strategy.type: unknown type 'fsdpp'; did you mean fsdp?"
    ]


def test_unrelated_strategy_name_lists_the_valid_ones():
    [problem] = problems_of(with_(backend={"trainer": {"strategy": "mpi"}}))
    assert problem.startswith("backend.trainer.strategy.type: unknown type 'mpi'")
    for name in ("ddp", "deepspeed", "fsdp", "horovod"):
        assert name in problem


def test_strategy_section_without_type_says_type_is_missing():
    [problem] = problems_of(with_(backend={"trainer": {"strategy": {"cpu_offload": True}}}))
    assert problem == "backend.trainer.strategy.type: required field is missing; valid types are: ddp, deepspeed, fsdp, horovod"


# ---- errors ----------------------------------------------------------------------------------

def test_unknown_key_suggests_the_closest_field():
    assert problems_of(with_(trainer={"lerning_rate": 0.1})) == ["trainer.lerning_rate: unknown field; did you mean learning_rate?"]


def test_unknown_key_in_a_feature_names_its_position():
    config = {"input_features": [{"name": "x", "type": "number", "preprocesing": {}}], "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == ["input_features[0].preprocesing: unknown field; did you mean preprocessing?"]


def test_unknown_key_in_an_encoder_whose_type_was_left_to_its_default():
    config = {"input_features": [{"name": "x", "type": "text", "encoder": {"embeding_size": 8}}], "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == ["input_features[0].encoder.embeding_size: unknown field; did you mean embedding_size?"]


def test_unknown_key_in_a_combiner_without_type():
    assert problems_of(with_(combiner={"output_siz": 8})) == ["combiner.output_siz: unknown field; did you mean output_size?"]


def test_wrong_type_names_the_path_the_value_and_what_is_expected():
    assert problems_of(with_(trainer={"batch_size": "big"})) == ["trainer.batch_size: got 'big'; expected int or 'auto'"]


def test_wrong_type_list_where_a_number_is_expected_reads_as_one_problem():
    assert problems_of(with_(trainer={"batch_size": [32]})) == ["trainer.batch_size: got [32]; expected int or 'auto'"]


def test_out_of_range_value_names_the_path_and_value():
    assert problems_of(with_(trainer={"epochs": 0})) == ["trainer.epochs: Input should be greater than 0 (got 0)"]


def test_bad_choice_suggests_the_closest_valid_one():
    config = {"input_features": [{"name": "x", "type": "number", "preprocessing": {"normalization": "zscor"}}], "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == ["input_features[0].preprocessing.normalization: got 'zscor'; did you mean zscore?"]
    assert problems_of(with_(trainer={"optimizer": {"type": "adamm"}})) == ["trainer.optimizer.type: unknown type 'adamm'; did you mean adam?"]


def test_unknown_feature_type_suggests_the_closest():
    config = {"input_features": [{"name": "x", "type": "numbr"}], "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == ["input_features[0].type: unknown type 'numbr'; did you mean number?"]


def test_feature_without_type_lists_the_types():
    config = {"input_features": [{"name": "x"}], "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == [f"input_features[0].type: required field is missing; valid types are: {', '.join(sorted(INPUT_TYPES))}"]


def test_bad_split_probabilities_are_explained_once():
    [problem] = problems_of(with_(preprocessing={"split": {"probabilities": [0.5, 0.5]}}))
    assert problem.startswith("preprocessing.split.probabilities: probabilities must be three")
    assert problem.count("[0.5, 0.5]") == 1


def test_duplicate_feature_names_are_named():
    config = {"input_features": [{"name": "a", "type": "number"}, {"name": "b", "type": "category"}, {"name": "a", "type": "category"}],
              "output_features": [{"name": "b", "type": "binary"}]}
    [problem] = problems_of(config)
    assert problem == "<config>: feature names must be unique; repeated: a, b"


def test_input_only_type_as_output_says_which_types_can_be_outputs():
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "t", "type": "date"}]}
    assert problems_of(config) == [
        f"output_features[0].type: 'date' is an input-only feature type; output features can be {', '.join(OUTPUT_TYPES)}"
    ]


@pytest.mark.parametrize(
    "ftype, strategy, allowed",
    [
        ("category", "fill_with_mean", "fill_with_const, fill_with_mode, drop_row"),
        ("text", "fill_with_mean", "fill_with_const, fill_with_mode, drop_row"),
        ("number", "fill_with_true", "fill_with_const, fill_with_mean, fill_with_mode, drop_row"),
        ("binary", "fill_with_mean", "fill_with_false, fill_with_true, fill_with_const, fill_with_mode, drop_row"),
        ("vector", "fill_with_mode", "fill_with_const, fill_with_mean, drop_row"),
        ("set", "fill_with_mean", "fill_with_const, fill_with_mode, drop_row"),
    ],
)
def test_missing_value_strategy_that_does_not_apply_to_the_type(ftype, strategy, allowed):
    config = {"input_features": [{"name": "x", "type": ftype, "preprocessing": {"missing_value_strategy": strategy}}],
              "output_features": [{"name": "y", "type": "binary"}]}
    assert problems_of(config) == [
        f"input_features[0].preprocessing: missing_value_strategy {strategy!r} does not apply to this feature type; use one of {allowed}"
    ]


def test_every_problem_is_reported_at_once():
    config = {
        "input_features": [{"name": "x", "type": "number", "preprocessing": {"normalization": "minmaxx"}}],
        "output_features": [{"name": "y", "type": "date"}, {"name": "z", "type": "binary", "treshold": 0.3}],
        "trainer": {"lerning_rate": 0.1, "batch_size": "x", "optimizer": {"type": "adamm"}},
        "backend": {"typ": "local"},
    }
    assert sorted(problems_of(config)) == sorted([
        "input_features[0].preprocessing.normalization: got 'minmaxx'; did you mean minmax?",
        f"output_features[0].type: 'date' is an input-only feature type; output features can be {', '.join(OUTPUT_TYPES)}",
        "output_features[1].treshold: unknown field; did you mean threshold?",
        "trainer.lerning_rate: unknown field; did you mean learning_rate?",
        "trainer.batch_size: got 'x'; expected int or 'auto'",
        "trainer.optimizer.type: unknown type 'adamm'; did you mean adam?",
        "backend.typ: unknown field; did you mean type?",
    ])


def test_error_message_counts_the_problems_one_per_line():
    with pytest.raises(ConfigError) as info:
        load_config(with_(trainer={"lerning_rate": 0.1, "epochs": 0}))
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid config (2 problems):"
    assert len(lines) == 3 and all(line.startswith("  trainer.") for line in lines[1:])


@pytest.mark.parametrize("text", ["", "[]", "just text", "5", "- name: x"])
def test_config_file_that_is_not_a_mapping(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert problems_of(path) == ["<config>: the config must be a mapping with input_features and output_features"]


def test_missing_sections_are_required():
    assert problems_of({"input_features": [{"name": "x", "type": "number"}]}) == ["output_features: required field is missing"]


@pytest.mark.parametrize("section", ["preprocessing", "defaults"])
def test_section_of_the_wrong_type_is_a_config_error(section):
    [problem] = problems_of(with_(**{section: "oops"}))
    assert problem.startswith(f"{section}: Input should be a valid dictionary")


def test_feature_lists_of_the_wrong_type_are_config_errors():
    assert problems_of({"input_features": 5, "output_features": "y"}) == [
        "input_features: Input should be a valid list (got 5)",
        "output_features: Input should be a valid list (got 'y')",
    ]


# ---- credentials ---------------------------------------------------------------------------

CREDENTIALS = {"key": "AKIA-SECRET-KEY", "secret": "very-secret-value"}


def test_cache_credentials_are_masked_in_the_resolved_config():
    config = load_config(with_(backend={"cache_dir": "s3://bucket/cache", "cache_credentials": CREDENTIALS}))
    assert config.backend.cache_credentials == CREDENTIALS  # still usable
    text = yaml.safe_dump(resolved_dict(config))
    assert resolved_dict(config)["backend"]["cache_credentials"] == {"key": "***", "secret": "***"}
    for secret in CREDENTIALS.values():
        assert secret not in text


def test_cache_credentials_never_appear_in_error_messages():
    bad = ["key", "secret"]  # neither a mapping nor a path: invalid
    with pytest.raises(ConfigError) as info:
        load_config(with_(backend={"cache_credentials": bad}))
    assert info.value.problems[0].startswith("backend.cache_credentials: got *** (hidden)")
    with pytest.raises(ConfigError) as info:  # an error about the whole config must not echo it either
        load_config({**with_(backend={"cache_credentials": CREDENTIALS}),
                     "output_features": [{"name": "x", "type": "binary"}]})
    for secret in CREDENTIALS.values():
        assert secret not in str(info.value)


def test_cache_credentials_take_any_fsspec_option():
    options = {"anon": False, "client_kwargs": {"region_name": "eu-west-1"}, **CREDENTIALS}
    config = load_config(with_(backend={"cache_credentials": options}))
    assert config.backend.cache_credentials["client_kwargs"] == {"region_name": "eu-west-1"}


def test_cache_credentials_may_be_a_file_path():
    config = load_config(with_(backend={"cache_credentials": "~/creds.json"}))
    assert resolved_dict(config)["backend"]["cache_credentials"] == "~/creds.json"


# ---- YAML files ----------------------------------------------------------------------------

def test_invalid_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("input_features:\n  - name: x\n    type: number\n  - name: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "invalid YAML at line 5" in str(info.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


# ---- hostile sizes: every check linear, every echoed value short ---------------------------------

def many_number_features(count: int) -> str:
    """A config with ``count`` number inputs, as YAML text (written directly: quick to make)."""
    inputs = "".join(f"  - {{name: x{i}, type: number}}\n" for i in range(count))
    return f"input_features:\n{inputs}output_features:\n  - {{name: y, type: binary}}\n"


def run_validate(path, capsys) -> tuple[int, str, str]:
    from plait.cli import main

    code = main(["validate", "--config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("plait: error: ") and err.count("plait: error:") == 1
    return err


def test_twenty_thousand_features_validate_in_linear_time(tmp_path):
    path = tmp_path / "wide.yaml"
    path.write_text(many_number_features(20_000))
    # This process's CPU time, not the clock's: the suite runs it beside other work. A check per
    # name over all names (once 60 s at 50,000) would take about 10 s here.
    started = time.process_time()
    config = load_config(path)
    assert time.process_time() - started < 6, "linear: about 1.6 s"
    assert len(config.input_features) == 20_000 and config.input_features[-1].name == "x19999"


def test_plait_validate_prints_ten_thousand_features(tmp_path, capsys):
    path = tmp_path / "wide.yaml"
    path.write_text(many_number_features(10_000))
    started = time.process_time()
    code, out, _ = run_validate(path, capsys)
    assert time.process_time() - started < 15  # about 2.5 s of CPU, half of it printing the YAML
    assert code == 0 and out.count("\n- name: x") == 10_000 and "\n- name: x9999\n" in out


def test_a_yaml_alias_bomb_is_refused_quickly_naming_the_file(tmp_path, capsys):
    """The billion-laughs pattern inside a validated field: nine lines that expand to 9**9 values."""
    lines = ["input_features:", "  - name: x", "    type: number", "    preprocessing:",
             '      missing_value_strategy: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"level{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 9)}]" for k in range(1, 9)]
    lines += ["output_features:", "  - name: y", "    type: binary", "trainer:", "  learning_rate: *a8"]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    started = time.process_time()
    err = assert_one_error_line(*run_validate(path, capsys))
    assert time.process_time() - started < 10
    assert f"{path}: the YAML aliases (*name) expand to more than 10,000,000 values" in err and len(err) < 400


def test_aliases_that_stay_small_are_read_as_usual(tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text("shared: &number {name: x, type: number}\ninput_features: [*number]\n"
                    "output_features: [{name: y, type: binary}]\n")
    with pytest.raises(ConfigError, match="shared: unknown field"):  # read, then validated as any key
        load_config(path)


def test_a_fifty_megabyte_value_is_echoed_as_a_marked_prefix(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    path.write_text(many_number_features(1) + f"trainer:\n  learning_rate: {'z' * 50_000_000}\n")
    err = assert_one_error_line(*run_validate(path, capsys))
    assert f"trainer.learning_rate: got '{'z' * 80}'... (50,000,000 characters); expected float or 'auto'" in err
    assert len(err) < 400


def test_a_huge_list_in_a_choice_is_echoed_short_and_no_suggestion_is_computed(tmp_path, capsys):
    path = tmp_path / "list.yaml"
    path.write_text("input_features:\n  - name: x\n    type: number\n    preprocessing:\n"
                    f"      missing_value_strategy: [{', '.join(['fill_with_mean'] * 100_000)}]\n"
                    "output_features: [{name: y, type: binary}]\n")
    err = assert_one_error_line(*run_validate(path, capsys))
    assert "missing_value_strategy: got ['fill_with_mean', 'fill_with_mean'," in err and len(err) < 600


def test_an_input_reading_the_output_column_is_target_leakage(refused):
    problem = refused(input_features=[{"name": "age", "type": "number"},
                                      {"name": "answer", "type": "binary", "column": "bought"}])
    assert problem.startswith("input_features[1].column: input feature 'answer' reads column 'bought', which "
                              "output feature 'bought' (output_features[0]) predicts"), problem
    assert "the model would need the label to predict it" in problem


def test_an_output_reading_another_column_than_its_name_is_leakage_too(refused):
    problem = refused(output_features=[{"name": "target", "type": "number", "column": "age"}])
    assert "input feature 'age' reads column 'age', which output feature 'target'" in problem


def test_bucketing_field_names_a_text_or_sequence_feature():
    config = {"input_features": [{"name": "t", "type": "text"}, {"name": "n", "type": "number"}],
              "output_features": [{"name": "y", "type": "binary"}]}
    assert load_config({**config, "trainer": {"bucketing_field": "t"}}).trainer.bucketing_field == "t"
    assert problems_of({**config, "trainer": {"bucketing_field": "n"}}) == [
        "trainer.bucketing_field: got 'n', which is no text or sequence feature; valid choices are: t"]


# Ludwig 0.17 configs plait does not implement (issue #40's list): each refused by its path and
# name, with the reason and what to write instead.
NUMBER_IN, BINARY_OUT = [{"name": "x", "type": "number"}], [{"name": "y", "type": "binary"}]


@pytest.mark.parametrize("config, message", [
    ({"input_features": [{"name": "i", "type": "image", "encoder": {"type": "dinov2"}}], "output_features": BINARY_OUT},
     "input_features[0].encoder.type: Ludwig's 'dinov2' is not implemented in plait; Hugging Face vision models"),
    ({"input_features": [{"name": "i", "type": "image", "encoder": {"type": "siglip"}}], "output_features": BINARY_OUT},
     "use a torchvision encoder"),
    ({"input_features": NUMBER_IN, "output_features": [{"name": "y", "type": "anomaly"}]},
     "output_features[0].type: Ludwig's 'anomaly' is not implemented in plait; one-class anomaly outputs"),
    ({"input_features": NUMBER_IN, "output_features": [{"name": "y", "type": "image", "decoder": {"type": "fpn"}}]},
     "output_features[0].decoder.type: Ludwig's 'fpn' is not implemented in plait; the feature pyramid decoder"),
    ({"input_features": [{"name": "i", "type": "image", "encoder": {"type": "vit", "img_height": 224}}],
      "output_features": BINARY_OUT},
     "input_features[0].encoder.img_height: a key of Ludwig's older Hugging Face ViT encoder"),
    ({"input_features": [{"name": "t", "type": "text", "encoder": {"type": "mamba2"}}], "output_features": BINARY_OUT},
     "input_features[0].encoder.type: Ludwig's 'mamba2' is not implemented in plait; state-space encoders"),
    ({"input_features": NUMBER_IN, "output_features": BINARY_OUT, "trainer": {"loss_balancing": "famo"}},
     "trainer.loss_balancing: got 'famo'; plait does not implement this Ludwig setting"),
])
def test_a_ludwig_config_plait_does_not_implement_is_refused_by_name_with_the_reason(config, message):
    assert any(message in problem for problem in problems_of(config))

