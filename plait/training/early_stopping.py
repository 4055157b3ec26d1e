"""Which evaluation is the best so far, whether training should stop early, and a copy of the best
evaluation's weights (the weights training ends with)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from plait.config.metrics import HIGHER_IS_BETTER
from plait.errors import TrainingError
from plait.training import checkpoint as ckpt


class EarlyStopping:
    """Watches ``trainer.validation_field``'s ``validation_metric`` (default: the combined loss)
    and stops after ``trainer.early_stop`` evaluations without improvement (-1: never).

    Its state (best value and step, evaluations without improvement) lives in the trainer's
    ``Progress``, which every checkpoint saves: a resumed run keeps its patience."""

    def __init__(self, trainer_config):
        self.field = trainer_config.validation_field or "combined"
        self.metric = trainer_config.validation_metric or "loss"
        self.patience = trainer_config.early_stop

    def observe(self, progress, metrics: dict) -> bool:
        """Count one evaluation's ``metrics`` into ``progress``; True if it is the best so far."""
        value = self._value(metrics)
        best = progress.best_value
        if best is None or (value > best if self.metric in HIGHER_IS_BETTER else value < best):
            progress.best_value, progress.best_step = value, progress.step
            progress.evals_without_improvement = 0
            return True
        progress.evals_without_improvement += 1
        return False

    def should_stop(self, progress) -> bool:
        return self.patience >= 0 and progress.evals_without_improvement >= max(1, self.patience)

    def _value(self, metrics: dict) -> float:
        value = metrics.get(self.field, {}).get(self.metric)
        if value is None:
            known = {f: sorted(m) for f, m in metrics.items()}
            raise TrainingError(f"trainer.validation_field/validation_metric: no metric {self.field}.{self.metric}; available: {known}")
        return value


class BestWeights:
    """A copy of the weights of the best evaluation so far. Every worker calls its methods
    (gathering sharded weights is a collective); the copy is complete on the coordinator.

    Where the strategy shards the weights (fsdp, ZeRO-3) the model is too big to keep a second
    whole copy in memory beside its training state: the coordinator writes the copy to a file
    of its local disk instead, read back once, when training ends. Otherwise it stays in CPU
    memory."""

    def __init__(self, strategy, model):
        self.strategy, self.model = strategy, model
        self.weights: dict | None = None
        self.on_disk = strategy.state.shards_weights
        self.kept = False
        self._folder: tempfile.TemporaryDirectory | None = None

    @property
    def file(self) -> Path:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="plait-best-weights-")
        return Path(self._folder.name) / ckpt.BEST

    def keep_current(self) -> None:
        self.kept = True
        if not self.on_disk:
            self.weights = self.current()
            return
        self.strategy.state.save_full_weights(self.model, self.file)

    def forget(self) -> None:
        """Nothing to select on (no validation rows): the final weights are the model's."""
        self.weights, self.kept = None, False

    def current(self) -> dict:
        return {k: v.detach().cpu().clone() for k, v in self.strategy.state.full_weights(self.model).items()}

    def final(self) -> dict:
        """The weights training ends with: the best evaluation's, else the last."""
        if not self.on_disk:
            return self.weights if self.kept else self.current()
        if not self.kept:  # the last weights, through the file too: never a second copy in memory
            self.strategy.state.save_full_weights(self.model, self.file)
        weights = ckpt.load_weights(self.file) if self.strategy.is_coordinator else {}
        if self._folder is not None:  # the tensors read stay valid: the file's pages are mapped
            self._folder.cleanup()
        return weights

    def to_save(self, progress) -> dict | Path | None:
        """The best weights (or the file holding them), for a checkpoint, unless they are the
        model's current weights."""
        if not self.kept or progress.best_step == progress.step:
            return None
        return self.file if self.on_disk else self.weights

    def restore(self, checkpoint: Path, progress) -> None:
        """The best weights as they were when ``checkpoint`` was saved (the model already loaded
        from it): without them a resumed run would end with its last weights."""
        if (checkpoint / ckpt.BEST).is_file():
            self.kept = True
            if not self.on_disk:
                self.weights = ckpt.load_weights(checkpoint / ckpt.BEST)
            elif self.strategy.is_coordinator:
                shutil.copyfile(checkpoint / ckpt.BEST, self.file)
        elif progress.best_value is not None and progress.best_step == progress.step:
            self.keep_current()
