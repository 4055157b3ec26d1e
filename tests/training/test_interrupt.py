"""Ctrl-C during training: a request every worker honours at the same step (one worker here; a
real two-process group in strategies/test_interrupt.py)."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from plait.api import Model
from plait.training.interrupt import StopRequest
from plait.training.trainer import Trainer, TrainingInterrupted


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own Ctrl-C handler (raises KeyboardInterrupt) for each test, whatever earlier
    tests in this process installed, and theirs back after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_the_first_ctrl_c_is_a_request_and_the_second_interrupts_at_once():
    before = signal.getsignal(signal.SIGINT)
    stop = StopRequest()
    with stop.on_sigint():
        _ctrl_c()
        assert stop.requested and not stop.agreed
        assert signal.getsignal(signal.SIGINT) is before
        with pytest.raises(KeyboardInterrupt):
            _ctrl_c()
    assert signal.getsignal(signal.SIGINT) is before


def test_the_previous_handler_comes_back_when_nobody_pressed_ctrl_c():
    before = signal.getsignal(signal.SIGINT)
    stop = StopRequest()
    with stop.on_sigint():
        assert signal.getsignal(signal.SIGINT) == stop._on_sigint
    assert signal.getsignal(signal.SIGINT) is before and not stop.requested


def test_outside_the_main_thread_no_handler_is_installed():
    seen = []

    def train():
        with StopRequest().on_sigint():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGINT)]


def _ctrl_c_during_step(monkeypatch, at: int, times: int = 1) -> None:
    original, calls = Trainer._train_step, {"n": 0}

    def train_step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == at:
            for _ in range(times):
                _ctrl_c()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "_train_step", train_step)


def test_ctrl_c_finishes_the_step_saves_a_checkpoint_and_says_how_to_resume(train_config, tabular_df, tmp_path, monkeypatch):
    run, before = tmp_path / "run", signal.getsignal(signal.SIGINT)
    _ctrl_c_during_step(monkeypatch, at=12)  # 9 batches per epoch: in the second epoch
    with pytest.raises(TrainingInterrupted, match=rf"interrupted at step 12; .*--resume {run}") as info:
        Model(train_config(epochs=3)).train(dataset=tabular_df, run_dir=run, progress_bar=False)
    assert info.value.exit_code == 130
    state = json.loads((run / "checkpoints" / "step-000000012" / "state.json").read_text())
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 3)
    assert json.loads((run / "checkpoints" / "latest.json").read_text())["step"] == 12
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_ctrl_c_aborts_without_a_checkpoint(train_config, tabular_df, tmp_path, monkeypatch):
    run = tmp_path / "run"
    _ctrl_c_during_step(monkeypatch, at=12, times=2)
    with pytest.raises(TrainingInterrupted, match=r"aborted at step 11 by a second interrupt; no checkpoint saved") as info:
        Model(train_config(epochs=3)).train(dataset=tabular_df, run_dir=run, progress_bar=False)
    assert "The last good checkpoint is" in str(info.value) and f"--resume {run}" in str(info.value)
    assert json.loads((run / "checkpoints" / "latest.json").read_text())["step"] == 9  # the first epoch's


def test_a_checkpoint_asked_for_mid_epoch_is_saved_and_training_goes_on(train_config, tabular_df, tmp_path, caplog):
    """What a preemption notice does (plait.backends.ray.preemption): a watcher asks for a
    checkpoint; it is saved at the next optimizer step, mid-epoch, and the run finishes."""
    import contextlib
    import logging

    from plait.training.run import FitJob, fit
    from plait.training.strategies.local import LocalStrategy

    model = Model(train_config(epochs=2, batch_size=8, early_stop=-1))
    data = model.preprocess(tabular_df)
    metadata = {"features": data.metadata["features"], "splits": data.metadata["splits"], "seed": 42}
    job = FitJob(model.config, metadata, data, 42, run_dir=tmp_path / "run", progress_bar=False)
    strategy, steps, requests = LocalStrategy(), [], {}
    step = strategy.optimizer_step

    def step_then_ask_at_the_third(*args, **kwargs):  # the watcher thread's part, at a known step
        steps.append(1)
        if len(steps) == 3:
            requests["stop"].checkpoint_requested = True
        return step(*args, **kwargs)

    @contextlib.contextmanager
    def watch(stop):
        requests["stop"] = stop
        yield

    strategy.optimizer_step = step_then_ask_at_the_third
    with caplog.at_level(logging.INFO, logger="plait"):
        output = fit(job, strategy, watch=watch)
    assert "A checkpoint was asked for at step 3 (a node is about to go): saving it." in caplog.text
    assert [record["epoch"] for record in output.history] == [1, 2]
    assert len(steps) == 2 * -(-data.rows("training") // 8)  # nothing skipped, nothing repeated
