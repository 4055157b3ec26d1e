"""The config of Ludwig's ``model_type: gbm``: gradient-boosted trees (LightGBM) over tabular inputs.

The features, preprocessing, defaults, backend, search and tracking sections are an ECD config's;
there is no combiner, each input is read as it is (no encoder), and the ``trainer`` section is
LightGBM's: :class:`GBMTrainerConfig`, every key and default of Ludwig 0.17's GBM trainer.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from plait.config.base import StrictModel, field_error
from plait.config.features import DateInputFeature, InputFeature, OutputFeature
from plait.config.schema import PlaitConfig

GBM_INPUT_TYPES = ("binary", "category", "number", "date")
"""Input types a GBM reads: one column of the trees' features each (a category as LightGBM's
categorical feature), and a date as its nine numbers (year, month, day, weekday, day of the year,
hour, minute, second, second of the day; Ludwig's GBM takes no dates, its ECD encoders read these)."""
ENCODED_AS_IS = ("binary", "category", "number")
"""Input types whose resolved encoder is ``passthrough`` (a date has none: its numbers go to the
trees as they are, and the date's default encoder entry is never built)."""
GBM_OUTPUT_TYPES = ("binary", "category", "number")
"""Output types a GBM predicts: one output, as LightGBM's binary, multiclass or regression objective."""


def _read_as_is(feature_type: Any, encoder: Any) -> bool:
    """Whether an input's encoder section says what a GBM does: passthrough, or for a date the
    default encoder's settings that a resolved config writes back (a date has no passthrough
    encoder; its numbers go to the trees as they are)."""
    if feature_type == "date":
        return encoder == DateInputFeature.model_fields["encoder"].default_factory().model_dump()
    return isinstance(encoder, dict) and encoder.get("type") == "passthrough"


class GBMTrainerConfig(StrictModel):
    """LightGBM's training settings, as Ludwig's GBM trainer names them (lightgbm.readthedocs.io,
    "Parameters", has each one's meaning). Boosting runs ``boosting_rounds_per_checkpoint`` rounds
    between evaluations; early stopping counts evaluations, as an ECD trainer's does."""

    type: Literal["lightgbm_trainer"] = "lightgbm_trainer"
    """The trainer (Ludwig's only GBM trainer)."""
    learning_rate: float = Field(0.03, gt=0)
    """Shrinkage of each tree's contribution."""
    num_boost_round: int = Field(1000, gt=0)
    """The most boosting rounds (trees per class); early stopping usually ends sooner."""
    boosting_rounds_per_checkpoint: int = Field(50, gt=0)
    """Rounds between evaluations (and the epochs of the training statistics)."""
    early_stop: int = Field(5, ge=-1)
    """Stop after this many evaluations without improvement of validation_metric (-1: never)."""
    validation_field: str | None = None
    """The output feature whose metric decides early stopping and the kept rounds, or 'combined'."""
    validation_metric: str | None = None
    """A metric of validation_field's type. Unset: loss."""
    eval_batch_size: int = Field(1048576, gt=0)
    """Rows per evaluation and prediction batch."""
    evaluate_training_set: bool = False
    """Also compute every metric on the training set at each evaluation (its loss is always computed)."""
    boosting_type: Literal["gbdt", "dart"] = "gbdt"
    """Plain gradient boosting, or DART (trees dropped out at random; each round scales earlier
    trees again, so a DART model keeps every tree grown, where gbdt keeps the best evaluation's)."""
    tree_learner: Literal["serial", "feature", "data", "voting"] = "serial"
    """How LightGBM parallelizes growing a tree (serial: on one machine's threads)."""
    max_depth: int = 18
    """Deepest a tree grows (negative: no limit)."""
    num_leaves: int = Field(82, gt=1)
    """The most leaves a tree has."""
    min_data_in_leaf: int = Field(20, ge=0)
    """The fewest training rows a leaf holds."""
    min_sum_hessian_in_leaf: float = Field(1e-3, ge=0)
    """The smallest sum of second derivatives a leaf holds."""
    bagging_fraction: float = Field(0.8, gt=0, le=1)
    """Share of the rows each round trains on, drawn every ``bagging_freq`` rounds."""
    pos_bagging_fraction: float = Field(1.0, gt=0, le=1)
    """Share of the positive rows each round trains on (a binary output's imbalance)."""
    neg_bagging_fraction: float = Field(1.0, gt=0, le=1)
    """Share of the negative rows each round trains on."""
    bagging_freq: int = Field(1, ge=0)
    """Rounds between draws of the bagged rows (0: no bagging)."""
    bagging_seed: int = 3
    """Seed of the bagged rows."""
    feature_fraction: float = Field(0.75, gt=0, le=1)
    """Share of the inputs each tree may split on."""
    feature_fraction_bynode: float = Field(1.0, gt=0, le=1)
    """Share of the tree's inputs each node may split on."""
    feature_fraction_seed: int = 2
    """Seed of the inputs drawn for each tree."""
    extra_trees: bool = False
    """Draw one threshold per input at random instead of searching for the best (faster, more regularized)."""
    extra_seed: int = 6
    """Seed of the random thresholds of ``extra_trees``."""
    max_delta_step: float = 0.0
    """The most a leaf's output may be (0: no limit)."""
    lambda_l1: float = Field(0.25, ge=0)
    """L1 regularization of the leaves' outputs."""
    lambda_l2: float = Field(0.2, ge=0)
    """L2 regularization of the leaves' outputs."""
    linear_lambda: float = Field(0.0, ge=0)
    """Regularization of linear trees' models."""
    min_gain_to_split: float = Field(0.03, ge=0)
    """The smallest gain a split must bring."""
    drop_rate: float = Field(0.1, ge=0, le=1)
    """DART: share of the trees dropped in a round."""
    max_drop: int = 50
    """DART: the most trees dropped in a round (negative: no limit)."""
    skip_drop: float = Field(0.5, ge=0, le=1)
    """DART: probability of dropping no tree in a round."""
    xgboost_dart_mode: bool = False
    """DART: weigh the new tree as XGBoost's DART does."""
    uniform_drop: bool = False
    """DART: drop trees uniformly (not by their weight)."""
    drop_seed: int = 4
    """DART: seed of the dropped trees."""
    top_rate: float = Field(0.2, ge=0, le=1)
    """GOSS: share of the rows with the largest gradients kept."""
    other_rate: float = Field(0.1, ge=0, le=1)
    """GOSS: share of the other rows sampled."""
    min_data_per_group: int = Field(100, gt=0)
    """The fewest rows a category's group holds in a categorical split."""
    max_cat_threshold: int = Field(32, gt=0)
    """The most categories a categorical split considers."""
    cat_l2: float = Field(10.0, ge=0)
    """L2 regularization of categorical splits."""
    cat_smooth: float = Field(10.0, ge=0)
    """Smoothing of the categories' statistics (less noise from rare categories)."""
    max_cat_to_onehot: int = Field(4, gt=0)
    """Up to this many categories, a categorical input is split one category against the rest."""
    cegb_tradeoff: float = Field(1.0, ge=0)
    """Cost-effective gradient boosting: multiplier of every penalty."""
    cegb_penalty_split: float = Field(0.0, ge=0)
    """Cost-effective gradient boosting: penalty of each split."""
    path_smooth: float = Field(0.0, ge=0)
    """Smoothing of a node's output toward its parent's."""
    verbose: Literal[-1, 0, 1, 2] = -1
    """LightGBM's own logging (-1: none)."""
    max_bin: int = Field(255, gt=1)
    """The most bins each number input is cut into."""
    feature_pre_filter: bool = True
    """Leave out, before training, the inputs no split can use under ``min_data_in_leaf``."""

    # What the rest of plait reads of any trainer section, fixed for boosting.
    bucketing_field: ClassVar[None] = None
    skip_all_evaluation: ClassVar[bool] = False
    steps_per_checkpoint: ClassVar[int] = 0
    checkpoints_per_epoch: ClassVar[int] = 0

    def lightgbm_parameters(self) -> dict[str, Any]:
        """The settings LightGBM takes as they are (the rest are plait's: rounds, evaluation)."""
        own = {"type", "num_boost_round", "boosting_rounds_per_checkpoint", "early_stop", "validation_field",
               "validation_metric", "eval_batch_size", "evaluate_training_set", "boosting_type"}
        parameters = {key: value for key, value in self.model_dump().items() if key not in own}
        return {**parameters, "boosting": self.boosting_type}


class GBMConfig(PlaitConfig):
    """A gradient-boosted tree model (``model_type: gbm``)."""

    input_features: list[InputFeature] = Field(min_length=1)
    """The columns the trees read: binary, category or number, each read as it is (passthrough),
    or a date, read as its nine numbers."""
    output_features: list[OutputFeature] = Field(min_length=1)
    """The one column the trees predict: binary, category or number."""
    model_type: Literal["gbm"]
    """Gradient-boosted trees (LightGBM)."""
    trainer: GBMTrainerConfig = Field(default_factory=GBMTrainerConfig)
    """LightGBM's settings."""
    combiner: None = None
    """A GBM has none: its trees read the inputs directly."""

    @model_validator(mode="before")
    @classmethod
    def _no_combiner(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("combiner") not in (None, {}):
            raise field_error("combiner", "a GBM has no combiner (its trees read the inputs directly); remove the "
                                          "section, or set model_type: ecd to train a network")
        return {**data, "combiner": None} if isinstance(data, dict) else data

    def _combiner_fits_inputs(self):  # replaces the ECD check: there is no combiner
        return self

    @model_validator(mode="before")
    @classmethod
    def _inputs_as_they_are(cls, data: Any) -> Any:
        """Each input's encoder is passthrough (the trees read the preprocessed value); another,
        on a feature or in ``defaults.<type>`` (which a reload would find merged into the
        feature), is refused by name."""
        features = data.get("input_features") if isinstance(data, dict) else None
        if not isinstance(features, list):
            return data
        defaults = data.get("defaults") if isinstance(data.get("defaults"), dict) else {}
        sections = [(f"defaults.{kind}", kind, section) for kind, section in defaults.items()
                    if kind in GBM_INPUT_TYPES]
        sections += [(f"input_features[{i}]", f.get("type") if isinstance(f, dict) else None, f)
                     for i, f in enumerate(features)]
        for path, feature_type, section in sections:
            encoder = section.get("encoder") if isinstance(section, dict) else None
            if encoder not in (None, {}) and not _read_as_is(feature_type, encoder):
                raise field_error(f"{path}.encoder", "a GBM reads each input as it is (passthrough); remove the "
                                                     "encoder, or set model_type: ecd")
        passthrough = [{**f, "encoder": {"type": "passthrough"}} if isinstance(f, dict) and f.get("type") in ENCODED_AS_IS
                       else f for f in features]  # another type is refused after validation, by name
        return {**data, "input_features": passthrough}

    @model_validator(mode="after")
    def _tabular_features(self):
        for section, features, types in (("input_features", self.input_features, GBM_INPUT_TYPES),
                                         ("output_features", self.output_features, GBM_OUTPUT_TYPES)):
            for i, feature in enumerate(features):
                if feature.type not in types:
                    raise field_error(f"{section}[{i}].type", f"got {feature.type!r}; a GBM takes {', '.join(types)} "
                                                              f"{section.split('_')[0]}s (set model_type: ecd for "
                                                              f"{feature.type} features)")
        if len(self.output_features) != 1:
            raise field_error("output_features", f"got {len(self.output_features)}; a GBM predicts one output")
        return self
