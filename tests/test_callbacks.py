"""Callbacks with Ludwig's hook names, called on the coordinator (on Ray: see
tests/backends/test_ray_training.py, whose two-worker run records them too)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plait import Model
from plait.callbacks import Callback
from plait.errors import UsageError
from recorder import Recorder  # tests/recorder.py


def small_frame(rows: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    return pd.DataFrame({"x": x, "y": np.where(x > 0, "pos", "neg")})


@pytest.fixture
def recorded_run(make_config, tmp_path):
    recorder = Recorder()
    config = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "category"}],
                         trainer={"epochs": 2, "batch_size": 32})
    model = Model(config, callbacks=[recorder])
    result = model.train(dataset=small_frame(), run_dir=tmp_path / "run", progress_bar=False)
    statistics = model.evaluate_preprocessed(result.preprocessed, "test")
    model.close()
    model.close()  # once only
    return recorder, result, statistics


def test_the_hooks_come_in_ludwigs_order_with_the_runs_values(recorded_run, tmp_path):
    recorder, result, statistics = recorded_run
    epoch = ["on_epoch_start", "on_epoch_end", "on_eval_start", "on_save_best_checkpoint", "on_eval_end"]
    assert recorder.hooks() == ["on_train_init", "on_preprocess_start", "on_preprocess_end", "on_train_start",
                                *epoch, *epoch, "on_train_end", "on_evaluation_start", "on_evaluation_end",
                                "on_ludwig_end"]
    calls = dict(recorder.calls)  # the last call of each hook
    assert calls["on_train_init"]["run_directory"] == str(tmp_path / "run") and calls["on_train_init"]["resume"] is False
    assert calls["on_train_start"]["config"]["trainer"]["epochs"] == 2
    assert sum(calls["on_preprocess_end"]["rows"].values()) == 200
    records = [arguments["record"] for name, arguments in recorder.calls if name == "on_eval_end"]
    assert records == result.training_statistics
    assert calls["on_epoch_end"]["epoch"] == 2 and calls["on_epoch_end"]["speed"]["rows_per_s"] > 0
    assert calls["on_train_end"]["training_statistics"] == result.ludwig_statistics()
    assert calls["on_evaluation_end"] == {"split": "test", "statistics": statistics}


def test_a_ludwig_hook_plait_never_calls_is_refused_when_the_model_is_made(make_config):
    class PerBatch(Callback):
        def on_batch_end(self, trainer, progress_tracker, save_path, **kwargs):
            pass

    config = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "category"}])
    with pytest.raises(UsageError, match="PerBatch.on_batch_end: plait does not call .* use on_eval_end"):
        Model(config, callbacks=[PerBatch()])


def test_a_callback_that_raises_stops_the_run(make_config):
    class Broken(Callback):
        def on_eval_end(self, record, **kwargs):
            raise RuntimeError("tracker down")

    config = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "category"}], trainer={"epochs": 2})
    with pytest.raises(RuntimeError, match="tracker down"):
        Model(config, callbacks=[Broken()]).train(dataset=small_frame(), progress_bar=False)
