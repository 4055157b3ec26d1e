"""evaluate and predict through the CLI on data unlike the training data: labels never seen in
training, binary labels spelled another way, infinite numbers, inputs without rows. Each is
either answered right and said (a warning with a count) or refused in one line; never silent."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cli_runs import train_with_the_cli
from plait.cli import main

ROWS = 80
TRAINER = {"epochs": 2, "batch_size": 16, "learning_rate": 0.05}


def _frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=rows)
    return pd.DataFrame({"x": x, "c": rng.choice(["a", "b"], rows), "y": (x > 0).astype(int),
                         "k": np.where(x > 0.5, "p", np.where(x < -0.5, "q", "r"))})


@pytest.fixture(autouse=True)
def plait_logger_restored():
    """main() points the plait logger at the stderr of the moment; put it back afterwards."""
    logger = logging.getLogger("plait")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A model trained on y (binary, spelled 0/1) and k (category p, q, r) from x and c."""
    root = tmp_path_factory.mktemp("unusual")
    _frame(ROWS, 0).to_csv(root / "data.csv", index=False)
    inputs = [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]
    outputs = [{"name": "y", "type": "binary"}, {"name": "k", "type": "category"}]
    return train_with_the_cli(root, inputs, outputs, TRAINER) / "model"


def evaluate(cli, model, frame, tmp_path, name="eval.csv"):
    frame.to_csv(tmp_path / name, index=False)
    return cli("evaluate", "-m", model, "--dataset", tmp_path / name, "--output-directory", tmp_path / "eval")


def assert_one_clean_error(result, *fragments):
    code, out, err = result
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith("plait: error: ") and err.count("plait: error:") == 1 and len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


# ---- labels never seen in training -------------------------------------------------------------

def test_unseen_category_labels_count_as_wrong_with_a_warning_and_a_count(cli, model, tmp_path):
    frame = _frame(40, 1)
    frame.loc[:9, "k"] = "zzz"
    code, out, err = evaluate(cli, model, frame.iloc[10:], tmp_path, "known.csv")
    assert code == 0, err
    known = json.loads(out)["k"]
    assert "unseen_labels" not in known and "never seen" not in err
    code, out, err = evaluate(cli, model, frame, tmp_path, "unseen.csv")
    assert code == 0, err
    metrics = json.loads(out)["k"]
    assert metrics["unseen_labels"] == 10
    assert "k: 10 of 40 evaluated rows have a label never seen in training; they count as wrong" in err
    # The 10 unseen rows are misses: the 30 known rows' hits over all 40 rows.
    assert metrics["accuracy"] == pytest.approx(known["accuracy"] * 30 / 40, abs=1e-12)
    assert metrics["loss"] == pytest.approx(known["loss"], rel=1e-9)  # the loss covers the known rows


def test_all_labels_unseen_give_zero_accuracy_rather_than_no_metrics(cli, model, tmp_path):
    frame = _frame(12, 2).assign(k="zzz")
    code, out, err = evaluate(cli, model, frame, tmp_path)
    assert code == 0, err
    metrics = json.loads(out)["k"]
    assert (metrics["accuracy"], metrics["hits_at_k"], metrics["unseen_labels"]) == (0.0, 0.0, 12.0)
    assert "k: 12 of 12 evaluated rows have a label never seen in training" in err


@pytest.fixture(scope="module")
def set_model(tmp_path_factory):
    """A model trained on s, a set output whose every training row is {a, b}."""
    root = tmp_path_factory.mktemp("unusual_set")
    _frame(ROWS, 0)[["x"]].assign(s="a b").to_csv(root / "data.csv", index=False)
    outputs = [{"name": "s", "type": "set"}]
    return train_with_the_cli(root, [{"name": "x", "type": "number"}], outputs, TRAINER) / "model"


