"""The whole config: features, preprocessing, defaults, combiner, trainer, backend."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from plait.config.backend import AutoBackendConfig, BackendConfig, backend_data
from plait.config.base import StrictModel, field_error, ludwig_only, shown
from plait.config.defaults import APPLIES_TO, MODULE_DEFAULT_TYPES, Defaults, valid_section, with_type
from plait.config.hyperopt import HyperoptConfig, check_hyperopt_target
from plait.config.serve import ServeConfig
from plait.config.tracking import TrackerConfig, check_tracking
from plait.config.features import INPUT_TYPES, OUTPUT_TYPES, InputFeature, OutputFeature, check_dependencies, resolve_tied
from plait.config.metrics import COMBINED, COMBINED_METRICS, METRICS_BY_OUTPUT_TYPE
from plait.config.combiners import CombinerConfig, ConcatCombiner
from plait.config.preprocessing import GlobalPreprocessing
from plait.config.trainer import TrainerConfig


class PlaitConfig(StrictModel):
    input_features: list[InputFeature] = Field(min_length=1)
    """The columns the model reads, each with a type (binary, number, category, text, set, vector, sequence,
    date, h3, bag, timeseries, audio, image)."""
    output_features: list[OutputFeature] = Field(min_length=1)
    """The columns the model predicts (binary, category, number, set, vector, sequence, text,
    category_distribution, timeseries, image)."""
    preprocessing: GlobalPreprocessing = Field(default_factory=GlobalPreprocessing)
    """The split, sampling, and per-type preprocessing defaults."""
    defaults: Defaults = Field(default_factory=Defaults)
    """Per-type starting settings for the features of that type: preprocessing (inputs and
    outputs), encoder (inputs only), decoder and loss (outputs only)."""
    combiner: CombinerConfig = Field(default_factory=ConcatCombiner)
    """How the encoded inputs are combined: concat, transformer, tabnet, tabtransformer,
    comparator, project_aggregate, sequence_concat or sequence."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """How the model is trained."""
    backend: BackendConfig = Field(default_factory=AutoBackendConfig)
    """Where and how the work runs, and where preprocessed data is cached: a type (auto, local,
    ray, torchrun, horovod, deepspeed) and the settings that type uses."""
    model_type: Literal["ecd"] = "ecd"
    """An encoder-combiner-decoder model (Ludwig's ``ecd``, the default). ``llm`` fine-tunes a
    pretrained language model, with a config of its own (see "LLM" in this reference); the keys
    only it takes (base_model, prompt, adapter, ...) are refused here unless they are null."""
    ludwig_version: str | None = None
    """Accepted for Ludwig compatibility and ignored (older names are upgraded whatever it says)."""
    hyperopt: HyperoptConfig | None = None
    """Ludwig's hyperparameter search (older Ludwig names upgraded): what ``plait hyperopt``
    searches. Training ignores it, as Ludwig's ``train`` does."""
    serve: ServeConfig | None = None
    """How ``plait serve`` answers requests: micro-batching, limits and Ray Serve replicas (plait's
    own section; null: every default). Saved with the model, so the server reads it back."""
    tracking: list[TrackerConfig] = Field(default_factory=list)
    """Experiment trackers the run logs to, each an item with a type (mlflow, wandb, aim,
    comet) and that tool's settings; several at once, one per type (plait's own section;
    ``--mlflow``, ``--wandb``, ``--aim`` and ``--comet`` add items). Not part of the model or
    its preprocessing: changing it changes no cache entry."""
    preset: Annotated[str | None, ludwig_only(None, instead="set the combiner and trainer settings you want "
                                                         "yourself")] = None
    """Ludwig's quality presets (medium_quality, high_quality, ...), which pick a combiner and
    trainer settings; not implemented: only null is accepted."""

    @model_validator(mode="before")
    @classmethod
    def _no_llm_settings(cls, data: Any) -> Any:
        """The keys only Ludwig's LLM model type takes are refused by name (an LLM config says
        ``model_type: llm``, and is read as :class:`~plait.config.llm.LLMConfig`)."""
        if not isinstance(data, dict):
            return data
        given = [key for key, unset in LLM_ONLY_KEYS.items() if key in data and data[key] != unset]
        if given:
            raise field_error(", ".join(given), f"{'these are settings' if len(given) > 1 else 'a setting'} of "
                                                "Ludwig's LLM model type; set model_type: llm to fine-tune a "
                                                "language model, or remove them")
        return {key: value for key, value in data.items() if key not in LLM_ONLY_KEYS}

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        """Fill each feature from ``preprocessing.<type>`` and ``defaults.<type>`` (raw dicts,
        so that the merged result is validated, and shown, as the feature's own settings)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        # Sections of the wrong type are left for validation to report.
        type_preprocessing = data["preprocessing"] if isinstance(data.get("preprocessing"), dict) else {}
        defaults = _usable_defaults(data["defaults"] if isinstance(data.get("defaults"), dict) else {})
        for section, kind in (("input_features", "input"), ("output_features", "output")):
            features = data.get(section)
            if isinstance(features, list):
                data[section] = [_merge_feature(f, type_preprocessing, defaults, kind) for f in features]
        if isinstance(data.get("combiner"), dict) and "type" not in data["combiner"]:
            data["combiner"] = {"type": "concat", **data["combiner"]}
        return _segmentation_combiner(data)

    @field_validator("tracking")
    @classmethod
    def _one_tracker_per_type(cls, value: list) -> list:
        return check_tracking(value)

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_type(cls, value: Any) -> Any:
        return backend_data(value)

    @model_validator(mode="after")
    def _check_features(self):
        # Counted once (not names.count per name): configs with 100k features validate in linear time.
        names = Counter(f.name for f in self.features)
        duplicates = sorted(name for name, count in names.items() if count > 1)
        if duplicates:
            raise ValueError(f"feature names must be unique; repeated: {', '.join(duplicates)}")
        return self

    @model_validator(mode="after")
    def _dependencies_are_outputs(self):
        check_dependencies(self.output_features)
        return self

    @model_validator(mode="after")
    def _combiner_fits_inputs(self):
        problem = self.combiner.input_features_problem([f.name for f in self.input_features])
        if problem:
            raise field_error(f"combiner.{problem[0]}", problem[1])
        return self

    @model_validator(mode="after")
    def _tied_encoders(self):
        resolve_tied(self.input_features)
        return self

    @model_validator(mode="after")
    def _balancing_target(self):
        problem = self.preprocessing.balancing_target_problem([f.type for f in self.output_features])
        if problem:
            raise field_error(f"preprocessing.{problem[0]}", problem[1])
        return self

    @model_validator(mode="after")
    def _no_target_leakage(self):
        _check_target_leakage(self.input_features, self.output_features)
        return self

    @model_validator(mode="after")
    def _validation_target(self):
        """The field and metric that pick the best model must be ones training reports."""
        outputs = {f.name: f.type for f in self.output_features}
        if self.trainer.validation_field is None and self.trainer.validation_metric not in (None, "loss"):
            self.trainer.validation_field = _field_of_metric(self.trainer.validation_metric, outputs)
        _check_validation_target(self.trainer.validation_field, self.trainer.validation_metric,
                                 {f.name: f.type for f in self.output_features})
        return self

    @model_validator(mode="after")
    def _bucketing_field(self):
        field = self.trainer.bucketing_field
        tokens = [f.name for f in self.features if f.type in ("text", "sequence")]
        if field is not None and field not in tokens:
            raise field_error("trainer.bucketing_field", f"got {shown(field)}, which is no text or sequence feature; "
                                                         + (f"valid choices are: {', '.join(tokens)}" if tokens else
                                                            "this config has none, so leave it null"))
        return self

    @model_validator(mode="after")
    def _hyperopt_target(self):
        if self.hyperopt is not None:
            check_hyperopt_target(self.hyperopt, {f.name: f.type for f in self.output_features})
        return self

    @property
    def features(self) -> list:
        return [*self.input_features, *self.output_features]


def _check_target_leakage(inputs: list, outputs: list) -> None:
    """An input that reads an output's column hands the model the label: training looks perfect,
    and predicting needs the very value it is meant to predict."""
    output_by_column = {o.source_column: (i, o) for i, o in enumerate(outputs)}
    for i, feature in enumerate(inputs):
        if feature.source_column not in output_by_column:
            continue
        j, output = output_by_column[feature.source_column]
        raise field_error(f"input_features[{i}].column",
                          f"input feature {feature.name!r} reads column {feature.source_column!r}, which output "
                          f"feature {output.name!r} (output_features[{j}]) predicts: the model would need the "
                          f"label to predict it (target leakage); remove the input or point it at another column")


def _field_of_metric(metric: str, outputs: dict[str, str]) -> str | None:
    """Ludwig's rule for a validation_metric given without a validation_field: the one output
    feature that reports that metric (None where no output does: the check below says so)."""
    having = [name for name, kind in outputs.items() if metric in METRICS_BY_OUTPUT_TYPE[kind]]
    if len(having) > 1:
        raise field_error("trainer.validation_field", f"validation_metric {shown(metric)} is reported by several outputs "
                                                      f"({', '.join(having)}); name the one to watch here")
    return having[0] if having else None


def _check_validation_target(field: str | None, metric: str | None, outputs: dict[str, str]) -> None:
    if field is not None and field != COMBINED and field not in outputs:
        raise field_error("trainer.validation_field", f"got {shown(field)}, which is no output feature; valid choices "
                                                      f"are: {', '.join([*outputs, COMBINED])}")
    if metric is None:
        return
    if field in outputs:
        known, of, fix = METRICS_BY_OUTPUT_TYPE[outputs[field]], f"{field} (a {outputs[field]} output)", ""
    else:
        known, of = COMBINED_METRICS, COMBINED + (" (the default validation_field)" if field is None else "")
        fix = f", or set trainer.validation_field to an output feature ({', '.join(outputs)})"
    if metric not in known:
        raise field_error("trainer.validation_metric", f"got {shown(metric)}, which is not a metric of {of}; valid "
                                                       f"choices are: {', '.join(known)}{fix}")


LLM_ONLY_KEYS = {"base_model": None, "prompt": None, "adapter": None, "adapters": None, "quantization": None,
                 "generation": None, "model_parameters": None, "trust_remote_code": False, "is_multimodal": False}
"""Top-level keys of Ludwig's LLM model type, each with the value that means it is not used."""


def _segmentation_combiner(data: dict) -> dict:
    """With an image output, the concat combiner passes the U-Net bottleneck through unchanged: no
    fully connected layers unless the config asks for them (Ludwig's default; plait's is 1)."""
    outputs = data.get("output_features")
    combiner = data.get("combiner", {})
    segments = isinstance(outputs, list) and any(isinstance(f, dict) and f.get("type") == "image" for f in outputs)
    if not segments or not isinstance(combiner, dict) or combiner.get("type", "concat") != "concat":
        return data
    if "num_fc_layers" in combiner or "fc_layers" in combiner:
        return data
    return {**data, "combiner": {"type": "concat", **combiner, "num_fc_layers": 0}}


def _usable_defaults(defaults: dict) -> dict[str, dict]:
    """``defaults`` per feature type, less the sections that are invalid: those are reported at
    ``defaults.<type>.<section>``, and merged into no feature (which would report them again)."""
    usable = {}
    for ftype, sections in defaults.items():
        if isinstance(sections, dict):
            usable[ftype] = {key: value for key, value in sections.items()
                             if value is not None and valid_section(ftype, key, value)}
    return usable


def _merge_feature(feature: Any, type_preprocessing: dict, defaults: dict, kind: str) -> Any:
    """The feature with its type's defaults under its own settings: preprocessing for every
    feature, the encoder for inputs, the decoder and loss for outputs (APPLIES_TO)."""
    if not isinstance(feature, dict) or not isinstance(feature.get("type"), str):
        return feature
    ftype = feature["type"]
    merged = dict(feature)
    type_defaults = {key: value for key, value in defaults.get(ftype, {}).items() if key in APPLIES_TO[kind]}
    layers = [type_preprocessing.get(ftype), type_defaults.get("preprocessing"), feature.get("preprocessing")]
    if any(isinstance(layer, dict) for layer in layers):
        merged["preprocessing"] = {k: v for layer in layers if isinstance(layer, dict) for k, v in layer.items()}
    if "augmentation" in type_defaults and "augmentation" not in feature:  # a list: the feature's replaces it
        merged["augmentation"] = type_defaults["augmentation"]
    for key in ("encoder", "decoder", "loss"):
        if key in type_defaults:
            default_type = MODULE_DEFAULT_TYPES.get(key, {}).get(ftype)
            merged[key] = _merge_section(with_type(type_defaults[key], default_type), feature.get(key))
    return merged


def _merge_section(base: Any, own: Any) -> Any:
    """A default encoder (decoder, loss) under the feature's own: merged where the feature names
    the same type or none; the feature's alone where it names another."""
    own = with_type(own, None)
    if own is None:
        return base
    if isinstance(own, dict) and isinstance(base, dict) and own.get("type", base.get("type")) == base.get("type"):
        return {**base, **own}
    return own


def check_feature_types(data: Any) -> list[str]:
    """Problems a discriminated union would report badly: an input-only type used as output."""
    problems = []
    if not isinstance(data, dict):
        return ["<config>: the config must be a mapping with input_features and output_features"]
    for section, allowed in (("input_features", INPUT_TYPES), ("output_features", OUTPUT_TYPES)):
        features = data.get(section)
        for i, feature in enumerate(features if isinstance(features, list) else []):
            ftype = feature.get("type") if isinstance(feature, dict) else None
            if section == "output_features" and ftype in INPUT_TYPES and ftype not in OUTPUT_TYPES:
                problems.append(
                    f"{section}[{i}].type: {ftype!r} is an input-only feature type; output features "
                    f"can be {', '.join(OUTPUT_TYPES)}"
                )
    return problems
