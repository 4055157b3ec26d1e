"""A config written from the data: each column's feature type (``columns``), the reason beside it,
and, for ``auto_train``, the search of the combiner's and trainer's key settings.

``build`` returns an :class:`AutoConfig`: the config as a dict, the reasons, and the columns left
out; ``to_yaml`` writes it as YAML a person can read, each choice's reason as a comment.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from plait.automl.columns import exclusion, infer_type, profile
from plait.config.combiners import ConcatCombiner
from plait.config.gbm import GBM_INPUT_TYPES, GBM_OUTPUT_TYPES
from plait.config.encoders import DEFAULT_ENCODER
from plait.errors import DataError, UsageError

OUTPUT_TYPES = ("binary", "category", "number", "text", "vector", "set")
"""Inferred types plait can predict; a target inferred as anything else is a category."""

SEARCH_SPACE: dict[str, dict] = {
    "combiner.num_fc_layers": {"space": "choice", "categories": [1, 2, 3]},
    "combiner.output_size": {"space": "choice", "categories": [64, 128, 256]},
    "combiner.dropout": {"space": "choice", "categories": [0.0, 0.1, 0.2]},
    "trainer.learning_rate": {"space": "choice", "categories": [0.0003, 0.001, 0.003]},
}
"""What auto_train searches: the concat combiner's depth, width and dropout, and the learning
rate (and an encoder rival for each input type present, ``ENCODER_RIVALS``). The first trial is
plait's defaults (``FIRST_TRIAL``), so the search keeps a model at least as good on the
validation split as a plain ``plait train``."""
FIRST_TRIAL = {**{f"combiner.{name}": ConcatCombiner.model_fields[name].default
                  for name in ("num_fc_layers", "output_size", "dropout")},
               "trainer.learning_rate": 0.001}  # what learning_rate auto is on one worker (training.schedule)
ENCODER_RIVALS = {
    "number": "ple",    # far better than passthrough on diamonds, worse on small tables
    "date": "wave",     # better than embed on daily dates (seattle_weather), worse on hourly ones
    "text": "embed",    # better than parallel_cnn on short reviews, worse on documentation
}
"""Per input type, the encoder searched beside plait's default (``DEFAULT_ENCODER``): the rival
that won on some of benchmarks/model_quality.py's datasets and lost on others."""
TRIALS = 24
"""The most trials a search runs (its time budget may end it sooner)."""
EPOCHS = 300
"""The most epochs a trial trains (``trainer.epochs``; plait's default is 100). Locally the search
stops the trials that fall behind at 5, 15, 45 and 135 epochs, and early stopping
(``EARLY_STOP``) ends each that stops improving, so only leaders still improving train this long.
Measured on seattle_temps (an hourly curve from the timestamp alone, seed 0, 300 s): R² 0.9987
with 100, 0.9999 with 300."""
EARLY_STOP = 20
"""A trial (and a finalist's fold) ends after this many epochs without a lower validation loss,
so a trial that has stopped improving gives its time to the next; set in the config, it holds
beside the scheduler (plait.search.run). Plain training to 300 epochs with this patience, five
seeds, against plait's defaults (100 epochs, patience 5): seattle_temps R² 0.99895 against
0.99731, diamonds 0.9694 against 0.9639. Without it, on loanapp (1,989 rows, seed 1) the two
trials the scheduler kept ran all 300 epochs and took 250 of the search's 360 trial-seconds."""


@dataclass
class AutoConfig:
    config: dict
    reasons: dict[str, str]
    """Feature name -> why it has its type."""
    excluded: dict[str, str] = field(default_factory=dict)
    """Column -> why it is not an input."""
    source: str = "the dataset"
    rows: int = 0


def build(table, target: str, source: str = "the dataset", ignore: tuple[str, ...] = ()) -> AutoConfig:
    """The config of ``target`` from the other columns of ``table`` (an Arrow table); ``ignore``:
    columns that are not data (a split column)."""
    if target not in table.column_names:
        raise UsageError(f"target {target!r}: {source} has no such column; its columns are: "
                         f"{', '.join(table.column_names)}")
    columns = [c for c in profile(table) if c.name not in ignore]
    inputs, outputs, reasons, excluded = [], [], {}, {}
    for column in columns:
        kind, reason = infer_type(column)
        if column.name == target:
            if kind not in OUTPUT_TYPES:
                kind, reason = "category", f"{reason}; plait predicts no {kind} from a table, so a category"
            if column.distinct < 2:
                raise DataError(f"target {target!r}: the column has {column.distinct} distinct value(s); "
                                "a model needs at least two to learn anything")
            outputs.append({"name": target, "type": kind})
        elif (why := exclusion(column, kind, len(columns))) is not None:
            excluded[column.name] = why
            continue
        else:
            inputs.append({"name": column.name, "type": kind})
        reasons[column.name] = reason
    if not inputs:
        raise DataError(f"{source}: no column is left to predict {target!r} from "
                        f"({'; '.join(f'{k}: {v}' for k, v in excluded.items()) or 'the table has only the target'})")
    config = {"input_features": inputs, "output_features": outputs}
    return AutoConfig(config, reasons, excluded, source, table.num_rows)


