"""Metrics, and the statistics they are computed from, for training's validation and for
evaluation after training alike (``plait.training`` and ``plait.inference`` both sit above this).

``metrics``: per output type, the statistics kept (counts and float64 sums that add up exactly
across batches, shards and workers) and the metrics computed from them; ``sequence_metrics``:
the text and sequence scores (edit distance, BLEU, ROUGE); ``evaluation``: one model's
statistics, added to by batches, chunks or shipped rows.

To add a metric: its name in ``plait.config.metrics`` (which outputs report it, and whether
higher is better), and its statistics and formula in the output type's class in ``metrics``.
"""

from plait.evaluation.evaluation import Evaluation

__all__ = ["Evaluation"]
