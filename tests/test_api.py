"""The Python API: train on a DataFrame, predict, evaluate, save and load."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from plait.api import Model
from plait.errors import DataError, ModelError, UsageError
from same_statistics import assert_same_statistics  # tests/same_statistics.py


def _frame(rows=300, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.normal(size=rows), "x2": rng.normal(size=rows),
                       "c": rng.choice(["red", "green", "blue"], rows)})
    df["y"] = df.x1 + df.x2 > 0
    df["kind"] = np.where(df.x1 > 0.5, "high", np.where(df.x1 < -0.5, "low", "mid"))
    return df


@pytest.fixture(scope="module")
def frame():
    return _frame()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, frame):
    """A model with a binary and a category output, trained once for this module."""
    config = {
        "input_features": [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"},
                           {"name": "c", "type": "category"}],
        "output_features": [{"name": "y", "type": "binary"}, {"name": "kind", "type": "category"}],
        "trainer": {"epochs": 8, "batch_size": 32, "learning_rate": 0.01},
        "backend": {"type": "local", "cache_dir": str(tmp_path_factory.mktemp("cache"))},
    }
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    return model


def test_predict_gives_labels_and_probabilities_for_every_row(trained, frame):
    new = frame.drop(columns=["y", "kind"])
    predictions = trained.predict(new)
    assert isinstance(predictions, pd.DataFrame) and len(predictions) == len(new)
    assert {"y_predictions", "y_probability", "y_probabilities_False", "y_probabilities_True",
            "kind_predictions", "kind_probability", "kind_probabilities_high", "kind_probabilities_low",
            "kind_probabilities_mid"} <= set(predictions.columns)
    assert predictions.y_predictions.dtype == bool
    assert (predictions.y_predictions == frame.y).mean() > 0.9
    assert set(predictions.kind_predictions) <= {"high", "low", "mid"}
    assert (predictions.kind_predictions == frame.kind).mean() > 0.8
    kind_columns = [c for c in predictions.columns if c.startswith("kind_probabilities_")]
    np.testing.assert_allclose(predictions[kind_columns].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(predictions.y_probabilities_True + predictions.y_probabilities_False, 1.0, rtol=1e-6)
    # the probability of the predicted label
    np.testing.assert_allclose(predictions.y_probability,
                               np.where(predictions.y_predictions, predictions.y_probabilities_True,
                                        predictions.y_probabilities_False), rtol=1e-6)


def test_predict_ignores_output_columns_when_present(trained, frame):
    pd.testing.assert_frame_equal(trained.predict(frame), trained.predict(frame.drop(columns=["y", "kind"])))


def test_predict_accepts_a_file(trained, frame, tmp_path):
    path = tmp_path / "new.parquet"
    frame.drop(columns=["y", "kind"]).to_parquet(path)
    pd.testing.assert_frame_equal(trained.predict(str(path)), trained.predict(frame))


def test_saved_model_loads_with_identical_predictions(trained, frame, tmp_path):
    path = trained.save(tmp_path / "model")
    loaded = Model.load(path)
    pd.testing.assert_frame_equal(loaded.predict(frame), trained.predict(frame), check_exact=True)
    assert loaded.evaluate(frame) == trained.evaluate(frame)


def test_saved_model_is_json_and_safetensors_only(trained, tmp_path):
    path = trained.save(tmp_path / "model")
    files = sorted(p.name for p in path.iterdir())
    assert files == ["model_hyperparameters.json", "model_weights.safetensors", "plait_model.json",
                     "training_set_metadata.json"]
    for f in path.iterdir():
        head = f.read_bytes()[:2]
        assert head != b"\x80\x04" and head[:1] != b"\x80" and not head.startswith(b"PK")  # no pickle, no torch zip
    description = json.loads((path / "plait_model.json").read_text())
    assert description["format_version"] == 3 and "plait_version" in description
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_saving_over_an_existing_model_replaces_it(trained, frame, tmp_path):
    path = tmp_path / "model"
    trained.save(path)
    (path / "stale.txt").write_text("old")
    trained.save(path)
    assert not (path / "stale.txt").exists()
    pd.testing.assert_frame_equal(Model.load(path).predict(frame), trained.predict(frame))


def test_saved_model_can_be_moved(trained, frame, tmp_path):
    trained.save(tmp_path / "a" / "model")
    (tmp_path / "a" / "model").rename(tmp_path / "moved")
    pd.testing.assert_frame_equal(Model.load(tmp_path / "moved").predict(frame), trained.predict(frame))


def test_evaluate_returns_metrics_per_output(trained, frame):
    metrics = trained.evaluate(frame)
    assert set(metrics) == {"y", "kind", "combined"}
    assert metrics["y"]["accuracy"] > 0.9 and 0 <= metrics["y"]["roc_auc"] <= 1
    assert {"accuracy", "hits_at_k", "f1"} <= set(metrics["kind"])
    assert metrics["combined"]["loss"] == pytest.approx(metrics["y"]["loss"] + metrics["kind"]["loss"])


def test_evaluate_skips_rows_without_a_target(trained, frame):
    with_missing = frame.astype({"y": object})
    with_missing.loc[:49, "y"] = None
    full = trained.evaluate(frame.iloc[50:])
    assert_same_statistics(trained.evaluate(with_missing)["y"], full["y"])


def test_evaluate_needs_the_output_columns(trained, frame):
    with pytest.raises(DataError, match="'kind'"):
        trained.evaluate(frame.drop(columns=["kind"]))


def test_predicting_data_without_an_input_column_names_the_column(trained, frame):
    with pytest.raises(DataError) as info:
        trained.predict(frame.drop(columns=["x2"]))
    message = str(info.value)
    assert "'x2'" in message and "x1" in message  # names the missing column and lists those present


def test_an_untrained_model_cannot_predict(frame):
    model = Model({"input_features": [{"name": "x1", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]})
    with pytest.raises(ModelError, match="not trained"):
        model.predict(frame)


# ---- wrong arguments and odd DataFrames: a plait error naming them ------------------------------

SMALL = {"input_features": [{"name": "x1", "type": "number"}, {"name": "c", "type": "category"}],
         "output_features": [{"name": "y", "type": "binary"}], "trainer": {"epochs": 1, "batch_size": 16}}


@pytest.fixture
def small(tmp_path):
    return {**SMALL, "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}


@pytest.mark.parametrize("seed", ["x", 1.5, None, True, -1, 2**32])
def test_a_random_seed_that_is_not_a_seed_is_named(small, frame, seed):
    with pytest.raises(UsageError, match=rf"random_seed {re.escape(repr(seed))}: give a whole number from 0 to "
                                         rf"4294967295, such as 42"):
        Model(small).train(dataset=frame, random_seed=seed, progress_bar=False)


def test_arguments_of_the_wrong_kind_are_named(trained, frame, small, tmp_path):
    for call, message in [
        (lambda: trained.evaluate(frame, split="tests"), "split 'tests': give one of training, validation, test"),
        (lambda: trained.evaluate(frame, split="test", random_seed="1"), "random_seed '1'"),
        (lambda: trained.save(5), "path 5: give a folder's path or an fsspec URL"),
        (lambda: Model.load(None), "path None: give a folder's path"),
        (lambda: trained.write_predictions(frame, 7), "output_directory 7: give a folder's path"),
        (lambda: trained.write_predictions(frame, tmp_path, output_format="xlsx"), "output_format 'xlsx': give parquet or csv"),
        (lambda: Model(small).train(dataset=frame, run_dir=3.0, progress_bar=False), "run_dir 3.0: give a folder's path"),
    ]:
        with pytest.raises(UsageError, match=re.escape(message)):
            call()


ODD_FRAMES = {
    "rows but no columns": (pd.DataFrame(index=range(5)), "the DataFrame has 5 row(s) but no columns"),
    "a repeated column": (pd.DataFrame([[0.5, 0.1, "a", True]] * 20, columns=["x1", "x1", "c", "y"]),
                          "the dataset has 1 column name(s) that appear more than once and that the config reads: 'x1'"),
    "dicts": (pd.DataFrame({"x1": 0.5, "c": [{"k": 1}] * 20, "y": True}),
              "input feature 'c' (category): column 'c' has Arrow type struct<k: int64>, but a category feature reads "
              "one value per cell"),
    "lists": (pd.DataFrame({"x1": [[1.0, 2.0]] * 20, "c": "a", "y": True}),
              "input feature 'x1' (number): column 'x1' has Arrow type list<item: double>"),
    "lists and text": (pd.DataFrame({"x1": 0.5, "c": [["a"], "b"] * 10, "y": True}),
                       "column 'c' of the DataFrame holds values of different kinds that no one column type fits: "
                       "row 0 holds ['a'], and row 1 holds 'b'"),
    "dicts and lists": (pd.DataFrame({"x1": 0.5, "c": [{"k": 1}, [1]] * 10, "y": True}),
                        "column 'c' of the DataFrame holds values of different kinds"),
    "a missing column": (pd.DataFrame({"x1": [0.5] * 20, "y": True}), "the dataset has no column 'c' (for input "
                                                                     "feature 'c'). Its columns are: x1, y"),
}


@pytest.mark.parametrize("odd", list(ODD_FRAMES))
def test_an_odd_dataframe_is_a_data_error_naming_the_column(small, odd):
    data, message = ODD_FRAMES[odd]
    with pytest.raises(DataError, match=re.escape(message)):
        Model(small).train(dataset=data, progress_bar=False)


@pytest.mark.parametrize("data, message", [
    (pd.DataFrame(index=range(3)), "the DataFrame has 3 row(s) but no columns"),
    (pd.DataFrame([[0.5, 0.5, 0.1, "a"]], columns=["x1", "x1", "x2", "c"]),
     "the data has 1 column name(s) that appear more than once and that the config reads: 'x1'"),
    (pd.DataFrame({"x1": 0.5, "x2": 0.5, "c": [{"k": 1}]}), "input feature 'c' (category): column 'c' has Arrow type"),
    (pd.DataFrame({"x1": 0.5, "x2": 0.5, "c": [["a"], "b"]}), "column 'c' of the DataFrame holds values of different kinds"),
])
def test_predicting_on_an_odd_dataframe_is_a_data_error(trained, data, message):
    with pytest.raises(DataError, match=re.escape(message)):
        trained.predict(data)


def test_training_twice_gives_a_whole_model_each_time_and_the_first_saved_still_loads(small, frame, tmp_path):
    model = Model(small)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    first = model.predict(frame)
    model.save(tmp_path / "first")
    model.train(dataset=frame.iloc[:200], random_seed=2, progress_bar=False)
    fresh = Model(small)
    fresh.train(dataset=frame.iloc[:200], random_seed=2, progress_bar=False)
    np.testing.assert_allclose(model.predict(frame).y_probability, fresh.predict(frame).y_probability, rtol=1e-6)
    np.testing.assert_allclose(Model.load(tmp_path / "first").predict(frame).y_probability, first.y_probability,
                               rtol=1e-6)


# ---- loading what is not a model ---------------------------------------------------------------

def test_loading_a_directory_that_is_not_a_model_says_so(tmp_path):
    (tmp_path / "something.txt").write_text("hi")
    with pytest.raises(ModelError, match=r"is not a plait model.*plait_model\.json"):
        Model.load(tmp_path)


def test_loading_a_missing_path_says_so(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        Model.load(tmp_path / "nope")


def test_loading_a_run_directory_points_to_its_model_folder(trained, tmp_path):
    run = tmp_path / "experiment_run_0"
    trained.save(run / "model")
    with pytest.raises(ModelError, match="use its model/ folder"):
        Model.load(run)


def test_loading_a_newer_model_format_is_a_clear_error(trained, tmp_path):
    path = trained.save(tmp_path / "model")
    description = json.loads((path / "plait_model.json").read_text())
    (path / "plait_model.json").write_text(json.dumps({**description, "format_version": 999}))
    with pytest.raises(ModelError) as info:
        Model.load(path)
    message = str(info.value)
    assert "format version 999" in message and "reads version 3" in message and "retrain" in message


def test_loading_a_model_with_missing_weights_is_a_clear_error(trained, tmp_path):
    path = trained.save(tmp_path / "model")
    (path / "model_weights.safetensors").unlink()
    with pytest.raises(ModelError, match="incomplete or damaged"):
        Model.load(path)


def test_loading_weights_that_do_not_fit_the_config_is_a_clear_error(trained, tmp_path):
    path = trained.save(tmp_path / "model")
    config = json.loads((path / "model_hyperparameters.json").read_text())
    config["combiner"]["output_size"] = 7
    (path / "model_hyperparameters.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="do not fit its config"):
        Model.load(path)


# ---- other outputs -----------------------------------------------------------------------------

def test_number_and_set_outputs_predict_in_data_terms(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    df["amount"] = 1000 + 100 * df.a
    df["tags"] = [" ".join(t for t, on in (("pos_a", a > 0), ("pos_b", b > 0)) if on) for a, b in zip(df.a, df.b)]
    config = {
        "input_features": [{"name": "a", "type": "number"}, {"name": "b", "type": "number"}],
        "output_features": [{"name": "amount", "type": "number"}, {"name": "tags", "type": "set"}],
        "trainer": {"epochs": 8, "batch_size": 32, "learning_rate": 0.01},
        "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
    }
    model = Model(config)
    model.train(dataset=df, progress_bar=False)
    predictions = model.predict(df[["a", "b"]])
    assert np.abs(predictions.amount_predictions - df.amount).mean() < 40  # in the target's units
    assert {"tags_probabilities_pos_a", "tags_probabilities_pos_b"} <= set(predictions.columns)
    predicted_sets = [set(p) for p in predictions.tags_predictions]
    actual_sets = [set(t.split()) for t in df.tags]
    assert np.mean([p == a for p, a in zip(predicted_sets, actual_sets)]) > 0.7
    metrics = model.evaluate(df)
    assert metrics["amount"]["r2"] > 0.8 and metrics["tags"]["jaccard"] > 0.7


def test_predict_on_a_frame_without_rows_gives_the_predictions_columns(tmp_path):
    import pandas as pd

    rows = pd.DataFrame({"x": [float(i) for i in range(60)], "y": [i % 2 for i in range(60)]})
    model = Model({"input_features": [{"name": "x", "type": "number"}],
                   "output_features": [{"name": "y", "type": "binary"}],
                   "trainer": {"epochs": 1}, "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}})
    model.train(dataset=rows, progress_bar=False)
    empty = rows.iloc[:0].astype({"x": "str"})
    predictions = model.predict(empty)
    assert len(predictions) == 0
    assert list(predictions.columns) == list(model.predict(rows.head(3)).columns)
