"""The training loop end to end on small synthetic data, through ``Model.train``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from plait.api import Model
from plait.errors import ConfigError, ModelError, TrainingError
from plait.training.trainer import Trainer, TrainingInterrupted
from plait.utils.folder import Folder


def _train(config, progress_bar=False, **kwargs):
    model = Model(config)
    result = model.train(progress_bar=progress_bar, **kwargs)
    return model, result


def _test_metrics(model, result):
    return model.evaluate_preprocessed(result.preprocessed, "test")


def _steps(history):
    return [record["step"] for record in history]


# ---- learning simple rules ---------------------------------------------------------------------

def test_learns_a_numeric_rule_to_high_accuracy(train_config, tabular_df):
    model, result = _train(train_config(epochs=8), dataset=tabular_df)
    metrics = _test_metrics(model, result)
    assert metrics["y"]["accuracy"] > 0.9
    assert metrics["y"]["roc_auc"] > 0.95
    losses = [r["training"]["combined"]["loss"] for r in result.training_statistics]
    assert losses[-1] < losses[0]


def test_learns_whether_a_word_appears_in_a_text(train_config, text_df):
    config = train_config(
        inputs=[{"name": "text", "type": "text", "encoder": {"type": "embed", "embedding_size": 16, "reduce_output": "sum"}}],
        outputs=[{"name": "label", "type": "binary"}], epochs=10,
    )
    model, result = _train(config, dataset=text_df)
    assert _test_metrics(model, result)["label"]["accuracy"] > 0.9


def test_learns_a_regression_rule_in_data_units(train_config, regression_df):
    config = train_config(inputs=[{"name": "a", "type": "number"}, {"name": "b", "type": "number"}],
                          outputs=[{"name": "target", "type": "number"}], epochs=10)
    model, result = _train(config, dataset=regression_df)
    metrics = _test_metrics(model, result)["target"]
    assert metrics["r2"] > 0.8
    # Errors are reported in the target's units (targets spread about 22 around 50).
    assert metrics["mean_absolute_error"] < 8
    predictions = model.predict(regression_df.drop(columns=["target"]))["target_predictions"]
    assert abs(predictions.mean() - regression_df.target.mean()) < 5


def test_batch_norm_trains_when_the_last_batch_has_one_row(train_config, tabular_df):
    config = train_config(epochs=1, sections={"combiner": {"type": "concat", "norm": "batch"}})
    # 161 training rows = 5 batches of 32 and one row
    _, result = _train(config, training_set=tabular_df[:161], validation_set=tabular_df[161:])
    assert result.training_statistics[-1]["step"] == 5


def test_transformer_combiner_trains(train_config, tabular_df):
    config = train_config(epochs=2, sections={"combiner": {"type": "transformer", "hidden_size": 16, "num_heads": 2,
                                                           "num_layers": 1, "reduce_output": "concat"}})
    _, result = _train(config, dataset=tabular_df)
    assert math.isfinite(result.training_statistics[-1]["validation"]["combined"]["loss"])


# ---- reproducibility ---------------------------------------------------------------------------

def test_same_seed_gives_identical_training_statistics(train_config, tabular_df):
    config = train_config(epochs=3, sections={"combiner": {"type": "concat", "dropout": 0.2}})
    def without_timing(result):
        return [{k: v for k, v in record.items() if k not in ("rows_per_s", "data_wait_fraction")} for record in result.training_statistics]

    _, first = _train(config, dataset=tabular_df, random_seed=7)
    _, second = _train(config, dataset=tabular_df, random_seed=7)
    assert without_timing(first) == without_timing(second)
    _, other = _train(config, dataset=tabular_df, random_seed=8)
    assert without_timing(other) != without_timing(first)


def test_same_seed_gives_identical_predictions(train_config, tabular_df):
    config = train_config(epochs=2)
    a, _ = _train(config, dataset=tabular_df, random_seed=3)
    b, _ = _train(config, dataset=tabular_df, random_seed=3)
    pd.testing.assert_frame_equal(a.predict(tabular_df), b.predict(tabular_df), check_exact=True)


# ---- trainer settings --------------------------------------------------------------------------

def test_gradient_accumulation_takes_one_step_per_n_batches(train_config, tabular_df):
    # 256 training rows = 8 batches of 32 -> 4 optimizer steps per epoch
    config = train_config(epochs=2, gradient_accumulation_steps=2)
    _, result = _train(config, training_set=tabular_df[:256], validation_set=tabular_df[256:])
    assert _steps(result.training_statistics) == [4, 8]


def test_gradient_accumulation_over_more_batches_than_an_epoch_still_trains(train_config, tabular_df):
    # 100 rows = 4 batches, fewer than the 8 accumulated per step: the epoch's end still steps.
    config = train_config(epochs=2, gradient_accumulation_steps=8, early_stop=-1)
    _, result = _train(config, training_set=tabular_df[:100], validation_set=tabular_df[100:])
    history = result.training_statistics
    assert [r["epoch"] for r in history] == [1, 2]
    assert _steps(history) == [1, 2]


def test_gradient_accumulation_with_leftover_batches_steps_at_the_end_of_each_epoch(train_config, tabular_df):
    # 5 batches with 2 per step: steps after batches 2, 4 and 5
    config = train_config(epochs=2, gradient_accumulation_steps=2)
    _, result = _train(config, training_set=tabular_df[:150], validation_set=tabular_df[150:])
    assert _steps(result.training_statistics) == [3, 6]


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
def test_each_optimizer_lowers_the_validation_loss(train_config, tabular_df, optimizer):
    config = train_config(epochs=3, learning_rate=0.01 if optimizer != "sgd" else 0.05,
                          optimizer={"type": optimizer, "weight_decay": 0.01})
    _, result = _train(config, dataset=tabular_df)
    losses = [r["validation"]["y"]["loss"] for r in result.training_statistics]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("decay", [None, "cosine", "linear", "exponential"])
def test_each_learning_rate_decay_with_warmup_trains(train_config, tabular_df, decay):
    config = train_config(epochs=3, learning_rate_scheduler={"decay": decay, "warmup_fraction": 0.2})
    model, result = _train(config, dataset=tabular_df)
    history = result.training_statistics
    assert len(history) == 3
    assert history[-1]["validation"]["y"]["accuracy"] > 0.8


def test_train_steps_replaces_epochs(train_config, tabular_df):
    config = train_config(epochs=100, train_steps=7)
    _, result = _train(config, dataset=tabular_df)
    history = result.training_statistics
    assert history[-1]["step"] == 7
    assert len(history) == 1  # 7 steps end inside the first epoch (9 batches)


def test_steps_per_checkpoint_evaluates_every_n_steps(train_config, tabular_df, tmp_path):
    config = train_config(epochs=2, steps_per_checkpoint=4)
    _, result = _train(config, dataset=tabular_df, run_dir=tmp_path / "run")
    steps = _steps(result.training_statistics)
    assert steps and all(step % 4 == 0 for step in steps)
    assert all("validation" in record for record in result.training_statistics)


def test_mixed_precision_trains_on_cpu(train_config, tabular_df):
    model, result = _train(train_config(epochs=6, use_mixed_precision=True), dataset=tabular_df)
    assert _test_metrics(model, result)["y"]["accuracy"] > 0.85


def test_float16_mixed_precision_trains_with_a_gradient_scaler(train_config, tabular_df, monkeypatch):
    """float16 (GPUs without bf16; on CPU here, slowly) scales the loss, so that small gradients
    do not underflow, and skips the steps whose gradients overflowed."""
    scalers = []

    class Recorded(torch.amp.GradScaler):  # the real scaler, remembered for the test
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            scalers.append(self)

    monkeypatch.setattr(torch.amp, "GradScaler", Recorded)
    config = train_config(epochs=6, use_mixed_precision=True, mixed_precision_dtype="float16")
    model, result = _train(config, dataset=tabular_df)
    assert len(scalers) == 1 and scalers[0].is_enabled() and scalers[0].get_scale() >= 1.0
    assert _test_metrics(model, result)["y"]["accuracy"] > 0.85


# ---- early stopping and the best model ---------------------------------------------------------

def test_early_stopping_ends_training_and_keeps_the_best_weights(train_config):
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x1": rng.normal(size=300), "x2": rng.normal(size=300), "c": rng.choice(["a", "b"], 300),
                       "y": rng.random(300) > 0.5})  # labels are noise: validation stops improving soon
    config = train_config(epochs=60, early_stop=2, learning_rate=0.05)
    model, result = _train(config, dataset=df)
    history = result.training_statistics
    assert len(history) < 60
    losses = [r["validation"]["combined"]["loss"] for r in history]
    best = min(losses)
    assert all(loss >= best for loss in losses[-2:])  # the last `early_stop` evaluations did not improve
    # The model returned is the one of the best evaluation, not the last.
    kept = model.evaluate_preprocessed(result.preprocessed, "validation")["combined"]["loss"]
    assert kept == pytest.approx(best, rel=1e-6)


def test_validation_metric_where_higher_is_better_selects_the_highest(train_config, tabular_df):
    config = train_config(epochs=4, validation_field="y", validation_metric="accuracy")
    model, result = _train(config, dataset=tabular_df)
    best = max(r["validation"]["y"]["accuracy"] for r in result.training_statistics)
    assert model.evaluate_preprocessed(result.preprocessed, "validation")["y"]["accuracy"] == pytest.approx(best)


def test_unknown_validation_metric_lists_the_available_ones(train_config, tabular_df):
    config = train_config(epochs=1, validation_field="y", validation_metric="auc")
    # Refused when the config is read, before any data is touched (see tests/config/test_trainer_config.py).
    with pytest.raises(ConfigError, match=r"trainer\.validation_metric: got 'auc'.*roc_auc"):
        _train(config, dataset=tabular_df)


# ---- failures ----------------------------------------------------------------------------------

def test_nan_loss_names_the_step_and_suggests_a_lower_learning_rate(train_config, tabular_df):
    config = train_config(epochs=3, learning_rate=1e30)
    with pytest.raises(TrainingError) as info:
        _train(config, dataset=tabular_df)
    message = str(info.value)
    assert "nan" in message.lower() or "inf" in message.lower()
    assert "at step" in message and "epoch 1" in message
    assert "lower trainer.learning_rate" in message and "1e+30" in message


def test_extreme_input_values_stop_training_with_a_clear_error(train_config, tabular_df, tmp_path):
    df = tabular_df.assign(x1=tabular_df.x1 * 1e30)
    config = train_config(inputs=[{"name": "x1", "type": "number", "preprocessing": {"normalization": None}}],
                          epochs=2, optimizer={"type": "sgd"})
    with pytest.raises(TrainingError, match=r"at step \d+.*check the data for extreme values"):
        _train(config, dataset=df, run_dir=tmp_path / "run")


# ---- checkpoints and resuming ------------------------------------------------------------------

def test_checkpoints_are_complete_and_no_temporary_files_are_left(train_config, tabular_df, tmp_path):
    run = tmp_path / "run"
    model, result = _train(train_config(epochs=3), dataset=tabular_df, run_dir=run)
    checkpoints = run / "checkpoints"
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
    steps = sorted(p.name for p in checkpoints.glob("step-*"))
    assert len(steps) == 2  # older checkpoints are pruned
    latest = json.loads((checkpoints / "latest.json").read_text())
    assert latest["checkpoint"] == steps[-1]
    assert latest["step"] == result.training_statistics[-1]["step"]
    folder = checkpoints / latest["checkpoint"]
    # best.safetensors only where the best evaluation's weights are not the checkpoint's own
    assert {"model.safetensors", "optimizer.pt", "trainer.pt", "state.json"} <= {p.name for p in folder.iterdir()} <= {
        "model.safetensors", "optimizer.pt", "trainer.pt", "state.json", "best.safetensors"}
    state = json.loads((folder / "state.json").read_text())
    assert state["step"] == latest["step"] and state["history"] == result.training_statistics
    from safetensors.torch import load_file

    assert set(load_file(str(folder / "model.safetensors"))) == set(model.module.state_dict())
    assert list((run / "tensorboard").iterdir())


def test_resume_continues_from_the_checkpoint_step(train_config, tabular_df, tmp_path):
    run = tmp_path / "run"
    _, first = _train(train_config(epochs=2), dataset=tabular_df, run_dir=run)
    steps = _steps(first.training_statistics)
    _, resumed = _train(train_config(epochs=4), dataset=tabular_df, run_dir=run, resume=True)
    history = resumed.training_statistics
    assert history[:2] == first.training_statistics  # history continues
    per_epoch = steps[0]
    assert _steps(history) == [per_epoch, 2 * per_epoch, 3 * per_epoch, 4 * per_epoch]  # steps not restarted
    assert [r["epoch"] for r in history] == [1, 2, 3, 4]


def test_a_run_resumed_from_another_runs_checkpoint_continues_at_its_own_learning_rate(train_config, tabular_df,
                                                                                         tmp_path, monkeypatch):
    """What a search's PBT does: continue a better trial's checkpoint with a mutated learning rate."""
    _train(train_config(epochs=1, learning_rate=0.001), dataset=tabular_df, run_dir=tmp_path / "donor")
    (donor,) = [Folder(p) for p in (tmp_path / "donor" / "checkpoints").glob("step-*")]
    seen = []
    original = Trainer._run_epoch
    monkeypatch.setattr(Trainer, "_run_epoch", lambda self, *a: (seen.append(self.optimizer.param_groups[0]["lr"]),
                                                                 original(self, *a)))
    _, resumed = _train(train_config(epochs=2, learning_rate=0.004, learning_rate_scheduler={"decay": None}),
                        dataset=tabular_df, run_dir=tmp_path / "mutated", resume_from=donor)
    assert [r["epoch"] for r in resumed.training_statistics] == [1, 2]  # the donor's epoch, then its own
    assert seen == [pytest.approx(0.004)]


def test_resume_after_an_interruption_matches_an_uninterrupted_run(train_config, tabular_df, tmp_path, monkeypatch):
    config = train_config(epochs=3)
    _, reference = _train(config, dataset=tabular_df, random_seed=5)

    original = Trainer._train_step
    calls = {"n": 0}

    def interrupt_mid_epoch(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 14:  # in the second epoch (9 batches each), after its first checkpoint
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    run = tmp_path / "run"
    monkeypatch.setattr(Trainer, "_train_step", interrupt_mid_epoch)
    with pytest.raises(TrainingInterrupted, match=r"--resume"):
        _train(config, dataset=tabular_df, random_seed=5, run_dir=run)
    monkeypatch.setattr(Trainer, "_train_step", original)
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())
    assert latest["step"] == 13

    model, resumed = _train(config, dataset=tabular_df, random_seed=5, run_dir=run, resume=True)
    got, want = resumed.training_statistics, reference.training_statistics
    assert _steps(got) == _steps(want)
    for a, b in zip(got, want):
        for name, metrics in b["validation"].items():
            assert a["validation"][name] == pytest.approx(metrics), (a["step"], name)
        assert a["training"]["combined"]["loss"] == pytest.approx(b["training"]["combined"]["loss"], rel=1e-6)


def test_resume_without_a_checkpoint_is_a_clear_error(train_config, tabular_df, tmp_path):
    with pytest.raises(ModelError, match="nothing to resume"):
        _train(train_config(epochs=1), dataset=tabular_df, run_dir=tmp_path / "empty", resume=True)


def test_interrupting_without_a_run_dir_still_reports_the_interruption(train_config, tabular_df, monkeypatch):
    def interrupt(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_train_step", interrupt)
    with pytest.raises(TrainingInterrupted) as info:
        _train(train_config(epochs=1), dataset=tabular_df)
    assert info.value.exit_code == 130
    assert "interrupted at step 0" in str(info.value)


def test_a_checkpoint_write_that_fails_leaves_the_previous_one_in_place(train_config, tabular_df, tmp_path, monkeypatch):
    from plait.training import checkpoint as ckpt
    from plait.training.strategies.local import LocalStrategy

    run = tmp_path / "run"
    _train(train_config(epochs=1), dataset=tabular_df, run_dir=run)
    checkpoints = run / "checkpoints"
    before = json.loads((checkpoints / "latest.json").read_text())

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # as if Ctrl-C landed while the optimizer state was written

    model = Model(train_config(epochs=1))
    model.train(dataset=tabular_df, progress_bar=False)
    optimizer = torch.optim.AdamW(model.module.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    monkeypatch.setattr(ckpt.torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(checkpoints, LocalStrategy(), model.module, optimizer, scheduler, {"step": 999})
    assert not [p for p in checkpoints.iterdir() if ".tmp-" in p.name or p.name.endswith(".partial")]
    assert json.loads((checkpoints / "latest.json").read_text()) == before
    assert ckpt.latest_checkpoint(checkpoints) == Folder(checkpoints / before["checkpoint"])


def test_a_resumed_run_still_returns_the_best_weights_seen_before_the_interruption(train_config, tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x1": rng.normal(size=300), "x2": rng.normal(size=300), "c": rng.choice(["a", "b"], 300),
                       "y": rng.random(300) > 0.5})  # noise labels: validation loss is best early, then worsens
    config = train_config(epochs=5, early_stop=-1, learning_rate=0.05)
    original, calls = Trainer._train_step, {"n": 0}

    def interrupt_in_the_last_epoch(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4 * 7 + 2:  # 7 batches per epoch
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    run = tmp_path / "run"
    monkeypatch.setattr(Trainer, "_train_step", interrupt_in_the_last_epoch)
    with pytest.raises(TrainingInterrupted):
        _train(config, dataset=df, run_dir=run)
    monkeypatch.setattr(Trainer, "_train_step", original)
    model, result = _train(config, dataset=df, run_dir=run, resume=True)
    losses = [r["validation"]["combined"]["loss"] for r in result.training_statistics]
    assert losses.index(min(losses)) < 4  # the best evaluation came before the interruption
    kept = model.evaluate_preprocessed(result.preprocessed, "validation")["combined"]["loss"]
    assert kept == pytest.approx(min(losses), rel=1e-6)