def test_unseen_set_items_count_as_missed_with_a_warning_and_a_count(cli, set_model, tmp_path):
    frame = _frame(20, 1)[["x"]]
    code, out, err = evaluate(cli, set_model, frame.assign(s="a"), tmp_path, "known.csv")
    assert code == 0, err
    known = json.loads(out)["s"]
    assert "unseen_labels" not in known and "never seen" not in err
    code, out, err = evaluate(cli, set_model, frame.assign(s="a z"), tmp_path, "unseen.csv")
    assert code == 0, err
    metrics = json.loads(out)["s"]
    assert metrics["unseen_labels"] == 20  # rows whose set holds an unseen item
    assert "s: 20 of 20 evaluated rows have set items never seen in training; each counts as missed" in err
    # Each row holds a (seen) and z (never seen, so never predicted): z doubles the items to find.
    assert known["recall"] > 0 and metrics["recall"] == pytest.approx(known["recall"] / 2, abs=1e-12)
    assert metrics["precision"] == known["precision"]
    assert metrics["loss"] == pytest.approx(known["loss"], rel=1e-9)  # the loss covers the seen items


# ---- binary labels spelled another way ---------------------------------------------------------

@pytest.mark.parametrize("spelling", [("yes", "no"), ("True", "False"), ("t", "f"), ("Y", "N")])
def test_binary_labels_spelled_otherwise_score_as_the_trained_spelling(spelling, cli, model, tmp_path):
    frame = _frame(40, 3)
    code, out, err = evaluate(cli, model, frame, tmp_path, "ones.csv")
    assert code == 0, err
    as_trained = json.loads(out)["y"]
    spelled = frame.assign(y=np.where(frame.y == 1, spelling[0], spelling[1]))
    code, out, err = evaluate(cli, model, spelled, tmp_path, "words.csv")
    assert code == 0, err
    assert json.loads(out)["y"] == as_trained


def test_binary_labels_that_match_no_spelling_are_refused(cli, model, tmp_path):
    frame = _frame(10, 4).assign(y=["maybe", "1", "0", "perhaps", "1", "0", "1", "0", "1", "0"])
    assert_one_clean_error(evaluate(cli, model, frame, tmp_path), "binary feature 'y': column 'y' has 'maybe', "
                           "'perhaps', which is neither a label of the training data ('0', '1') nor a boolean word")


# ---- infinite numbers at prediction ------------------------------------------------------------

def test_infinite_inputs_are_predicted_as_missing_values_with_finite_probabilities(cli, model, tmp_path):
    pd.DataFrame({"x": [float("inf"), float("-inf"), None, 0.0], "c": ["a"] * 4}).to_csv(tmp_path / "new.csv", index=False)
    code, out, err = cli("predict", "-m", model, "--dataset", tmp_path / "new.csv", "--output-directory", tmp_path)
    assert code == 0, err
    predictions = pq.read_table(tmp_path / "predictions.parquet").to_pandas()
    probabilities = predictions.filter(like="probabilit").to_numpy().ravel()
    assert len(predictions) == 4 and all(math.isfinite(p) for p in probabilities)
    # Missing under the default strategy (fill_with_const 0.0): all four rows are the same input.
    assert predictions.drop_duplicates().shape[0] == 1


# ---- inputs without rows -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["empty.csv", "empty.parquet"])
def test_predict_on_an_input_without_rows_writes_an_empty_file_with_the_usual_columns(name, cli, model, tmp_path):
    new = _frame(5, 5).drop(columns=["y", "k"])
    new.to_csv(tmp_path / "some.csv", index=False)
    code, out, err = cli("predict", "-m", model, "--dataset", tmp_path / "some.csv", "--output-directory", tmp_path / "some")
    assert code == 0, err
    usual = pq.read_table(tmp_path / "some" / "predictions.parquet").schema
    empty = tmp_path / name
    new.head(0).to_csv(empty, index=False) if name.endswith(".csv") else new.head(0).to_parquet(empty, index=False)
    old = tmp_path / "some" / "predictions.parquet"  # an earlier answer, in the same place
    code, out, err = cli("predict", "-m", model, "--dataset", empty, "--output-directory", tmp_path / "some")
    assert code == 0, err
    assert json.loads(out) == {"predictions": str(old), "rows": 0}
    written = pq.read_table(old)
    assert written.num_rows == 0 and written.schema.equals(usual)
