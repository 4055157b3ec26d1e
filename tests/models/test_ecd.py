"""The ECD model keyed by the user's feature names, whatever they are: names torch refuses as module
names ("a.b", "", "items") train, save, load, predict and evaluate under the user's names."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from safetensors import safe_open

from plait.cli import main
from plait.models.ecd import feature_name, module_key

NUMBER, CATEGORY, LABEL = "a.b", "x/y", "naïve name"


def test_module_keys_are_accepted_by_torch_and_one_to_one():
    names = ["a.b", "x/y", "naïve name", "", "items", "training", "_modules", "plain",
             module_key("a.b"), module_key(module_key("a.b"))]
    keys = [module_key(n) for n in names]
    assert len(set(keys)) == len(names)
    assert [feature_name(k) for k in keys] == names
    assert all(k and "." not in k for k in keys)
    assert module_key("plain") == "plain" and module_key("x/y") == "x/y"  # older saved models load


@pytest.fixture
def oddly_named(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({NUMBER: rng.normal(size=80), CATEGORY: rng.choice(["r", "g", "b"], 80)})
    df[LABEL] = (df[NUMBER] > 0) | (df[CATEGORY] == "r")
    df.to_csv(tmp_path / "data.csv", index=False)
    config = {"input_features": [{"name": NUMBER, "type": "number"}, {"name": CATEGORY, "type": "category"}],
              "output_features": [{"name": LABEL, "type": "binary"}],
              "combiner": {"type": "concat", "output_size": 8, "num_fc_layers": 1},
              "trainer": {"epochs": 2, "batch_size": 16},
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
    return tmp_path


def test_feature_names_torch_refuses_train_predict_evaluate_through_the_cli(oddly_named, capsys):
    root = oddly_named
    assert main(["train", "--config", str(root / "config.yaml"), "--dataset", str(root / "data.csv"),
                 "--output-directory", str(root / "runs")]) == 0, capsys.readouterr().err
    model = root / "runs" / "experiment_run_0" / "model"
    with safe_open(str(model / "model_weights.safetensors"), "pt") as weights:
        assert f"heads.{LABEL}.projection.weight" in weights.keys()
        assert f"encoders.{CATEGORY}.embedding.weight" in weights.keys()

    assert main(["predict", "--model-path", str(model), "--dataset", str(root / "data.csv"),
                 "--output-directory", str(root / "pred")]) == 0
    predictions = pq.read_table(root / "pred" / "predictions.parquet")
    assert predictions.num_rows == 80
    assert f"{LABEL}_predictions" in predictions.column_names

    assert main(["evaluate", "--model-path", str(model), "--dataset", str(root / "data.csv"),
                 "--output-directory", str(root / "eval")]) == 0
    statistics = json.loads((root / "eval" / "evaluation_statistics.json").read_text())
    assert set(statistics) >= {LABEL}
    assert 0.0 <= statistics[LABEL]["accuracy"] <= 1.0
