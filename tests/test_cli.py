"""The command line: `plait validate` and `plait preprocess`, and one clean message per mistake."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


ROWS = {"age": [31, 45, 27, 52, 38, 29], "city": ["Oslo", "Lima", "Oslo", "Pune", "Lima", "Oslo"], "bought": ["yes", "no", "yes", "no", "no", "yes"]}
CONFIG = {
    "input_features": [{"name": "age", "type": "number"}, {"name": "city", "type": "category"}],
    "output_features": [{"name": "bought", "type": "binary"}],
}


@pytest.fixture
def config_path(write_config, cache_dir) -> str:
    return write_config({**CONFIG, "backend": {"type": "local", "cache_dir": cache_dir}})


@pytest.fixture
def dataset(make_dataset) -> str:
    return make_dataset(ROWS)


def assert_one_clean_error(result, *fragments: str) -> str:
    code, out, err = result
    assert code == 2
    assert out == ""
    assert err.startswith("plait: error: ")
    assert "Traceback" not in err
    assert err.count("plait: error:") == 1
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


# ---- validate -------------------------------------------------------------------------------

def test_validate_prints_the_config_with_every_default_as_yaml(cli, write_config, cache_dir):
    # backend type auto (the default) takes every backend setting, so all of them are shown.
    config_path = write_config({**CONFIG, "backend": {"cache_dir": cache_dir}})
    code, out, err = cli("validate", "--config", config_path)
    assert code == 0, err
    shown = yaml.safe_load(out)
    age = shown["input_features"][0]
    assert (age["name"], age["type"], age["column"]) == ("age", "number", "age")
    assert age["preprocessing"]["normalization"] == "auto"
    assert shown["output_features"][0]["preprocessing"]["missing_value_strategy"] == "drop_row"
    assert shown["trainer"]["epochs"] == 100
    assert shown["backend"]["trainer"]["strategy"]["type"] == "ddp"
    assert set(shown) == {"input_features", "output_features", "preprocessing", "defaults", "combiner", "trainer",
                          "backend", "model_type", "ludwig_version", "hyperopt", "preset", "serve", "tracking"}


def test_validate_masks_cache_credentials(cli, write_config):
    path = write_config({**CONFIG, "backend": {"cache_dir": "s3://b/c", "cache_credentials": {"key": "K-123", "secret": "S-456"}}})
    code, out, _ = cli("validate", "--config", path)
    assert code == 0
    assert "K-123" not in out and "S-456" not in out
    assert yaml.safe_load(out)["backend"]["cache_credentials"] == {"key": "***", "secret": "***"}


# ---- preprocess -------------------------------------------------------------------------------

def test_preprocess_reports_rows_per_split_and_then_uses_the_cache(cli, config_path, dataset, cache_dir):
    code, out, err = cli("preprocess", "--config", config_path, "--dataset", dataset)
    assert code == 0, err
    first = json.loads(out)
    assert first["from_cache"] is False
    assert sum(first["rows"].values()) == 6
    assert first["cache"].startswith(cache_dir)
    assert "Preprocessed 6 rows" in err

    code, out, err = cli("preprocess", "--config", config_path, "--dataset", dataset)
    assert code == 0
    assert json.loads(out)["from_cache"] is True
    assert "Using cached preprocessed data" in err


def test_preprocess_cache_dir_and_seed_options(cli, write_config, dataset, tmp_path):
    path = write_config(CONFIG)
    elsewhere = tmp_path / "elsewhere"
    code, out, err = cli("preprocess", "--config", path, "--dataset", dataset, "--cache-dir", elsewhere, "--random-seed", 3)
    assert code == 0, err
    assert Path(json.loads(out)["cache"]).parent == elsewhere
    _, again, _ = cli("preprocess", "--config", path, "--dataset", dataset, "--cache-dir", elsewhere, "--random-seed", 4)
    assert json.loads(again)["cache"] != json.loads(out)["cache"]


def test_preprocess_pre_split_sets(cli, config_path, make_dataset):
    train = make_dataset(ROWS, "train.csv")
    valid = make_dataset({k: v[:2] for k, v in ROWS.items()}, "valid.parquet")
    code, out, err = cli("preprocess", "--config", config_path, "--training-set", train, "--validation-set", valid)
    assert code == 0, err
    assert json.loads(out)["rows"] == {"training": 6, "validation": 2, "test": 0}


# ---- one clean message per mistake --------------------------------------------------------------

def test_missing_dataset_file(cli, config_path, tmp_path):
    missing = tmp_path / "nope.csv"
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", missing), f"dataset '{missing}' does not exist")


def test_truncated_parquet(cli, config_path, make_dataset):
    path = Path(make_dataset(ROWS, "data.parquet"))
    path.write_bytes(path.read_bytes()[:-100])
    err = assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path), f"cannot read '{path}' as PARQUET")
    assert ".." not in err


def test_binary_garbage_named_csv(cli, config_path, tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(bytes(range(256)) * 20)
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path), f"cannot read '{path}' as CSV")


def test_csv_with_inconsistent_column_count(cli, config_path, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("age,city,bought\n31,Oslo,yes\n45,Lima\n27,Oslo,yes,extra\n")
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path), "Expected 3 columns, got 2")


def test_config_column_not_in_the_data_lists_the_columns(cli, config_path, make_dataset):
    path = make_dataset({"age": [1, 2], "town": ["a", "b"], "bought": ["yes", "no"]})
    assert_one_clean_error(
        cli("preprocess", "--config", config_path, "--dataset", path),
        "has no column 'city' (for input feature 'city'). Its columns are: age, town, bought",
    )


def test_number_feature_with_text_values(cli, config_path, make_dataset):
    path = make_dataset({**ROWS, "age": ["31", "forty", "27", "52", "n/a?", "29"]})
    assert_one_clean_error(
        cli("preprocess", "--config", config_path, "--dataset", path),
        "number feature 'age': column 'age' holds values that are not numbers ('forty', 'n/a?', 2 rows)",
    )


def test_dataset_with_only_a_header(cli, config_path, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("age,city,bought\n")
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path), f"dataset '{path}' has no rows")


def test_dicts_in_a_jsonl_column_a_scalar_feature_reads(cli, config_path, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps({"age": 30 + i, "city": {"name": "Oslo"}, "bought": "yes"}) for i in range(6)))
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path),
                           "input feature 'city' (category): column 'city' has Arrow type struct<name: string>",
                           "Point the feature at a scalar column, or flatten this one first")


def test_lists_and_text_in_one_json_column(cli, config_path, tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"age": 30 + i, "city": ["Oslo"] if i % 2 else "Lima", "bought": "no"} for i in range(6)]))
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", path),
                           f"column 'city' of {str(path)!r} holds values of different kinds that no one column type "
                           f"fits: row 1 holds ['Oslo'], and row 0 holds 'Lima'. Give the column one kind of value")


def test_a_repeated_split_column(cli, write_config, tmp_path, cache_dir):
    config = write_config({**CONFIG, "preprocessing": {"split": {"type": "fixed"}},
                           "backend": {"type": "local", "cache_dir": cache_dir}})
    path = tmp_path / "data.csv"
    path.write_text("age,city,split,bought,split\n" + "31,Oslo,0,yes,0\n45,Lima,2,no,1\n" * 3)
    assert_one_clean_error(cli("preprocess", "--config", config, "--dataset", path),
                           "appear more than once and that the config reads: 'split'")


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_seed_out_of_range(cli, config_path, dataset, seed):
    assert_one_clean_error(cli("preprocess", "--config", config_path, "--dataset", dataset, "--random-seed", seed),
                           f"random_seed {seed}: give a whole number from 0 to 4294967295, such as 42")


def test_split_that_leaves_training_empty(cli, write_config, make_dataset, cache_dir):
    path = write_config({**CONFIG, "preprocessing": {"split": {"type": "fixed"}}, "backend": {"type": "local", "cache_dir": cache_dir}})
    data = make_dataset({**ROWS, "split": [1, 1, 2, 2, 1, 2]})
    assert_one_clean_error(cli("preprocess", "--config", path, "--dataset", data), "the training split is empty", "split 0/3/3")


def test_duplicate_feature_names(cli, write_config):
    path = write_config({**CONFIG, "output_features": [{"name": "age", "type": "binary"}]})
    assert_one_clean_error(cli("validate", "--config", path), "feature names must be unique; repeated: age")


def test_output_feature_of_an_input_only_type(cli, write_config):
    path = write_config({**CONFIG, "output_features": [{"name": "bought", "type": "date"}]})
    assert_one_clean_error(cli("validate", "--config", path), "output_features[0].type: 'date' is an input-only feature type")


def test_invalid_yaml_names_the_line(cli, write_config):
    path = write_config("input_features:\n  - name: age\n    type: number\noutput_features: [\n  {name: bought\n")
    err = assert_one_clean_error(cli("validate", "--config", path), "invalid YAML at line")
    assert "at line 6" in err


def test_unknown_config_key_suggests_the_right_one(cli, write_config):
    path = write_config({**CONFIG, "trainer": {"lerning_rate": 0.1}})
    assert_one_clean_error(cli("validate", "--config", path), "trainer.lerning_rate: unknown field; did you mean learning_rate?")


@pytest.mark.parametrize("section,path", [
    ({"input_features": [{"name": "age", "type": "number",
                          "encoder": {"type": "dense", "norm": "batch", "norm_params": {"epsilon": 0.01}}},
                         CONFIG["input_features"][1]]},
     "input_features[0].encoder.norm_params"),
    ({"combiner": {"type": "concat", "norm": "batch", "norm_params": {"epsilon": 0.01}}}, "combiner.norm_params"),
    ({"output_features": [{"name": "bought", "type": "binary",
                           "decoder": {"num_fc_layers": 1, "fc_norm": "batch", "fc_norm_params": {"epsilon": 0.01}}}]},
     "output_features[0].decoder.fc_norm_params"),
])
def test_a_wrong_norm_parameter_is_one_error_naming_it_and_the_valid_ones(cli, write_config, section, path):
    """Encoders', combiners' and decoders' norm_params are checked alike (ghost norm's epsilon is
    batch norm's eps), rather than failing inside torch when the model is built."""
    config = write_config({**CONFIG, **section})
    assert_one_clean_error(cli("validate", "--config", config),
                           f"{path}: got {{'epsilon': 0.01}}; batch norm takes affine, eps, momentum, "
                           f"track_running_stats, not epsilon")


