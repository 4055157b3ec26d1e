"""Training a GBM (``model_type: gbm``): LightGBM boosts over the whole training split, and every
``boosting_rounds_per_checkpoint`` rounds the trees grown so far are evaluated as an ECD model's
epoch is (the same metrics, history records, log lines, callbacks and search reports), early
stopping counting those evaluations. The model keeps the rounds of its best evaluation.

LightGBM is multi-threaded, so the trees grow in one process: on the local and Ray backends the
one that trains (a search spreads its trials over the Ray cluster), under a launcher such as
torchrun rank 0, the other ranks waiting. A GBM run saves no checkpoints: it is short, and
starts again from the beginning.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from plait.data.tensors import table_tensors
from plait.errors import TrainingError, UsageError
from plait.evaluation import Evaluation
from plait.models import build_model
from plait.training.early_stopping import EarlyStopping
from plait.training.reporting import Reporter
from plait.training.trainer import Progress

log = logging.getLogger("plait")


def fit_gbm(job, strategy) -> tuple[torch.nn.Module, list]:
    """Train ``job``'s GBM on the coordinator (for ``plait.training.run.fit``): the model and
    its history; every other worker returns an empty model, as a sharded ECD run's do."""
    if job.resume or job.resume_from is not None:
        raise UsageError("resume: a GBM saves no checkpoints to resume from; train it again from the start")
    if job.initial_weights is not None:
        raise UsageError("--model_load_path: a GBM does not train on from a loaded model's trees; train it from "
                         "the start")
    model = build_model(job.config, job.metadata)  # LightGBM is seeded with the job's seed
    if not strategy.is_coordinator:
        strategy.barrier()
        return model, []
    features, names = job.data.metadata["features"], model.input_names + model.output_names
    splits = {split: table_tensors(job.data.read_split(split), features, names)
              for split in ("training", "validation") if job.data.rows(split)}
    if "training" not in splits:
        raise TrainingError("the training split has no rows: a GBM needs rows to grow its trees")
    boosting = Boosting(job, strategy, model, splits)
    history, rounds = boosting.run()
    model.keep_booster(boosting.booster, rounds)
    if strategy.world_size > 1:
        strategy.barrier()
    return model, history


