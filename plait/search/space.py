"""Parameters: their spaces as Ray Tune domains, and a trial's values put into the config.

A parameter is a dotted path into the config as the user wrote it (Ludwig names upgraded, no
defaults filled in): ``trainer.learning_rate``, ``<feature name>.encoder.dropout``,
``defaults.text.encoder.type``, or ``.`` for a mapping merged into the whole config. Values are
set before validation, so ``defaults`` reach their features as they would in a hand-written
config.
"""

from __future__ import annotations

import copy
import difflib
import itertools
from typing import Any

from plait.config import hyperopt as spaces
from plait.errors import ConfigError

WHOLE_CONFIG = "."


def tune_domain(space):
    """The Ray Tune domain of one space."""
    from ray import tune

    builders = {
        spaces.UniformSpace: lambda s: tune.uniform(s.lower, s.upper),
        spaces.QUniformSpace: lambda s: tune.quniform(s.lower, s.upper, s.q),
        spaces.LogUniformSpace: lambda s: tune.loguniform(s.lower, s.upper, s.base),
        spaces.QLogUniformSpace: lambda s: tune.qloguniform(s.lower, s.upper, s.q, s.base),
        spaces.QRandnSpace: lambda s: tune.qrandn(s.mean, s.sd, s.q),
        spaces.RandnSpace: lambda s: tune.randn(s.mean, s.sd),
        spaces.RandintSpace: lambda s: tune.randint(s.lower, s.upper),
        spaces.IntSpace: lambda s: tune.randint(s.lower, s.upper + 1),  # Ludwig's upper is included
        spaces.QRandintSpace: lambda s: tune.qrandint(s.lower, s.upper, s.q),
        spaces.LogRandintSpace: lambda s: tune.lograndint(s.lower, s.upper, s.base),
        spaces.QLogRandintSpace: lambda s: tune.qlograndint(s.lower, s.upper, s.q, s.base),
        spaces.ChoiceSpace: lambda s: tune.choice(s.categories),
        spaces.GridSearchSpace: lambda s: tune.grid_search(s.values),
    }
    return builders[type(space)](space)


def param_space(parameters: dict) -> dict:
    """Tune's parameter space. Tune reads dots in a key as nesting, so each path is stored
    under a key of its own (``p0``, ``p1``, ...: :func:`tune_keys`) and :func:`trial_values` maps
    them back."""
    keys = tune_keys(parameters)
    return {keys[path]: tune_domain(space) for path, space in parameters.items()}


def tune_keys(paths) -> dict[str, str]:
    """{parameter path: its key in Tune's config}, in the order the parameters are given."""
    return {path: f"p{i}" for i, path in enumerate(paths)}


def trial_values(paths, tune_config: dict) -> dict:
    """{parameter path: value} of one trial, from the config Tune gave it (None for a key it lacks)."""
    return {path: tune_config.get(key) for path, key in tune_keys(paths).items()}


def apply(source: dict, values: dict[str, Any]) -> dict:
    """A copy of the config ``source`` with each parameter path set to its value."""
    config = copy.deepcopy(source)
    config.pop("hyperopt", None)  # a trial is a plain training run
    for path, value in values.items():
        if path == WHOLE_CONFIG:
            if not isinstance(value, dict):
                raise ConfigError(f"hyperopt.parameters.'.': a value for the whole config must be a mapping of "
                                  f"config sections, got {value!r}")
            for key, part in value.items():
                _set(config, [key], part)
            continue
        _set(config, path.split("."), value)
    return config


def _set(config: dict, parts: list[str], value: Any) -> None:
    node = config
    feature = _feature(config, parts[0])
    if feature is not None:
        if len(parts) == 1:
            raise ConfigError(f"hyperopt.parameters.{parts[0]}: names a whole feature; name one of its settings "
                              f"({parts[0]}.encoder.<setting>, {parts[0]}.preprocessing.<setting>, ...)")
        node, parts = feature, parts[1:]
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):  # a type given alone (encoder: rnn) is a sub-config of that type
            child = {"type": child} if isinstance(child, str) else {}
            node[part] = child
        node = child
    node[parts[-1]] = _merged(node.get(parts[-1]), value)


