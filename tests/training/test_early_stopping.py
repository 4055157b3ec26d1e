"""Early stopping's patience and direction, on the Progress a checkpoint saves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from plait.errors import TrainingError
from plait.training.early_stopping import EarlyStopping
from plait.training.trainer import Progress


def _stopping(metric=None, field=None, patience=2) -> EarlyStopping:
    return EarlyStopping(SimpleNamespace(validation_metric=metric, validation_field=field, early_stop=patience))


def _observe(stopping, progress, values, name="loss", field="combined"):
    improved = []
    for value in values:
        progress.step += 1
        improved.append(stopping.observe(progress, {field: {name: value}}))
    return improved


def test_patience_counts_evaluations_without_a_lower_loss():
    stopping, progress = _stopping(patience=2), Progress()
    assert _observe(stopping, progress, [0.5, 0.4, 0.45]) == [True, True, False]
    assert (progress.best_value, progress.best_step) == (0.4, 2) and not stopping.should_stop(progress)
    assert _observe(stopping, progress, [0.4]) == [False]  # equal is no improvement
    assert stopping.should_stop(progress)


def test_a_metric_where_higher_is_better_keeps_the_highest():
    stopping, progress = _stopping(metric="accuracy", field="y", patience=-1), Progress()
    assert _observe(stopping, progress, [0.7, 0.9, 0.8], name="accuracy", field="y") == [True, True, False]
    assert progress.best_value == 0.9 and not stopping.should_stop(progress)  # -1: never stops


def test_patience_survives_a_resume_through_the_saved_progress():
    stopping, progress = _stopping(patience=2), Progress()
    _observe(stopping, progress, [0.3, 0.4])
    resumed = Progress(**progress.__dict__)  # what a checkpoint's state.json gives back
    _observe(stopping, resumed, [0.5])
    assert stopping.should_stop(resumed)


def test_an_unknown_metric_names_the_available_ones():
    with pytest.raises(TrainingError, match=r"no metric y.auc; available: \{'y': \['accuracy', 'loss'\]\}"):
        _stopping(metric="auc", field="y").observe(Progress(), {"y": {"loss": 0.1, "accuracy": 0.9}})


class _ShardedLocal:
    """The local strategy with its state flagged as sharded (what fsdp and ZeRO-3 report), so the
    best weights take the path a sharded strategy takes, in one process."""

    def __init__(self):
        from plait.training.strategies.local import LocalStrategy
        from plait.training.strategies.state import StateIO

        self.inner = LocalStrategy("cpu")
        self.is_coordinator = True
        self.state = type("ShardedState", (StateIO,), {"shards_weights": True})(self.inner)


def test_a_sharded_strategy_keeps_the_best_weights_on_disk_and_ends_with_them(tmp_path):
    import torch

    from plait.training import checkpoint as ckpt
    from plait.training.early_stopping import BestWeights

    model = torch.nn.Linear(2, 1)
    best = BestWeights(_ShardedLocal(), model)
    best.keep_current()
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    assert best.weights is None and best.file.is_file()  # not held in memory
    with torch.no_grad():
        model.weight.add_(1.0)
    saved = best.to_save(Progress(step=2, best_step=1))
    ckpt._write_trainer_files(tmp_path, torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD(model.parameters()), lambda s: 1),
                              {"step": 2}, saved)
    assert torch.equal(ckpt.load_weights(tmp_path / ckpt.BEST)["weight"], kept["weight"])
    folder = best.file.parent
    assert torch.equal(best.final()["weight"], kept["weight"])
    assert not folder.exists()  # the file goes once read

    resumed = BestWeights(_ShardedLocal(), model)
    resumed.restore(tmp_path, Progress(step=2, best_step=1, best_value=0.5))
    assert torch.equal(resumed.final()["weight"], kept["weight"])
