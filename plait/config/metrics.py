"""The metrics plait reports for each output feature type, by name, as plain data.

The config checks ``trainer.validation_metric`` against this table; the code that computes the
metrics (``plait.evaluation.metrics``) produces these names.
"""

from __future__ import annotations

METRICS_BY_OUTPUT_TYPE: dict[str, tuple[str, ...]] = {
    "binary": ("loss", "accuracy", "precision", "recall", "f1", "roc_auc"),
    "category": ("loss", "accuracy", "hits_at_k", "precision", "recall", "f1"),
    "number": ("loss", "mean_absolute_error", "mean_squared_error", "root_mean_squared_error", "r2"),
    "set": ("loss", "jaccard", "precision", "recall", "f1"),
    "vector": ("loss", "mean_absolute_error", "mean_squared_error", "root_mean_squared_error", "r2"),
    "timeseries": ("loss", "mean_absolute_error", "mean_squared_error", "root_mean_squared_error", "r2"),
    "category_distribution": ("loss", "kl_divergence", "cross_entropy", "accuracy"),
    "sequence": ("loss", "token_accuracy", "sequence_accuracy", "last_accuracy", "perplexity", "edit_distance"),
    "text": ("loss", "token_accuracy", "sequence_accuracy", "last_accuracy", "perplexity", "edit_distance", "bleu",
             "rouge1_fmeasure", "rouge2_fmeasure", "rougeL_fmeasure", "char_error_rate"),
    "image": ("loss", "accuracy", "iou"),
}
"""Per output feature type, every metric computed for it (category: precision, recall and f1
only up to 256 classes; image: accuracy and iou over pixels)."""

COMBINED = "combined"
"""The name under which the weighted total over every output feature is reported."""
COMBINED_METRICS: tuple[str, ...] = ("loss",)
"""What is reported under ``combined``."""

HIGHER_IS_BETTER: frozenset[str] = frozenset({"accuracy", "hits_at_k", "roc_auc", "precision", "recall", "f1", "r2",
                                              "jaccard", "token_accuracy", "sequence_accuracy", "last_accuracy",
                                              "bleu", "rouge1_fmeasure", "rouge2_fmeasure", "rougeL_fmeasure", "iou"})
"""Metrics where a larger value is better (every other one, the losses and errors, is better smaller)."""
