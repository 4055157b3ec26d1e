"""Ludwig configs run unchanged: every config in tests/ludwig_configs/ (written the way Ludwig's
documentation and examples write them; tests/ludwig_configs/README.md says where each comes from)
and every config Ludwig 0.17.8 rendered in tests/ludwig_rendered/ validates through the CLI, then
trains two epochs on data synthesized for it and predicts, locally, and those of RAY_CONFIGS on the
shared Ray cluster too.

Only what a test must is overridden: the number of epochs (two, written where the config keeps
them: `trainer`, or the pre-0.5 `training`), and the backend (local, or Ray with the config's own
Ray settings) with its cache in tmp_path. Batch sizes, learning rates and model sizes stay as the
config says; a few hundred rows keep even the large ones quick.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from plait import Model
from plait.cli import main

HERE = Path(__file__).parent
CONFIGS = sorted((HERE / "ludwig_configs").glob("*.yaml"))
RENDERED = sorted((HERE / "ludwig_rendered").glob("*.json"))
ALL_CONFIGS = CONFIGS + RENDERED
LLM_CONFIGS = [path for path in ALL_CONFIGS if path.suffix == ".json" and '"model_type": "llm"' in path.read_text()]
"""Rendered LLM configs: they name a base model folder of Ludwig's machine, so they train on a
tiny Llama written here instead (``test_a_rendered_llm_config_fine_tunes_and_predicts``)."""
ECD_CONFIGS = [path for path in ALL_CONFIGS if path not in LLM_CONFIGS]
RAY_CONFIGS = [path for path in ALL_CONFIGS if path.name.startswith("backend_")
               and path.name != "backend_ray_strategy_auto.yaml"]
"""The configs that also train on Ray: every Ray backend section (but ``strategy: auto``, which
the config resolves to ``ddp`` before any backend sees it, tests/config/test_backend_config.py:
its run would repeat backend_ray_dask_ddp's). Each Ray run costs 10-30 s of worker-group start
whatever the data, and the suite has a time budget, so the rest run locally only: TabNet (its
ghost batch norm's buffers are broadcast by DDP, torch's default, which plait leaves on; it ran
on Ray here until the suite's time ran short), the other combiners are modules like these, schedules run the same trainer loop on every backend (and on two gloo workers in
tests/training/strategies/test_schedule_distributed.py), upgrade rules change the config before
any backend sees it, and features, losses and preprocessing are the same code everywhere."""
ROWS = 200
EPOCHS = 2
PREDICTED_ROWS = 20


def read_config(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def output_names(config: dict) -> list[str]:
    return [feature["name"] for feature in config["output_features"]]


def with_test_settings(config: dict, backend: dict) -> dict:
    """The config with two epochs and the given backend section; nothing else changes."""
    config = copy.deepcopy(config)
    section = "training" if "training" in config and "trainer" not in config else "trainer"
    config[section] = {**(config.get(section) or {}), "epochs": EPOCHS}
    config["backend"] = backend
    return config


def ray_backend(config: dict, cache_dir: str) -> dict:
    """The config's own Ray section (processor, strategy, loader) when it has one; else plain Ray."""
    own = config.get("backend") or {}
    section = dict(own) if own.get("type") == "ray" else {"type": "ray"}
    return {**section, "cache_dir": cache_dir}


@pytest.fixture(scope="module")
def datasets():
    """synthesize_dataset(path) -> rows that fit the config, made once per config for the module."""
    from plait.synthesize import synthesize_dataset

    made: dict[Path, object] = {}

    def data_for(path: Path):
        if path not in made:
            made[path] = synthesize_dataset(read_config(path), rows=ROWS, seed=42)
        return made[path]

    return data_for


def train_and_predict(config: dict, data, run_dir: Path) -> None:
    model = Model(config)
    result = model.train(dataset=data, run_dir=run_dir, progress_bar=False)
    assert [record["epoch"] for record in result.training_statistics] == list(range(1, EPOCHS + 1))
    predictions = model.predict(data.head(PREDICTED_ROWS))
    assert len(predictions) == PREDICTED_ROWS
    missing = [name for name in output_names(config) if f"{name}_predictions" not in predictions.columns]
    assert not missing, f"no predictions for {missing}: {list(predictions.columns)}"


def test_the_corpus_holds_at_least_36_configs_and_says_where_each_comes_from():
    readme = (HERE / "ludwig_configs" / "README.md").read_text()
    assert len(CONFIGS) >= 36
    assert [path.name for path in CONFIGS if f"`{path.name}`" not in readme] == []


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda path: path.name)
def test_validates_through_the_cli(path, capsys):
    code = main(["validate", "--config", str(path)])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("path", ECD_CONFIGS, ids=lambda path: path.name)
def test_trains_two_epochs_and_predicts_locally(path, tmp_path, datasets):
    config = with_test_settings(read_config(path), {"type": "local", "cache_dir": str(tmp_path / "cache")})
    train_and_predict(config, datasets(path), tmp_path / "run")


@pytest.mark.parametrize("path", RAY_CONFIGS, ids=lambda path: path.name)
def test_trains_two_epochs_and_predicts_on_ray(path, tmp_path, datasets, ray_cluster):
    original = read_config(path)
    config = with_test_settings(original, ray_backend(original, str(tmp_path / "cache")))
    train_and_predict(config, datasets(path), tmp_path / "run")


@pytest.mark.parametrize("path", LLM_CONFIGS, ids=lambda path: path.name)
def test_a_rendered_llm_config_fine_tunes_and_predicts(path, tmp_path):
    """Every key as Ludwig 0.17.8 rendered it, on a tiny Llama of this machine; the generation is
    cut to a few tokens (Ludwig rendered max_new_tokens from its model's context)."""
    import numpy as np
    import pandas as pd

    from hf_models import write_tiny_llama

    rendered = read_config(path)
    words = [f"w{i}" for i in range(40)]
    rng = np.random.default_rng(0)
    data = pd.DataFrame({feature["column"]: [" ".join(rng.choice(words, 4)) for _ in range(PREDICTED_ROWS)]
                         for feature in rendered["input_features"] + rendered["output_features"]})
    base = write_tiny_llama(tmp_path / "llama", ["###", "Instruction:", "Response:", *words])
    config = {**with_test_settings(rendered, {"type": "local", "cache_dir": str(tmp_path / "cache")}),
              "base_model": str(base), "generation": {**rendered["generation"], "max_new_tokens": 4}}
    train_and_predict(config, data, tmp_path / "run")
