"""An LLM's category output: the generated text matched to one of the labels (Ludwig's
``category_extractor``), with each label's ``match`` rule where the config gives one."""

from __future__ import annotations

import json
import re
import string

import numpy as np
import pyarrow as pa

_FENCE = re.compile(r"^```[A-Za-z]*\n?|\n?```$")


def category_columns(name: str, columns: dict, feature, label_probabilities=None) -> dict:
    """The text output's columns as a category's: ``{name}_predictions`` the matched label, the
    generated text as ``{name}_response``, its probability as ``{name}_probability``, and where
    the model scored each label (``label_probabilities``, rows by labels), each label's
    probability as the answer, ``{name}_probabilities_{label}``."""
    texts = columns[f"{name}_predictions"]
    texts = texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) else list(texts)
    labels = LabelMatcher(feature)
    result = {f"{name}_predictions": pa.array([labels(text or "") for text in texts], pa.string()),
              f"{name}_response": pa.array(texts, pa.string()),
              f"{name}_probability": np.asarray(columns[f"{name}_probability"])}
    if label_probabilities is not None:
        scores = np.asarray(label_probabilities, dtype=np.float32)
        result.update({f"{name}_probabilities_{label}": scores[:, i] for i, label in enumerate(labels.labels)})
    return result


class LabelMatcher:
    """text -> label: the first of ``decoder.match``'s rules (in their order) that fits, else a
    label the text is (ignoring case, spaces and punctuation around it), else the first label
    without a rule that the text contains (ignoring case), else ``preprocessing.fallback_label``."""

    def __init__(self, feature):
        self.rules = dict(feature.decoder.match or {})
        self.labels = feature.preprocessing.labels
        self.fallback = feature.preprocessing.fallback_label
        self.unruled = [label for label in self.labels if label not in self.rules]

    def __call__(self, text: str) -> str:
        for label, rule in self.rules.items():
            if _fits(rule, text):
                return label
        bare = text.strip(string.whitespace + string.punctuation).lower()
        for label in self.unruled:
            if bare == label.lower():
                return label
        lowered = text.lower()
        return next((label for label in self.unruled if label.lower() in lowered), self.fallback)


def _fits(rule, text: str) -> bool:
    if rule.type == "contains":
        return rule.value in text
    if rule.type == "regex":
        return re.search(rule.value, text) is not None
    return _json_value(text) == rule.value.lower()


def _json_value(text: str) -> str | None:
    """The text's JSON value, as Ludwig's json_schema rule reads it (lowercased): a dict's
    ``label``, ``value`` or ``category`` entry, else its first value; None if it is not JSON."""
    try:
        parsed = json.loads(_FENCE.sub("", text.strip()))
    except ValueError:
        return None
    if isinstance(parsed, dict):
        parsed = next((parsed[key] for key in ("label", "value", "category") if parsed.get(key)),
                      next(iter(parsed.values()), None))
    return str(parsed).lower()