class Boosting:
    """One LightGBM run, evaluated every ``boosting_rounds_per_checkpoint`` rounds."""

    def __init__(self, job, strategy, model, splits: dict[str, dict[str, torch.Tensor]]):
        self.job, self.strategy, self.model, self.splits = job, strategy, model, splits
        self.matrices = {split: model.feature_matrix(tensors) for split, tensors in splits.items()}
        """Each split's feature matrix, built once: boosting and every evaluation read it."""
        self.options = job.config.trainer
        self.early_stopping = EarlyStopping(self.options)
        self.progress = Progress()
        self.booster = None
        self.raw_scores: dict[str, tuple[int, np.ndarray]] = {}
        """Each split's raw scores at the last evaluation, and its rounds (gbdt: see ``raw_scores_at``)."""
        self.reporter = Reporter(strategy, job.run_dir, job.progress_bar)

    def run(self) -> tuple[list, int | None]:
        """The history, and the rounds to keep (those of the best evaluation; None: all)."""
        import lightgbm

        train = self.splits["training"]
        name = self.model.output.name
        labels = train[name].double().numpy()
        known = labels >= 0 if self.model.output.type == "category" else np.ones(len(labels), dtype=bool)
        dataset = lightgbm.Dataset(self.matrices["training"][known], labels[known],
                                   categorical_feature=self.model.categorical, free_raw_data=False,
                                   params={"max_bin": self.options.max_bin, "verbose": self.options.verbose,
                                           "feature_pre_filter": self.options.feature_pre_filter})
        parameters = {**self.options.lightgbm_parameters(), **self.model.objective(), "seed": self.job.seed}
        log.info("Boosting up to %d rounds on %d rows (validation %d), evaluating every %d.",
                 self.options.num_boost_round, int(known.sum()), self.job.data.rows("validation"),
                 self.options.boosting_rounds_per_checkpoint)
        self.reporter.open()
        try:  # early stopping raises lightgbm_stop in the callback, which lightgbm.train catches
            lightgbm.train(parameters, dataset, num_boost_round=self.options.num_boost_round,
                           callbacks=[self._after_round], keep_training_booster=True)
        finally:
            self.reporter.close()
            if self.job.run_dir is not None:
                self.job.run_dir.sync()
        # DART scales earlier trees again each round, so an earlier evaluation's model is not the
        # first rounds of the last one: it keeps every tree grown (LightGBM's own early stopping is
        # off under DART for the same reason).
        judged = "validation" in self.splits and self.options.boosting_type == "gbdt"
        kept = self.progress.best_step if judged else None
        return self.progress.history, kept or None

    def _after_round(self, env) -> None:
        """LightGBM's callback after each round: evaluate at each checkpoint's round and the last."""
        self.booster = env.model
        rounds = env.iteration + 1
        if rounds % self.options.boosting_rounds_per_checkpoint and rounds != env.end_iteration:
            return
        self.progress.epoch += 1
        self.progress.step = rounds
        if self._evaluate() and self.early_stopping.should_stop(self.progress):
            raise lightgbm_stop(self.progress.best_step)

    def _evaluate(self) -> bool:
        """One evaluation's record into the history and out to the log, callbacks and search;
        whether early stopping has a validation split to judge."""
        self.model.use_booster(self.booster)
        emit = self.job.events if self.job.events is not None else (lambda *a, **k: None)
        emit("on_eval_start", epoch=self.progress.epoch, step=self.progress.step)
        training = self.metrics("training")
        if not self.options.evaluate_training_set:
            training = {"combined": {"loss": training["combined"]["loss"]}}
        record = {"epoch": self.progress.epoch, "step": self.progress.step, "training": training}
        judged = "validation" in self.splits
        if judged:
            record["validation"] = self.metrics("validation")
            if self.early_stopping.observe(self.progress, record["validation"]):
                emit("on_save_best_checkpoint", step=self.progress.step)
        self.progress.history.append(record)
        self.reporter.evaluation(record)
        emit("on_eval_end", record=record)
        if self.job.on_evaluation is not None:
            self.job.on_evaluation(record, self.strategy)
        return judged

    def metrics(self, split: str) -> dict:
        """Every metric of the trees grown so far on ``split``, as an ECD evaluation computes them."""
        raw, targets, rows = self.raw_scores_at(split, self.progress.step), self.splits[split], \
            self.options.eval_batch_size
        evaluation = Evaluation(self.model)
        for first in range(0, len(raw), rows):
            evaluation.add(self.model.logits(raw[first:first + rows]),
                           {name: targets[name][first:first + rows] for name in self.model.output_names})
        return evaluation.metrics.compute(evaluation.stats)

    def raw_scores_at(self, split: str, rounds: int) -> np.ndarray:
        """The raw scores of the first ``rounds`` rounds' trees on ``split``. Under ``gbdt`` a
        tree's score adds to the others', so only the trees grown since the last evaluation
        predict (every tree at every evaluation took 51 of a 60 s run on 231,000 rows:
        benchmarks/gbm_training.py); DART scales earlier trees again as it drops some, so there
        all of them predict."""
        matrix = self.matrices[split]  # never empty: a split without rows is not evaluated (fit_gbm)
        additive = self.options.boosting_type == "gbdt"
        done, raw = self.raw_scores.get(split, (0, 0.0)) if additive else (0, 0.0)
        if rounds > done:
            raw = raw + self.booster.predict(matrix, raw_score=True, start_iteration=done, num_iteration=rounds - done)
        self.raw_scores[split] = (rounds, raw)
        return raw


def lightgbm_stop(best_rounds: int):
    """LightGBM's signal to end boosting (its best iteration counted from 0)."""
    import lightgbm

    return lightgbm.callback.EarlyStopException(max(0, best_rounds - 1), [])