def search_section(time_limit_s: float, backend_type: str, input_types: set[str] = frozenset()) -> dict:
    """The hyperopt section auto_train runs: the validation loss, ``SEARCH_SPACE`` with plait's
    defaults tried first, within ``time_limit_s``. Locally, trials that fall behind at each rung
    are stopped (asynchronous successive halving); on Ray every trial runs to its end (a stopped
    worker-group trial would leave its workers' resources held, see plait.search.run.check)."""
    scheduler: dict[str, Any] = {"type": "fifo"}
    if backend_type != "ray":
        scheduler = {"type": "async_hyperband", "time_attr": "training_iteration", "max_t": EPOCHS,
                     "grace_period": 5, "reduction_factor": 3}
    encoders = {f"defaults.{kind}.encoder.type": [DEFAULT_ENCODER[kind], rival]
                for kind, rival in ENCODER_RIVALS.items() if kind in input_types}
    parameters = {**SEARCH_SPACE,
                  **{path: {"space": "choice", "categories": choices} for path, choices in encoders.items()}}
    first = {**FIRST_TRIAL, **{path: choices[0] for path, choices in encoders.items()}}
    return {"goal": "minimize", "metric": "loss", "output_feature": "combined", "split": "validation",
            "parameters": parameters,
            "search_alg": {"type": "variant_generator", "points_to_evaluate": [first]},
            "executor": {"num_samples": TRIALS, "time_budget_s": max(1.0, float(time_limit_s)), "scheduler": scheduler}}


TREE_SEARCH = {"trainer.learning_rate": {"space": "choice", "categories": [0.03]}}
"""The GBM rival's search: one trial, Ludwig's GBM defaults (a search of one point, so that its
record, model and folds come from the same machinery as the networks')."""
TREE_SECTIONS = ("input_features", "output_features", "preprocessing", "backend")
"""What the GBM rival takes of the searched config (a combiner, an ECD trainer and per-type encoder
defaults are a network's)."""


def tree_rival(config: dict) -> dict | None:
    """The search config of the GBM that auto_train scores beside its networks: the same features,
    split and backend, and the searched config's goal, metric and budget; None when an input or
    the output is of a type trees do not take (text, images, ...)."""
    inputs, outputs = config["input_features"], config["output_features"]
    if len(outputs) != 1 or outputs[0]["type"] not in GBM_OUTPUT_TYPES or \
            any(f["type"] not in GBM_INPUT_TYPES for f in inputs):
        return None
    rival = {key: copy.deepcopy(config[key]) for key in TREE_SECTIONS if key in config}
    rival["input_features"] = [{k: v for k, v in f.items() if k != "encoder"} for f in rival["input_features"]]
    section = config["hyperopt"]
    executor = {key: section["executor"][key] for key in ("time_budget_s",) if key in section["executor"]}
    return {"model_type": "gbm", **rival,
            "hyperopt": {**{k: section[k] for k in ("goal", "metric", "output_feature", "split")},
                         "parameters": copy.deepcopy(TREE_SEARCH),
                         "executor": {**executor, "num_samples": 1, "scheduler": {"type": "fifo"}}}}


def to_yaml(auto: AutoConfig) -> str:
    """The config as YAML, each feature's reason a comment beside its type."""
    config = auto.config
    lines = [f"# Written by plait init_config from {auto.source} ({auto.rows:,} rows).",
             "# Each column's type is inferred from its values by Ludwig's AutoML rules; the reason follows it.",
             "# Check the choices, then: plait train --config <this file> --dataset <the data>", ""]
    for section in ("input_features", "output_features"):
        lines.append(f"{section}:")
        for feature in config[section]:
            lines.append(f"  - name: {_scalar(feature['name'])}")
            lines.append(f"    type: {feature['type']}  # {auto.reasons[feature['name']]}")
    if auto.excluded:
        lines += ["", "# Left out:"] + [f"#   {_scalar(name)}: {why}" for name, why in auto.excluded.items()]
    rest = {k: v for k, v in config.items() if k not in ("input_features", "output_features")}
    if rest:
        lines += ["", yaml.safe_dump(rest, sort_keys=False, default_flow_style=None).rstrip()]
    return "\n".join(lines) + "\n"


def _scalar(text: str) -> str:
    """A name as a YAML scalar: bare where YAML reads it back as the same string, quoted otherwise."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\- ]*", text) and not text.endswith(" ") and yaml.safe_load(text) == text:
        return text
    return json.dumps(text)