def _merged(old: Any, new: Any) -> Any:
    """A sub-config value merges into the one there, unless it names another ``type`` (a new
    encoder or combiner replaces the old one with all its settings)."""
    if isinstance(old, dict) and isinstance(new, dict) and new.get("type", old.get("type")) == old.get("type"):
        return {**old, **copy.deepcopy(new)}
    return copy.deepcopy(new)


def _feature(config: dict, name: str) -> dict | None:
    for section in ("input_features", "output_features"):
        for feature in config.get(section) or []:
            if isinstance(feature, dict) and feature.get("name") == name:
                return feature
    return None


# ---- checks before any trial starts --------------------------------------------------------------

MAX_CHECKED_CONFIGS = 64
"""At most this many combinations of the categorical values are validated before the search."""


def check_parameters(source: dict, parameters: dict, validate) -> None:
    """Every path must name a setting, and every value Tune may draw that changes the config's
    shape must make a valid config (``validate(config dict)`` raises ConfigError)."""
    known = known_paths(source, validate)
    for path in parameters:
        _check_path(path, _as_feature_path(path, source, known), known, parameters)
    choices = [[(path, v) for v in space.sample_values()] for path, space in parameters.items()]
    for combination in itertools.islice(itertools.product(*choices), MAX_CHECKED_CONFIGS):
        values = dict(combination)
        try:
            validate(apply(source, values))
        except ConfigError as error:
            shown = ", ".join(f"{path}={value!r}" for path, value in values.items())
            raise ConfigError([f"hyperopt.parameters: {shown} makes the config invalid:", *error.problems]) from None


def known_paths(source: dict, validate) -> set[str]:
    """The dotted paths of the config's settings with every default filled in, features under
    their names (``title.encoder.dropout``)."""
    from plait.config.render import resolved_dict

    resolved = resolved_dict(validate(apply(source, {})))
    paths: set[str] = set()
    for section, value in resolved.items():
        if section in ("input_features", "output_features"):
            for feature in value:
                _flatten(feature, feature["name"], paths)
        elif section != "hyperopt":
            _flatten(value, section, paths)
    return paths


def _flatten(value: Any, prefix: str, into: set[str]) -> None:
    into.add(prefix)
    if isinstance(value, dict):
        for key, child in value.items():
            _flatten(child, f"{prefix}.{key}", into)


def _as_feature_path(path: str, source: dict, known: set[str]) -> str:
    """``defaults.<type>.<rest>`` names ``<feature>.<rest>`` of each feature of that type: it
    is checked as the first such feature's (or as itself where no feature has the type)."""
    parts = path.split(".")
    if len(parts) < 3 or parts[0] != "defaults":
        return path
    names = [f.get("name") for section in ("input_features", "output_features") for f in source.get(section) or []
             if isinstance(f, dict) and f.get("type") == parts[1]]
    rest = ".".join(parts[2:])
    return next((f"{name}.{rest}" for name in names if f"{name}.{rest}" in known), f"{names[0]}.{rest}" if names else path)


def _check_path(path: str, checked_as: str, known: set[str], parameters: dict) -> None:
    """A path must name a setting of the config with its defaults, or one of a sub-config whose
    type another parameter searches (rnn's ``num_layers`` while the default encoder is
    parallel_cnn): the values are checked for those. ``checked_as``: the path a ``defaults.``
    path stands for."""
    if path == WHOLE_CONFIG or checked_as in known:
        return
    parent = checked_as.rpartition(".")[0]
    retyped = WHOLE_CONFIG in parameters or any(
        other in (parent, f"{parent}.type") or parent.startswith(f"{other}.") for other in parameters if other != path)
    if retyped and parent in known:
        return
    nearest = difflib.get_close_matches(checked_as, sorted(known), n=1, cutoff=0.5)
    if nearest and checked_as != path:  # shown in the defaults spelling the user wrote
        nearest = [".".join(path.split(".")[:2] + nearest[0].split(".")[1:])]
    hint = f"; the nearest valid path is {nearest[0]}" if nearest else ""
    raise ConfigError(f"hyperopt.parameters.{path}: names nothing in the config{hint} (paths are config sections "
                      "such as trainer.learning_rate, or a feature's name then its settings: <feature>.encoder.dropout)")
