"""Callbacks: your code, called at the points of a run Ludwig's callbacks are called at.

``Model(config, callbacks=[MyCallback()])`` (or ``plait.api.Model``) calls each hook below, with
Ludwig's names, on the coordinator only, on every backend:

* local backend: in this process;
* Ray: training runs on Ray Train workers, and rank 0 sends its events (epochs, evaluations)
  to this process through the queue that already relays its log lines; the hooks run here, on
  the same objects you passed in, in the order rank 0 sent them;
* a launcher (torchrun, horovodrun, deepspeed): in the rank-0 process.

So a callback sees every event of a run once, wherever the run trains. Experiment trackers
(``plait.tracking``) are callbacks like any other.

The arguments are plait's own (Ludwig passes its trainer and progress tracker objects, which
plait has not): plain values, documented on each hook; every hook also takes ``**kwargs``, so a
callback written for a later plait keeps working. Ludwig's per-batch hooks (``on_batch_start``,
``on_batch_end``) are not called: relaying one event per step from a Ray worker would cost more
than a step of a small model. A callback that defines one is refused when the model is made
(:func:`check_callbacks`), rather than silently never called.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from plait.errors import UsageError

log = logging.getLogger("plait")


class Callback:
    """Override the hooks you need; each does nothing by default."""

    # ---- preprocessing ----------------------------------------------------------------------
    def on_preprocess_start(self, config: dict, **kwargs) -> None:
        """Before the data is read (or found in the cache); ``config``: the resolved config."""

    def on_preprocess_end(self, rows: dict[str, int], **kwargs) -> None:
        """The splits are ready: ``rows`` per split name (training, validation, test)."""

    # ---- training ---------------------------------------------------------------------------
    def on_train_init(self, config: dict, run_directory: str | None, resume: bool, **kwargs) -> None:
        """A training run begins (before preprocessing): its resolved config, its run
        directory's URL (None without one) and whether it continues an earlier run."""

    def on_train_start(self, config: dict, run_directory: str | None, **kwargs) -> None:
        """Preprocessing is done and training starts."""

    def on_resume_training(self, step: int, **kwargs) -> None:
        """Training continues from the checkpoint at ``step`` (``--resume``, or a restarted
        worker group on Ray)."""

    def on_epoch_start(self, epoch: int, step: int, **kwargs) -> None:
        """Epoch ``epoch`` (counted from 1) starts after ``step`` optimizer steps."""

    def on_epoch_end(self, epoch: int, step: int, speed: dict, **kwargs) -> None:
        """Epoch ``epoch`` ended: ``speed`` holds ``rows``, ``rows_per_s``,
        ``data_wait_fraction`` and, with several workers, each worker's (``*_per_worker``)."""

    def on_eval_start(self, epoch: int, step: int, **kwargs) -> None:
        """An evaluation (validation, and training when ``evaluate_training_set``) starts."""

    def on_eval_end(self, record: dict, **kwargs) -> None:
        """An evaluation ended: ``record`` is the history's entry (``epoch``, ``step``,
        ``training``, ``validation``: ``{output: {metric: value}}``, and the epoch's speed
        when it ended one)."""

    def on_save_best_checkpoint(self, step: int, **kwargs) -> None:
        """The evaluation at ``step`` is the best so far: its weights are the ones kept."""

    def on_train_end(self, run_directory: str | None, training_statistics: dict, **kwargs) -> None:
        """Training ended; ``training_statistics`` in Ludwig's layout."""

    # ---- evaluation after training ----------------------------------------------------------
    def on_evaluation_start(self, split: str, **kwargs) -> None:
        """An evaluation of the trained model on ``split`` (the experiment's test) starts."""

    def on_evaluation_end(self, split: str, statistics: dict, **kwargs) -> None:
        """It ended: ``statistics`` as ``test_statistics.json`` holds them."""

    # ---- search -----------------------------------------------------------------------------
    def on_hyperopt_init(self, experiment_name: str, **kwargs) -> None:
        """A search is set up (``plait hyperopt``), before its preprocessing."""

    def on_hyperopt_start(self, experiment_name: str, run_directory: str, **kwargs) -> None:
        """Its trials are about to start."""

    def on_hyperopt_trial_start(self, parameters: dict, **kwargs) -> None:
        """Called in the trial's process, before it trains: the trial's values by config path."""

    def on_hyperopt_trial_end(self, parameters: dict, **kwargs) -> None:
        """Called in the trial's process, after it trained."""

    def on_hyperopt_end(self, experiment_name: str, results: list[dict], **kwargs) -> None:
        """Every trial ended: ``results`` as ``hyperopt_statistics.json``'s, best first."""

    # ---- the end ----------------------------------------------------------------------------
    def on_ludwig_end(self, **kwargs) -> None:
        """The model is closed (``Model.close()``; every CLI command closes it when it ends): a
        callback's last call, for its clean-up. Ludwig's name, kept so its callbacks port as
        they are."""


