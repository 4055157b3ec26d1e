"""The ``hyperopt`` section: Ludwig's hyperparameter search settings, typed.

A search has a goal (a metric of an output feature on a split), parameters (dotted paths into
the config, each with a space of values), a search algorithm and an executor (how many trials,
their resources, and the scheduler that may stop or mutate them). The search itself runs in
``plait.search``; this module is plain data and knows nothing of Ray.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, model_validator

from plait.config.base import StrictModel, TypedModel, field_error, shown
from plait.config.metrics import COMBINED, COMBINED_METRICS, METRICS_BY_OUTPUT_TYPE

# ---- spaces ---------------------------------------------------------------------------------------


class _Space(StrictModel):
    space: str

    def sample_values(self) -> list:
        """Values to check the config with before any trial starts: the ones Tune may draw that
        change a config's shape (every category), or the lower bound of a range."""
        return [self.lower]  # type: ignore[attr-defined]


class _Bounded(_Space):
    lower: float
    """The smallest value (inclusive)."""
    upper: float
    """The largest value (exclusive for continuous spaces, as in Ray Tune)."""

    @model_validator(mode="after")
    def _ordered(self):
        if self.lower >= self.upper:
            raise ValueError(f"lower ({self.lower:g}) must be below upper ({self.upper:g})")
        return self


class _LogScale(_Bounded):
    base: float = Field(10, gt=1)
    """The logarithm's base."""

    @model_validator(mode="after")
    def _positive(self):
        if self.lower <= 0:
            raise ValueError(f"lower ({self.lower:g}) must be above 0 for a log space")
        return self


class UniformSpace(_Bounded):
    space: Literal["uniform"]


class QUniformSpace(_Bounded):
    space: Literal["quniform"]
    q: float = Field(gt=0)
    """Values are rounded to a multiple of q."""


class LogUniformSpace(_LogScale):
    space: Literal["loguniform"]


class QLogUniformSpace(_LogScale):
    space: Literal["qloguniform"]
    q: float = Field(gt=0)
    """Values are rounded to a multiple of q."""


class RandnSpace(_Space):
    space: Literal["randn"]
    mean: float = 0.0
    """The normal distribution's mean."""
    sd: float = Field(1.0, gt=0)
    """The normal distribution's standard deviation."""

    def sample_values(self) -> list:
        return [self.mean]


class QRandnSpace(RandnSpace):
    space: Literal["qrandn"]
    q: float = Field(gt=0)
    """Values are rounded to a multiple of q."""


class _IntBounded(_Bounded):
    lower: int
    """The smallest value (inclusive)."""
    upper: int
    """The largest value (exclusive, as in Ray Tune)."""


class RandintSpace(_IntBounded):
    space: Literal["randint"]


class QRandintSpace(_IntBounded):
    space: Literal["qrandint"]
    q: int = Field(1, gt=0)
    """Values are rounded to a multiple of q."""


class LogRandintSpace(_IntBounded, _LogScale):
    space: Literal["lograndint"]


class QLogRandintSpace(_IntBounded, _LogScale):
    space: Literal["qlograndint"]
    q: int = Field(1, gt=0)
    """Values are rounded to a multiple of q."""


class IntSpace(_IntBounded):
    """Ludwig's ``int`` space (its Optuna executor's and search space generator's): a whole number
    from lower to upper, both included."""

    space: Literal["int"]
    upper: int
    """The largest value (inclusive, as in Ludwig)."""


class ChoiceSpace(_Space):
    space: Literal["choice"]
    categories: list[Any] = Field(min_length=1)
    """The values to choose from (numbers, strings, or whole sub-configs)."""

    def sample_values(self) -> list:
        return list(self.categories)


class GridSearchSpace(_Space):
    space: Literal["grid_search"]
    values: list[Any] = Field(min_length=1)
    """Every value is tried, once per sample (each grid point makes a trial)."""

    def sample_values(self) -> list:
        return list(self.values)


