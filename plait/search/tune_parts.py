"""The search algorithm and the scheduler of a search, built from the config for Ray Tune."""

from __future__ import annotations

import importlib
import importlib.util

from plait.config import hyperopt as hc
from plait.errors import ConfigError
from plait.search.space import tune_domain, tune_keys

METRIC = "hyperopt_metric"
"""The name under which a trial reports the searched metric to Tune."""


def check_packages(section: hc.HyperoptConfig) -> None:
    """An optional searcher's or scheduler's package that is missing, named before the search."""
    kind = section.search_alg.type
    if kind in hc.SEARCHERS:
        module, _, packages = hc.SEARCHERS[kind]
        for package in packages.split():
            if importlib.util.find_spec(_module_of(package)) is None:
                raise ConfigError(f"hyperopt.search_alg.type: {kind} needs the package {package!r}, which is not "
                                  f"installed: pip install {packages}, or use type: variant_generator")
    scheduler = section.executor.scheduler
    if isinstance(scheduler, hc.PB2Scheduler) and importlib.util.find_spec("GPy") is None:
        raise ConfigError("hyperopt.executor.scheduler.type: pb2 needs the package 'GPy', which is not installed: "
                          "pip install GPy, or use type: pbt")


def check_scheduler(section: hc.HyperoptConfig) -> None:
    """PBT's mutations and PB2's bounds must name searched parameters (checked before the search)."""
    kind = section.executor.scheduler.type
    if kind == "pbt":
        _mutations(section)
    elif kind == "pb2":
        _bounds(section)


def _module_of(package: str) -> str:
    return {"ax-platform": "ax", "bayesian-optimization": "bayes_opt", "HEBO": "hebo"}.get(package, package)


def searcher(section: hc.HyperoptConfig, seed: int, max_concurrent: int):
    """Tune's search algorithm, limited to ``max_concurrent`` trials at once. The limit is given
    to the searcher itself: Tune's own ``max_concurrent_trials`` is not applied to the variant
    generator, which would then start as many trials as there are resources for drivers."""
    from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

    options = section.search_alg
    settings = _with_tune_keys(options.options, section.parameters)
    if options.type in ("variant_generator", "random"):
        seed = options.random_state if options.random_state is not None else seed
        return BasicVariantGenerator(max_concurrent=max_concurrent, random_state=seed, **settings)
    module, name, _ = hc.SEARCHERS[options.type]
    cls = getattr(importlib.import_module(module), name)
    try:
        algorithm = cls(**settings)  # metric and mode come from Tune's own config
    except TypeError as error:
        raise ConfigError(f"hyperopt.search_alg: {options.type} does not take these settings: {error}") from None
    return ConcurrencyLimiter(algorithm, max_concurrent=max_concurrent)


def _with_tune_keys(settings: dict, parameters: dict) -> dict:
    """The searcher's settings with ``points_to_evaluate`` (trials to run first, written as
    {parameter path: value}) keyed as Tune knows the parameters (``space.tune_keys``)."""
    if settings.get("points_to_evaluate") is None:
        return settings
    keys = tune_keys(parameters)
    points = [{keys[path]: value for path, value in point.items()} for point in settings["points_to_evaluate"]]
    return {**settings, "points_to_evaluate": points}


def check_points(section: hc.HyperoptConfig) -> None:
    """``search_alg.points_to_evaluate``: a list of {searched parameter path: value}."""
    points = section.search_alg.options.get("points_to_evaluate")
    if points is None:
        return
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise ConfigError("hyperopt.search_alg.points_to_evaluate: give a list of mappings of parameter path to value")
    for point in points:
        unknown = [path for path in point if path not in section.parameters]
        if unknown:
            raise ConfigError(f"hyperopt.search_alg.points_to_evaluate: {unknown[0]!r} is not a searched parameter; "
                              f"they are: {', '.join(section.parameters)}")


def scheduler(section: hc.HyperoptConfig):
    """Tune's trial scheduler."""
    from ray.tune import schedulers as ts

    options = section.executor.scheduler
    fields = options.model_dump(exclude={"type"})  # metric and mode come from Tune's own config
    if isinstance(options, hc.FifoScheduler):
        return ts.FIFOScheduler()
    if isinstance(options, hc.AsyncHyperbandScheduler):
        return ts.AsyncHyperBandScheduler(**fields)
    if isinstance(options, hc.BOHBScheduler):
        return ts.HyperBandForBOHB(**fields)
    if isinstance(options, hc.HyperbandScheduler):
        return ts.HyperBandScheduler(**fields)
    if isinstance(options, hc.MedianStoppingScheduler):
        return ts.MedianStoppingRule(**fields)
    if isinstance(options, hc.PBTScheduler):
        fields["hyperparam_mutations"] = _mutations(section)
        return ts.PopulationBasedTraining(**fields)
    from ray.tune.schedulers.pb2 import PB2

    fields["hyperparam_bounds"] = _bounds(section)
    return PB2(**fields)


def _mutations(section: hc.HyperoptConfig) -> dict:
    """PBT's mutations by Tune key: the given ones, else every searched ``trainer.`` parameter
    (a changed model shape could not load the donor's weights)."""
    from pydantic import TypeAdapter

    key_of = tune_keys(section.parameters)
    given = section.executor.scheduler.hyperparam_mutations
    chosen = given or {path: None for path in key_of if path.startswith("trainer.")}
    if not chosen:
        raise ConfigError("hyperopt.executor.scheduler.hyperparam_mutations: pbt needs parameters to mutate; search "
                          "at least one trainer.* parameter, or name them here")
    mutations = {}
    for path, value in chosen.items():
        if path not in key_of:
            raise ConfigError(f"hyperopt.executor.scheduler.hyperparam_mutations: {path} is not a searched parameter; "
                              f"searched: {', '.join(key_of)}")
        space = section.parameters[path] if value is None else value
        if isinstance(space, dict):
            space = TypeAdapter(hc.Space).validate_python(space)
        mutations[key_of[path]] = _mutation(space, tune_domain)
    return mutations


def _mutation(space, tune_domain):
    """A PBT mutation: a list of values (PBT moves to a neighbour or resamples), else a domain."""
    if isinstance(space, (list, tuple)):
        return list(space)
    if isinstance(space, hc.GridSearchSpace):
        return list(space.values)
    if isinstance(space, hc.ChoiceSpace):
        return list(space.categories)
    return tune_domain(space)


def _bounds(section: hc.HyperoptConfig) -> dict:
    key_of = tune_keys(section.parameters)
    given = section.executor.scheduler.hyperparam_bounds
    if given:
        unknown = [path for path in given if path not in key_of]
        if unknown:
            raise ConfigError(f"hyperopt.executor.scheduler.hyperparam_bounds: {', '.join(unknown)} is not a searched "
                              f"parameter; searched: {', '.join(key_of)}")
        return {key_of[path]: list(bounds) for path, bounds in given.items()}
    bounds = {key_of[path]: [space.lower, space.upper] for path, space in section.parameters.items()
              if path.startswith("trainer.") and hasattr(space, "upper")}
    if not bounds:
        raise ConfigError("hyperopt.executor.scheduler.hyperparam_bounds: pb2 needs ranges to search; search a "
                          "trainer.* parameter with lower and upper bounds, or give them here")
    return bounds
