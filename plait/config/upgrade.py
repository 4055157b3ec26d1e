"""Ludwig's older config names, rewritten to today's before validation.

Ludwig upgrades a config written for an older version as it loads it (``training`` became
``trainer``, ``fc_size`` became ``output_size``, the learning-rate schedule moved under
``trainer.learning_rate_scheduler``, ...). :func:`upgrade` does the same for every such rule that
can touch an ECD config, and returns what it renamed so that one line can tell the user. It also
drops the fields Ludwig computes from the data and writes into the configs it renders and into a
saved model's ``model_hyperparameters.json`` (``proc_column``, an encoder's ``vocab``, ...): they
are not settings, so they go without a word.

Where an old and a new name are both given, the new one wins and the old one is dropped, as in
Ludwig. The caller's dict is never modified.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from plait.config.base import SHOWN_CHARACTERS, shown
from plait.config.defaults import INPUT_CLASSES, MODULE_DEFAULT_TYPES, OUTPUT_CLASSES, module_class, with_type
from plait.errors import ConfigError

Note = Callable[[str], None]

LUDWIG_FEATURE_TYPES = ("audio", "bag", "binary", "category", "date", "h3", "image", "number", "sequence", "set",
                        "text", "timeseries", "vector")
"""The feature types of Ludwig's ECD model (each has a ``defaults.<type>`` section)."""

UPGRADED_TRAINER_KEYS = {
    "reduce_learning_rate_on_plateau": "reduce_on_plateau",
    "reduce_learning_rate_on_plateau_patience": "reduce_on_plateau_patience",
    "reduce_learning_rate_on_plateau_rate": "reduce_on_plateau_rate",
    "reduce_learning_rate_eval_metric": "reduce_eval_metric",
    "reduce_learning_rate_eval_split": "reduce_eval_split",
    "decay": "decay",
    "decay_steps": "decay_steps",
    "decay_rate": "decay_rate",
    "staircase": "staircase",
    "learning_rate_warmup_epochs": "warmup_evaluations",
}
"""Trainer keys of Ludwig before 0.7, and their names under ``trainer.learning_rate_scheduler``."""

OLD_TEXT_PREPROCESSING = {
    "sequence_length_limit": "max_sequence_length", "word_sequence_length_limit": "max_sequence_length",
    "char_sequence_length_limit": "max_sequence_length", "word_most_common": "most_common",
    "char_most_common": "most_common", "word_tokenizer": "tokenizer", "char_tokenizer": "tokenizer",
    "word_vocab_file": "vocab_file", "char_vocab_file": "vocab_file",
}
"""Text preprocessing keys of Ludwig 0.3 (one per ``level``, word or char), and today's names."""

OLD_SIZE_NAMES = {"fc_size": "output_size", "transformer_fc_size": "transformer_output_size"}
"""Layer sizes as Ludwig named them before 0.5."""

OLD_BIAS_NAMES = {"bias": "use_bias", "conv_bias": "conv_use_bias", "default_bias": "default_use_bias"}

REMOVED_TEXT_ENCODERS = {"transformer_xl": "auto_transformer", "ctrl": "auto_transformer",
                         "flaubert": "auto_transformer"}
"""Text encoders Ludwig removed in 0.11, which it maps to auto_transformer."""

LUDWIG_FEATURE_KEYS = {
    "input": {"active", "name", "type", "column", "proc_column", "tied", "preprocessing", "encoder"},
    "output": {"active", "name", "type", "column", "proc_column", "preprocessing", "decoder", "loss", "reduce_input",
               "default_validation_metric", "dependencies", "reduce_dependencies", "input_size", "num_classes",
               "threshold", "calibration", "top_k", "clip", "class_similarities", "vector_size", "softmax",
               "horizon"},
}
"""Keys Ludwig keeps at the level of a feature; before 0.6 an encoder's or decoder's settings sat
there too, and are moved into the ``encoder`` or ``decoder`` section."""

