"""Gradient-boosted trees (``model_type: gbm``): a LightGBM booster behind the model surface that
evaluation, prediction and serving use (:class:`~plait.models.base.TrainableModel`).

The forward pass stacks the preprocessed inputs into LightGBM's feature matrix (a category as
its id, one of LightGBM's categorical features; a date as its nine numbers) and returns the
booster's raw scores, which are what the output's head reads as logits: a binary output's
log-odds, a category output's score per class, a number output's value in the model's units. So
the heads' losses, metrics and predictions apply unchanged; their own layers are never run.

The booster travels in the weights file as the UTF-8 bytes of LightGBM's text model format
(plain text, never a pickle), in the uint8 tensor ``booster``, whose length is the model's own.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from plait.config.date_encoders import DATE_COMPONENTS
from plait.models.base import TrainableModel, module_key
from plait.models.heads import build_head

BOOSTER = "booster"
"""The state-dict key of the booster's text model."""
OBJECTIVES = {"binary": "binary", "category": "multiclass"}
"""LightGBM's objective per output type (a number output's follows its loss: ``REGRESSION``)."""
REGRESSION = {"mean_squared_error": "regression", "root_mean_squared_error": "regression",
              "mean_absolute_error": "regression_l1", "huber": "huber",
              "mean_absolute_percentage_error": "mape"}
"""LightGBM's regression objective per number loss (another loss: squared error)."""
COLUMNS = {"date": len(DATE_COMPONENTS)}
"""Columns of the feature matrix per input of a type that has more than one."""


class GBM(TrainableModel):
    resizable_weights = (BOOSTER,)

    def __init__(self, config, metadata: dict, load_pretrained: bool = False):
        super().__init__()
        features = metadata["features"]
        self.input_names = [f.name for f in config.input_features]
        self.output_names = [f.name for f in config.output_features]
        self.output = config.output_features[0]
        # Heads over a one-wide input: their losses, metrics and predictions are used, their layers never.
        self.heads = nn.ModuleDict({module_key(f.name): build_head(f, features[f.name], (1,))
                                    for f in config.output_features})
        self.loss_weights = {f.name: f.loss.weight for f in config.output_features}
        self.target_readers, self.batch_padded = [], []
        starts = np.cumsum([0] + [COLUMNS.get(f.type, 1) for f in config.input_features])
        self.categorical = [int(start) for start, f in zip(starts, config.input_features) if f.type == "category"]
        """Columns of the feature matrix that LightGBM splits as categories."""
        self.register_buffer(BOOSTER, torch.zeros(0, dtype=torch.uint8))
        self._booster = None
        self.prediction_batch_rows = config.trainer.eval_batch_size

    @property
    def classes(self) -> int:
        """Scores per row: a category output's vocabulary size, else 1."""
        return self.head(self.output.name).logits_size if self.output.type == "category" else 1

    def objective(self) -> dict:
        """LightGBM's objective settings for this model's output."""
        if self.output.type == "number":
            return {"objective": REGRESSION.get(self.output.loss.type, "regression")}
        if self.output.type == "category":
            return {"objective": "multiclass", "num_class": max(2, self.classes)}
        return {"objective": OBJECTIVES[self.output.type]}

    def feature_matrix(self, inputs: dict[str, torch.Tensor]) -> np.ndarray:
        """The inputs as LightGBM's [rows, columns] matrix, in the config's order: a column per
        input, a date's nine numbers side by side."""
        return np.column_stack([inputs[name].reshape(len(inputs[name]), -1).double().numpy()
                                for name in self.input_names])

    def use_booster(self, booster) -> None:
        """Predict with ``booster`` as it is (training evaluates the trees grown so far)."""
        self._booster = booster

    def keep_booster(self, booster, rounds: int | None = None) -> None:
        """Keep ``booster``'s first ``rounds`` rounds (all: None) as this model's weights."""
        text = booster.model_to_string(num_iteration=rounds)
        self.booster = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)
        self._booster = None

    @property
    def trees(self):
        """The LightGBM booster (read from the weights on first use)."""
        if self._booster is None:
            if not self.booster.numel():
                raise RuntimeError("this GBM has no trees yet: train it or load its weights")
            import lightgbm

            self._booster = lightgbm.Booster(model_str=bytes(self.booster.numpy()).decode("utf-8"))
        return self._booster

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.scores(self.feature_matrix(inputs))

    def scores(self, matrix: np.ndarray) -> dict[str, torch.Tensor]:
        """The output's logits (the trees' raw scores) for rows of LightGBM's feature matrix."""
        return self.logits(self.trees.predict(matrix, raw_score=True) if len(matrix) else np.zeros((0, self.classes)))

    def logits(self, raw_scores: np.ndarray) -> dict[str, torch.Tensor]:
        """The output's logits from LightGBM's raw scores of some rows: [rows], or for a category
        output [rows, classes]."""
        scores = torch.from_numpy(np.asarray(raw_scores, dtype=np.float32))
        if self.output.type == "category":  # a one-class vocabulary trained as two classes keeps its one
            return {self.output.name: scores[:, :self.classes]}
        return {self.output.name: scores.reshape(-1)}

    def no_rows_outputs(self, device) -> dict[str, torch.Tensor]:
        shape = (0, self.classes) if self.output.type == "category" else (0,)
        return {self.output.name: torch.zeros(shape, device=device)}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The booster's length is the saved model's: the buffer takes that length first, so that
        # the base class's shape check passes and it copies the bytes.
        saved = state_dict.get(prefix + BOOSTER)
        if saved is not None:
            self.booster = torch.zeros(saved.shape, dtype=torch.uint8)
            self._booster = None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