def test_missing_config_file(cli, tmp_path):
    path = tmp_path / "nope.yaml"
    assert_one_clean_error(cli("validate", "--config", path), f"config file '{path}' does not exist")


def test_several_config_problems_are_listed_in_one_message(cli, write_config):
    path = write_config({**CONFIG, "trainer": {"lerning_rate": 0.1, "batch_size": "big"}})
    err = assert_one_clean_error(cli("validate", "--config", path), "invalid config (2 problems):")
    assert "  trainer.lerning_rate:" in err and "  trainer.batch_size:" in err


@pytest.mark.parametrize("backend,launcher", [("horovod", "horovodrun -np 2"), ("deepspeed", "deepspeed --num_gpus 2"),
                                              ("torchrun", "torchrun --nproc-per-node 2")])
def test_a_launcher_backend_outside_its_launcher_says_how_to_launch(cli, config_path, dataset, backend, launcher):
    err = assert_one_clean_error(cli("train", "--config", config_path, "--dataset", dataset, "--backend", backend),
                                 f"backend.type {backend} runs under its launcher")
    assert launcher in err


def test_real_command_exits_2_without_a_traceback(config_path, tmp_path):
    plait = Path(sys.executable).with_name("plait")
    executable = str(plait) if plait.exists() else shutil.which("plait")
    assert executable, "the plait console script is not installed"
    result = subprocess.run(
        [executable, "preprocess", "--config", config_path, "--dataset", str(tmp_path / "missing.csv")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"plait: error: dataset '{tmp_path / 'missing.csv'}' does not exist\n"