OLD_BETA_NAMES = (("beta_1", "beta1"), ("beta_2", "beta2"))
"""Adam's two betas, one key each, as Ludwig's documentation before 0.6 spelled them (``betas`` now)."""

OLD_CLIPPING_NAMES = {"clip_global_norm": "clipglobalnorm", "clipglobalnorm": "clipglobalnorm",
                      "clip_norm": "clipnorm", "clipnorm": "clipnorm",
                      "clip_value": "clipvalue", "clipvalue": "clipvalue"}
"""Gradient clipping set on the optimizer (Ludwig before 0.5 and its documentation before 0.6), and
its name under ``trainer.gradient_clipping``."""

DECODER_FC_KEYS = ("fc_layers", "output_size", "use_bias", "weights_initializer", "bias_initializer", "norm",
                   "norm_params", "activation", "dropout")
"""A decoder's layer settings, which Ludwig 0.6 prefixed with ``fc_`` when it nested them."""


def upgrade(config: Any) -> tuple[Any, list[str]]:
    """``config`` with Ludwig's older names upgraded and computed fields dropped, and the list of
    what was renamed (``"training -> trainer"``). Anything but a mapping is returned as it is."""
    if not isinstance(config, dict):
        return config, []
    _check_depth(config)
    config = copy.deepcopy(config)
    renames: list[str] = []

    def note(rename: str) -> None:
        if rename not in renames:
            renames.append(rename)

    for step in STEPS:
        step(config, note)
    drop_computed_fields(config)
    return config, renames


MAX_DEPTH = 100
"""How deeply a config may nest mappings and lists. Real configs nest fewer than ten levels; the
upgrade walks (and copies) the config recursively, which a far deeper one would overflow."""


def _check_depth(config: dict) -> None:
    pending = [(config, "", 0)]
    while pending:  # iteratively: the check must not overflow either
        value, path, depth = pending.pop()
        if depth > MAX_DEPTH:
            path = path if len(path) <= SHOWN_CHARACTERS else f"{path[:SHOWN_CHARACTERS]}..."
            raise ConfigError(f"{path}: nested more than {MAX_DEPTH} levels deep; a config never is, so this is "
                              "refused (check the file for runaway brackets)")
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            if isinstance(child, (dict, list)):
                pending.append((child, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}".lstrip("."),
                                depth + 1))


# ---- helpers ----------------------------------------------------------------------------------

def _section(parent: dict, key: str) -> dict | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _features(config: dict, kind: str) -> list[tuple[str, dict]]:
    """(path, feature) of each input (kind "input") or output feature written as a mapping."""
    section = f"{kind}_features"
    features = config.get(section)
    return [(f"{section}[{i}]", x) for i, x in enumerate(features if isinstance(features, list) else [])
            if isinstance(x, dict)]


def _move(source: dict, old: str, target: dict, new: str, note: Note, old_path: str, new_path: str) -> None:
    """Move ``source[old]`` to ``target[new]``; a value already at the new name wins."""
    if old not in source:
        return
    value = source.pop(old)
    target.setdefault(new, value)
    note(f"{old_path}{old} -> {new_path}{new}")


def _rename_keys(section: dict | None, names: dict[str, str], note: Note, path: str) -> None:
    if section is None:
        return
    for old, new in names.items():
        _move(section, old, section, new, note, path, path)


def _each_dict(value: Any, path: str):
    """Every mapping inside ``value`` (itself included), innermost first, with its dotted path."""
    if isinstance(value, dict):
        for key, child in list(value.items()):
            yield from _each_dict(child, f"{path}{key}.")
        yield value, path
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _each_dict(child, f"{path[:-1]}[{i}].")


