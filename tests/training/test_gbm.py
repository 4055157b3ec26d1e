"""Gradient-boosted trees (``model_type: gbm``): LightGBM trained, evaluated every
``boosting_rounds_per_checkpoint`` rounds with plait's metrics, early-stopped, saved in
safetensors and loaded back, from Python and from the command line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from safetensors import safe_open

import plait
from plait.models.gbm import BOOSTER
from plait.models.saved import WEIGHTS


def _table(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=rows)
    colour = rng.choice(["red", "green", "blue"], size=rows)
    flag = rng.random(rows) < 0.5
    score = 2 * x + np.where(colour == "red", 3.0, 0.0) - flag + rng.normal(scale=0.1, size=rows)
    return pd.DataFrame({"x": x, "colour": colour, "flag": flag, "score": score,
                         "high": score > 1, "band": pd.cut(score, [-np.inf, -1, 1, np.inf], labels=["lo", "mid", "hi"]).astype(str)})


INPUTS = [{"name": "x", "type": "number"}, {"name": "colour", "type": "category"}, {"name": "flag", "type": "binary"}]


@pytest.mark.parametrize("output, metric, bar", [({"name": "high", "type": "binary"}, "accuracy", 0.9),
                                                 ({"name": "band", "type": "category"}, "accuracy", 0.85),
                                                 ({"name": "score", "type": "number"}, "r2", 0.9)])
def test_a_gbm_learns_each_output_type_and_loads_back_the_same(make_config, tmp_path, output, metric, bar):
    config = make_config(INPUTS, [output], model_type="gbm",
                         trainer={"boosting_rounds_per_checkpoint": 10, "num_leaves": 7, "min_data_in_leaf": 5,
                                  # a brisk rate and a cap: Ludwig's 0.03 over 1,000 rounds is the suite's time
                                  "learning_rate": 0.2, "num_boost_round": 100})
    model = plait.Model(config)
    result = model.train(_table())
    history = result.training_statistics
    assert [record["step"] for record in history][:3] == [10, 20, 30]  # an evaluation every 10 rounds
    assert history[0]["validation"][output["name"]][metric] is not None
    test = _table(200, seed=1)
    assert model.evaluate(test)[output["name"]][metric] > bar
    model.save(tmp_path / "model")
    with safe_open(str(tmp_path / "model" / WEIGHTS), "pt") as weights:  # the trees as LightGBM's text, in safetensors
        assert bytes(weights.get_tensor(BOOSTER).numpy()).startswith(b"tree")
    loaded = plait.Model.load(tmp_path / "model")
    pd.testing.assert_frame_equal(loaded.predict(test), model.predict(test))


def test_early_stopping_keeps_the_rounds_of_the_best_evaluation(make_config):
    # A large learning rate on noise over-fits at once: validation loss is best early, and the
    # model keeps those rounds, not the last.
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"x": rng.normal(size=300), "y": rng.random(300) < 0.5})
    config = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "binary"}], model_type="gbm",
                         trainer={"learning_rate": 0.5, "boosting_rounds_per_checkpoint": 5, "early_stop": 2,
                                  "min_data_in_leaf": 2})
    model = plait.Model(config)
    history = model.train(frame).training_statistics
    losses = [record["validation"]["combined"]["loss"] for record in history]
    best = history[int(np.argmin(losses))]["step"]
    assert len(history) == int(np.argmin(losses)) + 3  # two evaluations without improvement, then it stopped
    assert model.module.trees.num_trees() == best


@pytest.mark.parametrize("output, boosting", [({"name": "band", "type": "category"}, "gbdt"),
                                              ({"name": "high", "type": "binary"}, "dart")])
def test_each_evaluation_scores_the_trees_grown_so_far(make_config, output, boosting):
    # Under gbdt an evaluation predicts only the trees grown since the last one and adds their
    # scores; under DART, which scales earlier trees again, every tree predicts. Either way the
    # kept evaluation's validation loss is the kept model's own on those rows.
    frame = _table().assign(split=np.tile([0, 0, 0, 1], 100))
    config = make_config(INPUTS, [output], model_type="gbm", preprocessing={"split": {"type": "fixed"}},
                         trainer={"boosting_rounds_per_checkpoint": 7, "num_leaves": 7, "min_data_in_leaf": 5,
                                  "learning_rate": 0.2, "num_boost_round": 60, "boosting_type": boosting})
    model = plait.Model(config)
    history = model.train(frame).training_statistics
    [kept] = [record for record in history if record["step"] == model.module.trees.current_iteration()]
    evaluated = model.evaluate(frame[frame.split == 1])[output["name"]]["loss"]
    assert kept["validation"][output["name"]]["loss"] == pytest.approx(evaluated, rel=1e-5)


def test_a_date_input_is_read_as_its_nine_numbers_and_a_category_after_it_stays_categorical(make_config):
    rng = np.random.default_rng(4)
    days = pd.Series(pd.date_range("2021-01-01", periods=600, freq="D")).sample(frac=1, random_state=4)
    colour = rng.choice(["red", "green", "blue"], size=600)
    weekend = days.dt.weekday.to_numpy() >= 5
    frame = pd.DataFrame({"day": days.dt.strftime("%Y-%m-%d").to_numpy(), "colour": colour,
                          "y": weekend != (colour == "red")})  # the weekday's and the category's interaction
    config = make_config([{"name": "day", "type": "date"}, {"name": "colour", "type": "category"}],
                         [{"name": "y", "type": "binary"}], model_type="gbm",
                         trainer={"learning_rate": 0.2, "num_boost_round": 100, "boosting_rounds_per_checkpoint": 10,
                                  "min_data_in_leaf": 5})
    model = plait.Model(config)
    model.train(frame.iloc[:450])
    assert model.module.categorical == [9], "the category is the column after the date's nine"
    assert model.evaluate(frame.iloc[450:])["y"]["accuracy"] > 0.95


def test_gbm_settings_and_mistakes_on_the_command_line(make_config, write_config, make_dataset, tmp_path, cli):
    data = make_dataset(_table(200))
    config = make_config(INPUTS, [{"name": "high", "type": "binary"}], model_type="gbm",
                         trainer={"type": "lightgbm_trainer", "boosting_rounds_per_checkpoint": 20})
    code, out, err = cli("experiment", "--config", write_config(config), "--dataset", data,
                         "--output_directory", tmp_path / "results")
    assert code == 0, err
    statistics = json.loads((tmp_path / "results" / "experiment_run_0" / "test_statistics.json").read_text())
    assert statistics["high"]["accuracy"] > 0.8
    mistakes = {"combiner": ({"combiner": {"type": "tabnet"}}, "combiner: a GBM has no combiner"),
                "text": ({"input_features": [*INPUTS, {"name": "note", "type": "text"}]},
                         "input_features[3].type: got 'text'; a GBM takes binary, category, number, date inputs"),
                "encoder": ({"input_features": [{**INPUTS[0], "encoder": {"type": "dense"}}, *INPUTS[1:]]},
                            "input_features[0].encoder: a GBM reads each input as it is"),
                "date encoder": ({"input_features": [*INPUTS, {"name": "day", "type": "date", "encoder": {"type": "wave"}}]},
                                 "input_features[3].encoder: a GBM reads each input as it is"),
                # a default encoder would reach the features too (and a date's would fail the reload)
                "default encoder": ({"defaults": {"date": {"encoder": {"type": "wave"}}}},
                                    "defaults.date.encoder: a GBM reads each input as it is"),
                "ecd trainer": ({"trainer": {"epochs": 3}}, "trainer.epochs: unknown field")}
    for change, expected in mistakes.values():
        code, _, err = cli("validate", "--config", write_config({**config, **change}))
        assert code == 2 and err.startswith("plait: error: invalid config") and "Traceback" not in err, err
        assert expected in err
