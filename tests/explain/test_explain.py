"""Explanations on a table whose labels depend on two of eight inputs (x0 and the category c0):
integrated gradients and permutation importance both rank those two first, integrated gradients
add up to each row's change of score (completeness), through the Python API and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from relevant_table import RELEVANT, relevant_rows

from plait import Model
from plait.cli import main
from plait.explain.integrated_gradients import ABSOLUTE_FLOOR, TOLERANCE

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    inputs = [{"name": f"x{i}", "type": "number"} for i in range(6)] + [{"name": "c0", "type": "category"},
                                                                      {"name": "c1", "type": "category"}]
    model = Model({"input_features": inputs, "output_features": [{"name": "y", "type": "binary"},
                                                                 {"name": "z", "type": "category"}],
                   "trainer": {"epochs": 8, "batch_size": 64}, "backend": {"type": "local", "cache_dir": str(root / "c")}})
    model.train(dataset=relevant_rows(1000, 0), progress_bar=False, random_seed=1)
    model.save(root / "model")
    return model


def test_integrated_gradients_rank_the_two_relevant_inputs_first(model):
    explanation = model.explain(relevant_rows(200, 5))
    assert set(explanation.summary["ranking"][:2]) == RELEVANT
    assert explanation.summary["output_feature"] == "y" and explanation.summary["baselines"]["c0"] == "the unknown value <UNK>"


def test_integrated_gradients_add_up_to_each_rows_change_of_score(model):
    rows = model.explain(relevant_rows(200, 6), output_feature_name="z").rows
    change = (rows["score"] - rows["baseline_score"]).abs()
    assert (rows["delta"].abs() <= TOLERANCE * change + ABSOLUTE_FLOOR).all()
    attributions = rows[[c for c in rows.columns if c.endswith("_attribution")]].sum(axis=1)
    np.testing.assert_allclose(attributions, rows["score"] - rows["baseline_score"] + rows["delta"], atol=1e-5)


def test_every_class_gives_a_row_per_class_and_input_row(model):
    rows = model.explain(relevant_rows(20, 7), output_feature_name="z", every_class=True).rows
    assert len(rows) == 60 and sorted(rows["class"].unique()) == ["high", "low", "mid"]
    assert rows.groupby("row")["class"].nunique().eq(3).all()


def test_permutation_importance_ranks_the_two_relevant_inputs_first(model):
    summary = model.explain(relevant_rows(400, 8), method="permutation").summary
    assert set(summary["ranking"][:2]) == RELEVANT and summary["metric"] == "loss"
    assert min(summary["importance"][name] for name in RELEVANT) > max(
        summary["importance"][name] for name in summary["importance"] if name not in RELEVANT)


def test_the_cli_writes_the_rows_and_the_summary(model, tmp_path, capsys):
    relevant_rows(50, 9).to_csv(tmp_path / "rows.csv", index=False)
    code = main(["explain", "--model_path", str(model.path), "--dataset", str(tmp_path / "rows.csv"),
                 "--output_directory", str(tmp_path / "out")])
    assert code == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(printed["ranking"][:2]) == RELEVANT
    rows = pd.read_parquet(tmp_path / "out" / "explanations.parquet")
    assert len(rows) == 50 and {"row", "class", "score", "delta", "x0_attribution"} <= set(rows.columns)
    assert json.loads((tmp_path / "out" / "explanation_summary.json").read_text())["method"] == "ig"


@pytest.mark.parametrize("arguments, message", [
    (["--output_feature_name", "nope"], "--output_feature_name 'nope' is not an output of this model"),
    (["--method", "permutation", "--steps", "5"], None),
])
def test_mistakes_are_one_plait_error(model, tmp_path, capsys, arguments, message):
    relevant_rows(30, 10).drop(columns=["y", "z"]).to_csv(tmp_path / "rows.csv", index=False)
    code = main(["explain", "--model_path", str(model.path), "--dataset", str(tmp_path / "rows.csv"),
                 "--output_directory", str(tmp_path / "out"), *arguments])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("plait: error: ") and err.count("\n") == 1
    assert message is None or message in err