Space = Annotated[Union[UniformSpace, QUniformSpace, LogUniformSpace, QLogUniformSpace, RandnSpace, QRandnSpace,
                        RandintSpace, QRandintSpace, LogRandintSpace, QLogRandintSpace, IntSpace, ChoiceSpace,
                        GridSearchSpace],
                  Field(discriminator="space")]

# ---- search algorithms ---------------------------------------------------------------------------

SEARCHERS: dict[str, tuple[str, str, str]] = {
    "hyperopt": ("ray.tune.search.hyperopt", "HyperOptSearch", "hyperopt"),
    "optuna": ("ray.tune.search.optuna", "OptunaSearch", "optuna"),
    "bohb": ("ray.tune.search.bohb", "TuneBOHB", "hpbandster ConfigSpace"),
    "ax": ("ray.tune.search.ax", "AxSearch", "ax-platform"),
    "bayesopt": ("ray.tune.search.bayesopt", "BayesOptSearch", "bayesian-optimization"),
    "hebo": ("ray.tune.search.hebo", "HEBOSearch", "HEBO"),
    "nevergrad": ("ray.tune.search.nevergrad", "NevergradSearch", "nevergrad"),
    "zoopt": ("ray.tune.search.zoopt", "ZOOptSearch", "zoopt"),
}
"""Ray Tune's optional searchers: (module, class, the pip package(s) it needs)."""

SEARCHERS_GONE = ("blendsearch", "cfo", "dragonfly", "skopt")
"""Ludwig's searchers that Ray 2.60 no longer ships."""


class SearchAlgConfig(StrictModel):
    """How the next trial's values are chosen. Keys other than ``type`` go to the searcher."""

    model_config = ConfigDict(extra="allow")
    type: str = "variant_generator"
    """variant_generator (random draws and grids; also ``random``), or one of Ray Tune's searchers
    when its package is installed: hyperopt, optuna, bohb, ax, bayesopt, hebo, nevergrad, zoopt."""
    random_state: int | None = None
    """The seed of the variant generator's draws (default: the run's ``--random-seed``)."""

    @model_validator(mode="after")
    def _known(self):
        if self.type in SEARCHERS_GONE:
            raise field_error("type", f"got {self.type!r}, which Ray Tune 2.60 no longer has; use "
                                      "variant_generator, hyperopt or optuna")
        if self.type not in ("variant_generator", "random", *SEARCHERS):
            raise field_error("type", f"got {self.type!r}; valid choices are: variant_generator, random, "
                                      f"{', '.join(SEARCHERS)}")
        return self

    @property
    def options(self) -> dict:
        return dict(self.model_extra or {})


# ---- schedulers ----------------------------------------------------------------------------------

TIME_ATTRS = Literal["time_total_s", "training_iteration", "epoch", "step"]


class FifoScheduler(TypedModel):
    type: Literal["fifo"]


class AsyncHyperbandScheduler(TypedModel):
    """Asynchronous successive halving (ASHA): stops the trials whose metric is in the bottom
    part at each rung."""

    type: Literal["async_hyperband", "asha", "asynchyperband"]
    time_attr: TIME_ATTRS = "time_total_s"
    """What measures a trial's progress: seconds, evaluations (training_iteration), epochs or steps."""
    max_t: int = Field(3600, gt=0)
    """A trial ends at this much time_attr."""
    grace_period: int = Field(72, gt=0)
    """No trial is stopped before this much time_attr."""
    reduction_factor: float = Field(5, gt=1)
    """1/reduction_factor of the trials go on at each rung."""
    brackets: int = Field(1, gt=0)
    """The number of brackets."""


class HyperbandScheduler(TypedModel):
    """Synchronous Hyperband."""

    type: Literal["hyperband"]
    time_attr: TIME_ATTRS = "time_total_s"
    """What measures a trial's progress."""
    max_t: int = Field(81, gt=0)
    """A trial ends at this much time_attr."""
    reduction_factor: float = Field(3, gt=1)
    """1/reduction_factor of the trials go on at each round."""
    stop_last_trials: bool = True
    """Whether trials stop at max_t."""