def _type_preprocessing_sections(config: dict) -> list[tuple[str, dict, Any]]:
    """(path, preprocessing, feature type) of every per-type preprocessing section: under top-level
    ``preprocessing.<type>``, ``defaults.<type>.preprocessing`` and each feature."""
    found = []
    preprocessing = _section(config, "preprocessing") or {}
    defaults = _section(config, "defaults") or {}
    for ftype in LUDWIG_FEATURE_TYPES:
        if _section(preprocessing, ftype) is not None:
            found.append((f"preprocessing.{ftype}.", preprocessing[ftype], ftype))
        type_defaults = _section(defaults, ftype) or {}
        if _section(type_defaults, "preprocessing") is not None:
            found.append((f"defaults.{ftype}.preprocessing.", type_defaults["preprocessing"], ftype))
    for kind in ("input", "output"):
        for path, feature in _features(config, kind):
            if _section(feature, "preprocessing") is not None:
                found.append((f"{path}.preprocessing.", feature["preprocessing"], feature.get("type")))
    return found


# ---- the rules, in the order of the Ludwig versions that introduced them -----------------------

def _text_preprocessing_names(config: dict, note: Note) -> None:
    """0.4: per-level text settings (``word_tokenizer``, ``char_most_common``, ...)."""
    for path, preprocessing, ftype in _type_preprocessing_sections(config):
        if ftype in ("text", "sequence", "audio", "timeseries"):
            _rename_keys(preprocessing, OLD_TEXT_PREPROCESSING, note, path)


def _audio_feature_settings(config: dict, note: Note) -> None:
    """0.6: an audio feature's ``preprocessing.audio_feature`` block is unnested into its
    preprocessing; as in Ludwig, the block's value of a key set in both wins."""
    for path, preprocessing, ftype in _type_preprocessing_sections(config):
        block = preprocessing.get("audio_feature") if ftype == "audio" else None
        if isinstance(block, dict):
            preprocessing.update(preprocessing.pop("audio_feature"))
            for key in block:
                note(f"{path}audio_feature.{key} -> {path}{key}")


def _training_section(config: dict, note: Note) -> None:
    """0.5: the ``training`` section is ``trainer``."""
    if "training" not in config:
        return
    training = config.pop("training")
    trainer = config.get("trainer")
    config["trainer"] = {**training, **trainer} if isinstance(training, dict) and isinstance(trainer, dict) else (
        trainer if "trainer" in config else training)
    note("training -> trainer")


def _feature_weight_regularization(config: dict, note: Note) -> None:
    """0.4: Ludwig's examples wrote ``weight_regularization: null`` on features. No Ludwig version
    read it (0.4 regularized per layer with ``weights_regularizer``; today the trainer's
    regularization covers every weight), and Ludwig 0.17 drops it without a word. null asks for
    nothing, so it goes; any other value asks for something Ludwig never did, and is refused."""
    for kind in ("input", "output"):
        for path, feature in _features(config, kind):
            if "weight_regularization" not in feature:
                continue
            value = feature.pop("weight_regularization")
            if value is not None:
                raise ConfigError(
                    f"{path}.weight_regularization: got {shown(value)}; no Ludwig version read this key (Ludwig 0.17 "
                    "drops it), so plait refuses it rather than ignore it: regularize the weights with "
                    "trainer.regularization_type and trainer.regularization_lambda (they cover every weight, as "
                    "in Ludwig), or remove it")
            note(f"{path}.weight_regularization (removed: null; no Ludwig version reads it)")