HOOKS = frozenset(name for name in vars(Callback) if name.startswith("on_"))
"""The hooks plait calls."""

LUDWIG_HOOKS_NOT_CALLED = {
    "on_batch_start": "per-batch hooks are not called (on Ray each would be a message per step); use on_eval_end "
                      "or on_epoch_end",
    "on_batch_end": "per-batch hooks are not called (on Ray each would be a message per step); use on_eval_end "
                    "or on_epoch_end",
    "on_trainer_train_setup": "use on_train_start (called on the coordinator, with the config and run directory)",
    "on_trainer_train_teardown": "use on_train_end",
    "on_validation_start": "use on_eval_start (validation is part of every evaluation)",
    "on_validation_end": "use on_eval_end (the record holds the validation metrics)",
    "on_test_start": "use on_evaluation_start (plait evaluates the test split after training, not during it)",
    "on_test_end": "use on_evaluation_end (plait evaluates the test split after training, not during it)",
    "on_build_metadata_start": "use on_preprocess_start",
    "on_build_metadata_end": "use on_preprocess_end",
    "on_build_data_start": "use on_preprocess_start",
    "on_build_data_end": "use on_preprocess_end",
    "on_preprocess_progress": "use on_preprocess_end",
    "on_hyperopt_preprocessing_start": "use on_hyperopt_init",
    "on_hyperopt_preprocessing_end": "use on_hyperopt_start",
    "on_hyperopt_finish": "use on_hyperopt_end",
    "on_cmdline": "plait does not call it; read sys.argv in on_train_init",
    "on_visualize_figure": "plait visualize writes files; plait calls no hook for them",
    "on_checkpoint": "use on_eval_end (every evaluation saves a checkpoint)",
    "should_early_stop": "set trainer.early_stop in the config",
    "should_stop_hyperopt": "set hyperopt.executor.time_budget_s in the config",
    "prepare_ray_tune": "plait runs the search's trials itself",
}
"""Ludwig hooks plait does not call, with what to use instead."""


def check_callbacks(callbacks: Iterable[Any] | None) -> list:
    """The callbacks as a list; an error naming a Ludwig hook one of them defines that plait
    would never call."""
    checked = list(callbacks or [])
    for callback in checked:
        for name, advice in LUDWIG_HOOKS_NOT_CALLED.items():
            if callable(getattr(callback, name, None)):
                raise UsageError(f"callback {type(callback).__name__}.{name}: plait does not call this hook of "
                                 f"Ludwig's: {advice}")
    return checked


class Dispatcher:
    """Calls one hook on every callback, in order, on the coordinator. A callback that raises
    stops the run: a tracker that cannot log is a broken run, not a warning."""

    def __init__(self, callbacks: Iterable[Any] = ()):
        self.callbacks = list(callbacks)

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def __call__(self, hook: str, **arguments) -> None:
        if hook not in HOOKS:
            raise ValueError(f"unknown callback hook {hook!r}")
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is not None:
                method(**arguments)