class BOHBScheduler(HyperbandScheduler):
    """Hyperband for BOHB (use with ``search_alg: {type: bohb}``)."""

    type: Literal["hb_bohb"]


class MedianStoppingScheduler(TypedModel):
    """Stops a trial whose best result is below the median of the others at the same time."""

    type: Literal["median_stopping_rule"]
    time_attr: TIME_ATTRS = "time_total_s"
    """What measures a trial's progress."""
    grace_period: float = Field(60.0, ge=0)
    """No trial is stopped before this much time_attr."""
    min_samples_required: int = Field(3, gt=0)
    """How many other trials must have reported first."""
    min_time_slice: int = Field(0, ge=0)
    """Each trial runs at least this long before it may be paused."""
    hard_stop: bool = True
    """Stop the trial (true) or pause it (false)."""


class PBTScheduler(TypedModel):
    """Population based training: a lagging trial continues from a leading trial's checkpoint
    with mutated parameters."""

    type: Literal["pbt"]
    time_attr: TIME_ATTRS = "time_total_s"
    """What measures a trial's progress."""
    perturbation_interval: float = Field(60.0, gt=0)
    """How much time_attr between exploits."""
    burn_in_period: float = Field(0.0, ge=0)
    """No exploit before this much time_attr."""
    hyperparam_mutations: dict[str, Any] | None = None
    """Parameter path -> a list of values or a space ({space: uniform, ...}) to mutate to
    (default: the searched ``trainer.`` parameters)."""
    quantile_fraction: float = Field(0.25, ge=0, le=0.5)
    """The bottom fraction that copies the top fraction."""
    resample_probability: float = Field(0.25, ge=0, le=1)
    """The chance of drawing a new value instead of perturbing the current one."""
    perturbation_factors: tuple[float, float] = (0.8, 1.2)
    """A continuous value is multiplied by one of these."""
    log_config: bool = True
    """Keep each trial's changes in its folder."""
    require_attrs: bool = True
    """Every report must have time_attr and the metric."""
    synch: bool = False
    """Exploit all trials at once, at every interval."""


class PB2Scheduler(TypedModel):
    """PB2: PBT with a Gaussian-process bandit choosing the new values (needs GPy and sklearn)."""

    type: Literal["pb2"]
    time_attr: TIME_ATTRS = "time_total_s"
    """What measures a trial's progress."""
    perturbation_interval: float = Field(60.0, gt=0)
    """How much time_attr between exploits."""
    hyperparam_bounds: dict[str, tuple[float, float]] | None = None
    """Parameter path -> [lower, upper] (default: the bounds of the searched ``trainer.`` ranges)."""
    quantile_fraction: float = Field(0.25, ge=0, le=0.5)
    """The bottom fraction that copies the top fraction."""
    log_config: bool = True
    """Keep each trial's changes in its folder."""
    require_attrs: bool = True
    """Every report must have time_attr and the metric."""
    synch: bool = False
    """Exploit all trials at once, at every interval."""


SCHEDULERS_REFUSED = {
    "resource_changing": "plait sizes trials before the search starts (executor.cpu_resources_per_trial)",
    "pbt_replay": "replay a PBT schedule by searching the values it found with grid_search",
}


SchedulerConfig = Annotated[Union[FifoScheduler, AsyncHyperbandScheduler, HyperbandScheduler, BOHBScheduler,
                                  MedianStoppingScheduler, PBTScheduler, PB2Scheduler], Field(discriminator="type")]


# ---- executor and the section --------------------------------------------------------------------