def _tabnet_virtual_batch_divider(config: dict, note: Note) -> None:
    """0.4: Ludwig's TabNet examples wrote ``bn_virtual_divider``, the number of virtual batches in
    a batch (B / B_v in the paper), beside ``bn_virtual_bs`` (B_v). Ludwig reads only
    ``bn_virtual_bs``, so a divider beside it goes. Alone, it means ``bn_virtual_bs = batch_size /
    divider``, which is computed where ``trainer.batch_size`` is a number; otherwise it is refused
    (Ludwig would use bn_virtual_bs 1024, which is not what the divider asks for)."""
    combiner = _section(config, "combiner")
    if combiner is None or combiner.get("type") != "tabnet" or "bn_virtual_divider" not in combiner:
        return
    divider = combiner.pop("bn_virtual_divider")
    if combiner.get("bn_virtual_bs") is not None:
        note("combiner.bn_virtual_divider (removed: Ludwig reads only combiner.bn_virtual_bs; given)")
        return
    batch_size = (_section(config, "trainer") or {}).get("batch_size")
    if _positive_int(divider) and _positive_int(batch_size):
        combiner["bn_virtual_bs"] = max(1, batch_size // divider)
        note(f"combiner.bn_virtual_divider {divider} -> combiner.bn_virtual_bs {combiner['bn_virtual_bs']} "
             f"(trainer.batch_size {batch_size} / {divider})")
        return
    raise ConfigError(
        f"combiner.bn_virtual_divider: got {shown(divider)} with trainer.batch_size {shown(batch_size)}; the "
        "divider splits a batch into virtual batches of batch_size / divider rows, which needs a positive "
        "integer divider and a numeric trainer.batch_size. Ludwig ignores the divider; give the virtual "
        "batch's rows instead: combiner.bn_virtual_bs")


def _rnn_cell(config: dict, note: Note) -> None:
    """Ludwig's documentation (user_guide/how_ludwig_works.md) writes an rnn encoder's cell as
    ``cell: lstm``; the key is ``cell_type`` in every Ludwig version. Ludwig 0.17 drops ``cell``
    without a word and builds a plain RNN; plait gives the cell the config asks for."""
    for path, feature in _features(config, "input"):
        encoder = _section(feature, "encoder")
        if encoder is not None and encoder.get("type") in ("rnn", "cnnrnn"):
            _move(encoder, "cell", encoder, "cell_type", note, f"{path}.encoder.", f"{path}.encoder.")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _bias_names(config: dict, note: Note) -> None:
    """0.5: ``bias`` is ``use_bias`` (and ``conv_bias``, ``default_bias`` likewise), anywhere in a feature."""
    for kind in ("input", "output"):
        for path, feature in _features(config, kind):
            for section, inner in _each_dict(feature, f"{path}."):
                _rename_keys(section, OLD_BIAS_NAMES, note, inner)


def _numerical_type(config: dict, note: Note) -> None:
    """0.5: feature type ``numerical`` is ``number``."""
    for kind in ("input", "output"):
        for path, feature in _features(config, kind):
            if feature.get("type") == "numerical":
                feature["type"] = "number"
                note(f"{path}.type numerical -> number")
    for section in ("preprocessing", "defaults"):
        _rename_keys(_section(config, section), {"numerical": "number"}, note, f"{section}.")


def _size_names(config: dict, note: Note) -> None:
    """0.5: ``fc_size`` is ``output_size`` and ``transformer_fc_size`` is ``transformer_output_size``,
    in the combiner and in features (their layer lists included)."""
    sections = [("combiner.", config.get("combiner"))]
    sections += [(f"{path}.", feature) for kind in ("input", "output") for path, feature in _features(config, kind)]
    defaults = _section(config, "defaults") or {}
    sections += [(f"defaults.{ftype}.", value) for ftype, value in defaults.items()]
    for path, section in sections:
        for inner, inner_path in _each_dict(section, path):
            _rename_keys(inner, OLD_SIZE_NAMES, note, inner_path)


def _hyperopt(config: dict, note: Note) -> None:
    """0.5 and 0.7: hyperopt's ``training.`` parameters, ``sampler`` and executor-level ``search_alg``;
    ``hyperopt: {}`` means no hyperopt."""
    if config.get("hyperopt") == {}:
        del config["hyperopt"]
        return
    hyperopt = _section(config, "hyperopt")
    if hyperopt is None:
        return
    parameters = _section(hyperopt, "parameters") or {}
    for key in [k for k in parameters if isinstance(k, str) and k.startswith("training.")]:
        new = "trainer." + key.removeprefix("training.")
        _move(parameters, key, parameters, new, note, "hyperopt.parameters.", "hyperopt.parameters.")
    executor = hyperopt.setdefault("executor", {"type": "ray"})
    if isinstance(executor, dict):
        _hyperopt_executor(hyperopt, executor, note)
        _hyperopt_sampler(hyperopt, executor, note)
    hyperopt.setdefault("search_alg", {"type": "variant_generator"})


def _search_alg(value: Any) -> Any:
    return {"type": value} if isinstance(value, str) else value


def _hyperopt_executor(hyperopt: dict, executor: dict, note: Note) -> None:
    if executor.get("type") not in (None, "ray"):
        note(f"hyperopt.executor.type {executor['type']} -> ray")
        executor["type"] = "ray"
    if "search_alg" in executor:
        hyperopt.setdefault("search_alg", _search_alg(executor["search_alg"]))
        del executor["search_alg"]
        note("hyperopt.executor.search_alg -> hyperopt.search_alg")


def _hyperopt_sampler(hyperopt: dict, executor: dict, note: Note) -> None:
    sampler = hyperopt.pop("sampler", None)
    if not isinstance(sampler, dict):
        return
    note("hyperopt.sampler -> hyperopt.search_alg and hyperopt.executor")
    if "search_alg" in sampler:
        hyperopt.setdefault("search_alg", _search_alg(sampler["search_alg"]))
    for key in ("num_samples", "scheduler"):
        if key in sampler:
            executor.setdefault(key, sampler[key])
    if executor.get("scheduler") == {}:
        del executor["scheduler"]


def _eval_batch_size(config: dict, note: Note) -> None:
    """0.5: ``trainer.eval_batch_size: 0`` meant "same as training"; today that is null."""
    trainer = _section(config, "trainer")
    value = trainer.get("eval_batch_size") if trainer is not None else None
    if value == 0 and not isinstance(value, bool):
        trainer["eval_batch_size"] = None
        note("trainer.eval_batch_size 0 -> null")


def _type_preprocessing_to_defaults(config: dict, note: Note) -> None:
    """0.5: preprocessing settings per feature type moved from ``preprocessing.<type>`` to
    ``defaults.<type>.preprocessing``. plait still takes ``preprocessing.<type>`` for its own
    feature types (it means the same), so only the types plait lacks move."""
    preprocessing = _section(config, "preprocessing")
    if preprocessing is None:
        return
    for ftype in [t for t in LUDWIG_FEATURE_TYPES if t not in INPUT_CLASSES and t in preprocessing]:
        defaults = config.setdefault("defaults", {})
        type_defaults = defaults.setdefault(ftype, {}) if isinstance(defaults, dict) else None
        if not isinstance(type_defaults, dict):
            continue
        moved = preprocessing.pop(ftype)
        own = type_defaults.get("preprocessing")
        type_defaults["preprocessing"] = {**moved, **own} if isinstance(moved, dict) and isinstance(own, dict) else (
            own if own is not None else moved)
        note(f"preprocessing.{ftype} -> defaults.{ftype}.preprocessing")


def _split_settings(config: dict, note: Note) -> None:
    """0.5: ``force_split``, ``split_probabilities`` and ``stratify`` became ``preprocessing.split``."""
    preprocessing = _section(config, "preprocessing")
    if preprocessing is None:
        return
    split: dict = {}
    if preprocessing.get("split_probabilities") is not None:
        split["probabilities"] = preprocessing["split_probabilities"]
    if preprocessing.get("stratify") is not None:
        split.update(type="stratify", column=preprocessing["stratify"])
    if preprocessing.get("force_split") is not None:
        split.setdefault("type", "random")
    for old, new in (("force_split", "type"), ("split_probabilities", "probabilities"), ("stratify", "column")):
        if old in preprocessing:
            del preprocessing[old]
            note(f"preprocessing.{old} -> preprocessing.split.{new}")
    if split:
        own = preprocessing.get("split")
        preprocessing["split"] = {**split, **own} if isinstance(own, dict) else split


def _nested_modules(config: dict, note: Note) -> None:
    """0.6: an encoder's (inputs) or decoder's (outputs) settings written at the level of the
    feature move into its ``encoder`` or ``decoder`` section. A key moves only where the feature's
    encoder or decoder has a setting of that name, so that a misspelt feature key is still
    reported where the user wrote it."""
    for kind, module, classes in (("input", "encoder", INPUT_CLASSES), ("output", "decoder", OUTPUT_CLASSES)):
        for path, feature in _features(config, kind):
            feature_cls = classes.get(feature.get("type"))
            loose = [key for key in feature if feature_cls is not None and key not in LUDWIG_FEATURE_KEYS[kind]
                     and key not in feature_cls.model_fields]
            section = with_type(feature.get(module), None)
            if not loose or not isinstance(section, (dict, type(None))):
                continue
            section = dict(section or {})
            module_type = section.get("type", MODULE_DEFAULT_TYPES[module].get(feature["type"]))
            settings = _settings_of(module_class(feature_cls, module, module_type))
            for key in loose:
                prefixed = f"fc_{key}" if kind == "output" and key in DECODER_FC_KEYS else None
                target = prefixed if prefixed in settings else key if key in settings else None
                if target is not None:
                    _move(feature, key, section, target, note, f"{path}.", f"{path}.{module}.")
                    feature[module] = section


def _settings_of(module_cls: type | None) -> set[str]:
    return set(module_cls.model_fields) if module_cls is not None else set()


def _class_weights(config: dict, note: Note) -> None:
    """0.6: ``class_weights`` other than a list or a mapping (the old default was 1) mean none."""
    for path, feature in _features(config, "output"):
        loss = _section(feature, "loss")
        old = loss.get("class_weights") if loss is not None else None
        if old is not None and not isinstance(old, (list, dict)):
            loss["class_weights"] = None
            note(f"{path}.loss.class_weights {old!r} -> null")


def _missing_value_strategy(config: dict, note: Note) -> None:
    """0.6: missing-value strategies ``backfill`` and ``pad`` are ``bfill`` and ``ffill``."""
    for path, preprocessing, _ in _type_preprocessing_sections(config):
        old = preprocessing.get("missing_value_strategy")
        new = {"backfill": "bfill", "pad": "ffill"}.get(old) if isinstance(old, str) else None
        if new:
            preprocessing["missing_value_strategy"] = new
            note(f"{path}missing_value_strategy {old} -> {new}")


def _unused_file_backfill(config: dict, note: Note) -> None:
    """Ludwig renders ``defaults.audio.preprocessing.missing_value_strategy: bfill`` (and the same
    for image) into every config; where no feature has that type it applies to nothing, and goes
    without a word (a feature that would use it is refused at its own path)."""
    for ftype in ("audio", "image"):
        preprocessing = _section(_section(_section(config, "defaults") or {}, ftype) or {}, "preprocessing")
        used = any(f.get("type") == ftype for kind in ("input", "output") for _, f in _features(config, kind))
        if preprocessing and preprocessing.get("missing_value_strategy") == "bfill" and not used:
            del preprocessing["missing_value_strategy"]


def _max_batch_size(config: dict, note: Note) -> None:
    """0.6: ``increase_batch_size_on_plateau_max`` is ``max_batch_size``."""
    trainer = _section(config, "trainer")
    _rename_keys(trainer, {"increase_batch_size_on_plateau_max": "max_batch_size"}, note, "trainer.")


def _trainer_type(config: dict, note: Note) -> None:
    """0.6: an ECD trainer has no ``type`` (the model type decides it; LLM and GBM trainers keep theirs)."""
    trainer = _section(config, "trainer")
    if trainer is not None and "type" in trainer and config.get("model_type") not in ("llm", "gbm"):
        del trainer["type"]
        note("trainer.type (removed: model_type decides the trainer)")


def _learning_rate_schedule(config: dict, note: Note) -> None:
    """0.7: decay, warmup and reduce-on-plateau settings moved into
    ``trainer.learning_rate_scheduler``; old configs have them in the trainer or at the top level."""
    sources = [(config, "")]
    if _section(config, "trainer") is not None:
        sources.insert(0, (config["trainer"], "trainer."))
    for source, path in sources:
        present = [k for k in UPGRADED_TRAINER_KEYS if k in source]
        if not present:
            continue
        trainer = config.setdefault("trainer", {})
        if not isinstance(trainer, dict):
            return
        scheduler = trainer.setdefault("learning_rate_scheduler", {})
        if not isinstance(scheduler, dict):
            return
        for old in present:
            new = UPGRADED_TRAINER_KEYS[old]
            if new not in scheduler:
                scheduler[new] = _scheduler_value(old, source[old])
            del source[old]
            note(f"{path}{old} -> trainer.learning_rate_scheduler.{new}")


def _scheduler_value(old: str, value: Any) -> Any:
    if old == "decay" and isinstance(value, bool):
        return "exponential" if value else None  # decay was on/off, exponential when on
    if old == "reduce_learning_rate_on_plateau" and isinstance(value, (bool, int, float)):
        return int(value)  # a count of reductions now, was a flag or a count
    return value


def _optimizer_names(config: dict, note: Note) -> None:
    """Before 0.5 Adam was set with ``beta_1``/``beta_2`` (the docs wrote ``beta1``/``beta2``) and
    ``epsilon``; and configs often give ``optimizer.lr``, which is ``trainer.learning_rate`` (except
    for adafactor, which has an ``lr``)."""
    trainer = _section(config, "trainer")
    optimizer = _section(trainer, "optimizer") if trainer is not None else None
    if optimizer is None:
        return
    _betas(optimizer, note)
    _rename_keys(optimizer, {"epsilon": "eps"}, note, "trainer.optimizer.")
    if "lr" in optimizer and optimizer.get("type") != "adafactor":
        _move(optimizer, "lr", trainer, "learning_rate", note, "trainer.optimizer.", "trainer.")


def _betas(optimizer: dict, note: Note) -> None:
    if not any(old in optimizer for names in OLD_BETA_NAMES for old in names):
        return
    betas = list(optimizer.get("betas") or (0.9, 0.999))
    for i, names in enumerate(OLD_BETA_NAMES):
        for old in [name for name in names if name in optimizer]:
            value = optimizer.pop(old)
            betas[i] = value if "betas" not in optimizer else betas[i]
            note(f"trainer.optimizer.{old} -> trainer.optimizer.betas")
    optimizer["betas"] = betas


def _optimizer_clipping(config: dict, note: Note) -> None:
    """Before 0.5 gradient clipping was set on the optimizer (``clipglobalnorm``, ``clipnorm``,
    ``clipvalue``; the docs wrote ``clip_global_norm`` and ``clip_value``); it is
    ``trainer.gradient_clipping`` now. Ludwig 0.17 drops these keys without a word and clips at its
    defaults; plait moves them, since clipping is what they ask for."""
    trainer = _section(config, "trainer")
    optimizer = _section(trainer, "optimizer") if trainer is not None else None
    present = [old for old in OLD_CLIPPING_NAMES if old in (optimizer or {})]
    if not present:
        return
    if trainer.get("gradient_clipping") is None:  # null means the defaults, as an empty section does
        trainer["gradient_clipping"] = {}
    clipping = _section(trainer, "gradient_clipping")
    if clipping is None:
        return  # not a section: validation reports it
    for old in present:
        _move(optimizer, old, clipping, OLD_CLIPPING_NAMES[old], note, "trainer.optimizer.",
              "trainer.gradient_clipping.")


def _scheduler_type(config: dict, note: Note) -> None:
    """Ludwig's own examples write ``learning_rate_scheduler: {type: cosine}``. Ludwig 0.17 keeps the
    key and reads only ``decay``, so such a config trains at a constant rate; the schedule asked for
    is ``decay: cosine``, so plait upgrades ``type`` to ``decay`` where ``decay`` is unset (a
    ``decay`` given wins, as a new name does over an old one)."""
    trainer = _section(config, "trainer")
    scheduler = _section(trainer, "learning_rate_scheduler") if trainer is not None else None
    if scheduler is None or "type" not in scheduler:
        return
    kind = scheduler.pop("type")
    path = "trainer.learning_rate_scheduler."
    if kind is not None and scheduler.get("decay") is None:
        scheduler["decay"] = kind
        note(f"{path}type {kind} -> {path}decay {kind}")
    else:
        note(f"{path}type (removed: {path}decay is given)" if kind is not None else f"{path}type (removed: null)")


def _defaults_type_key(config: dict, note: Note) -> None:
    """0.7: some Ludwig 0.7 releases wrote a ``type`` into every ``defaults.<type>`` section."""
    defaults = _section(config, "defaults") or {}
    for ftype, section in defaults.items():
        if isinstance(section, dict) and "type" in section:
            del section["type"]
            note(f"defaults.{ftype}.type (removed)")


def _removed_text_encoders(config: dict, note: Note) -> None:
    """0.11: the transformer_xl, ctrl and flaubert text encoders are auto_transformer."""
    for path, feature in _features(config, "input"):
        encoder = _section(feature, "encoder")
        old = encoder.get("type") if encoder is not None and feature.get("type") == "text" else None
        if isinstance(old, str) and old in REMOVED_TEXT_ENCODERS:
            encoder["type"] = REMOVED_TEXT_ENCODERS[old]
            note(f"{path}.encoder.type {old} -> {encoder['type']}")


STEPS: list[Callable[[dict, Note], None]] = [
    _text_preprocessing_names, _audio_feature_settings, _training_section, _feature_weight_regularization, _tabnet_virtual_batch_divider,
    _bias_names, _numerical_type, _size_names, _hyperopt, _eval_batch_size, _type_preprocessing_to_defaults,
    _split_settings, _nested_modules, _class_weights, _missing_value_strategy, _max_batch_size, _trainer_type,
    _learning_rate_schedule, _optimizer_names, _optimizer_clipping, _scheduler_type, _defaults_type_key,
    _removed_text_encoders, _rnn_cell, _unused_file_backfill,
]
"""The rules in the order Ludwig applies them (by the version that introduced each); a later rule
sees what an earlier one renamed (``training`` is ``trainer`` before the trainer rules run)."""


# ---- fields Ludwig computes ---------------------------------------------------------------------

COMPUTED_FIELDS = {
    "feature": {"proc_column", "input_size", "num_classes", "default_validation_metric"},
    "encoder": {"vocab", "vocab_size", "max_sequence_length", "pad_idx", "num_tokens", "str2freq", "str2idf", "skip",
                "should_embed", "input_size", "saved_weights_in_checkpoint", "ple_bin_edges"},
    "decoder": {"input_size", "num_classes", "vocab_size", "max_sequence_length", "str2idx"},
    "preprocessing": {"computed_fill_value", "computed_outlier_fill_value"},
}
"""Fields Ludwig fills in from the data (its schema marks most of them internal-only) and writes
into a rendered config and a saved model's ``model_hyperparameters.json``. Inside an encoder,
``max_sequence_length`` and ``vocab_size`` are computed; under ``preprocessing`` the user's
``max_sequence_length`` is a setting and stays. An encoder's ``embedding_size`` is a setting for
every feature type plait has (Ludwig computes it only for audio)."""


def drop_computed_fields(config: dict) -> None:
    """Drop COMPUTED_FIELDS from every feature and every ``defaults.<type>`` section (in place)."""
    features = [feature for kind in ("input", "output") for _, feature in _features(config, kind)]
    defaults = _section(config, "defaults") or {}
    for section in features + [value for value in defaults.values() if isinstance(value, dict)]:
        for part in ("encoder", "decoder", "preprocessing"):
            _drop(_section(section, part), COMPUTED_FIELDS[part])
    for feature in features:
        _drop(feature, COMPUTED_FIELDS["feature"])


def _drop(section: dict | None, keys: set[str]) -> None:
    for key in keys & set(section or ()):
        del section[key]