class ExecutorConfig(StrictModel):
    """How trials run: Ray Tune on the cluster plait joins (or a local Ray started for the search)."""

    type: Literal["ray"] = "ray"
    """Ray Tune (Ludwig's only executor)."""
    num_samples: int | None = Field(None, gt=0)
    """How many trials (with grid_search: how many times each grid point); default 10, or 1 when a
    parameter is a grid_search."""
    time_budget_s: float | None = Field(3600, gt=0)
    """The search stops after this many seconds; running trials keep their best model so far."""
    cpu_resources_per_trial: float = Field(1, ge=0)
    """CPUs a trial that trains in its own process holds."""
    gpu_resources_per_trial: float = Field(0, ge=0)
    """GPUs a trial that trains in its own process holds."""
    max_concurrent_trials: int | Literal["auto"] | None = "auto"
    """How many trials run at once: auto (as many as the cluster holds, leaving room for data
    loading), or a number (refused when the cluster cannot hold that many)."""
    trial_driver_resources: dict[str, float] | None = None
    """What the driver of a trial that is a Ray Train worker group holds (default 1 CPU, or 0.5
    CPU on a cluster of under 4 CPUs)."""
    kubernetes_namespace: None = None
    """Accepted for Ludwig compatibility at null (plait joins the cluster it finds)."""
    scheduler: SchedulerConfig = Field(default_factory=lambda: FifoScheduler(type="fifo"))
    """What may stop or mutate a running trial: fifo (none), async_hyperband (asha), hyperband,
    hb_bohb, median_stopping_rule, pbt or pb2."""

    @model_validator(mode="before")
    @classmethod
    def _refused_schedulers(cls, data: Any) -> Any:
        kind = data.get("scheduler", {}).get("type") if isinstance(data, dict) and isinstance(
            data.get("scheduler"), dict) else None
        if kind in SCHEDULERS_REFUSED:
            raise field_error("scheduler.type", f"got {kind!r}, which plait does not implement: {SCHEDULERS_REFUSED[kind]}")
        return data


class HyperoptConfig(StrictModel):
    """Ludwig's hyperparameter search: ``plait hyperopt`` runs it on Ray Tune; ``train`` ignores it."""

    goal: Literal["minimize", "maximize"] = "minimize"
    """Whether the metric should be small or large."""
    metric: str = "loss"
    """The metric to optimize: one that ``output_feature`` reports."""
    output_feature: str = "combined"
    """An output feature's name, or combined (the weighted total over the outputs)."""
    split: Literal["validation", "training", "test"] = "validation"
    """The split the metric is computed on at every evaluation (test is refused: it judges the
    model the search picks)."""
    parameters: dict[str, Space] = Field(default_factory=dict)
    """Dotted path into the config (``trainer.learning_rate``, ``<feature name>.encoder.dropout``,
    ``defaults.<type>.…``, ``combiner.…``, or ``.`` for a mapping merged into the whole config) ->
    its space."""
    search_alg: SearchAlgConfig = Field(default_factory=SearchAlgConfig)
    """How values are chosen."""
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    """How trials run."""

    @model_validator(mode="after")
    def _not_test(self):
        if self.split == "test":
            raise field_error("split", "got 'test'; plait reports the validation split at every evaluation, and the "
                                       "test split judges the model the search picks: use validation (or training)")
        return self

    @property
    def mode(self) -> str:
        return "min" if self.goal == "minimize" else "max"

    @property
    def has_grid(self) -> bool:
        return any(isinstance(space, GridSearchSpace) for space in self.parameters.values())

    @property
    def num_samples(self) -> int:
        if self.executor.num_samples is not None:
            return self.executor.num_samples
        return 1 if self.has_grid else 10


def check_hyperopt_target(hyperopt: HyperoptConfig, outputs: dict[str, str]) -> None:
    """The searched metric must be one the output feature reports (``outputs``: each output
    feature's type by name)."""
    feature, metric = hyperopt.output_feature, hyperopt.metric
    if feature != COMBINED and feature not in outputs:
        raise field_error("hyperopt.output_feature", f"got {shown(feature)}, which is no output feature; valid "
                                                     f"choices are: {', '.join([*outputs, COMBINED])}")
    known = METRICS_BY_OUTPUT_TYPE[outputs[feature]] if feature in outputs else COMBINED_METRICS
    if metric not in known:
        raise field_error("hyperopt.metric", f"got {shown(metric)}, which output feature {feature} does not "
                                             f"report; valid choices are: {', '.join(known)}")
