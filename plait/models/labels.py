"""The keys under which an LLM hands over what a category output needs beyond its text: the answers
an evaluation pass generated (``LLM._answered``), whose labels
``plait.evaluation.metrics.LabelMetrics`` scores, and each label's probability in prediction."""

WRITTEN = "__written__"
"""Each row's generated answer, as stored token ids (PAD after its end)."""
LABEL_PROBABILITIES = "__label_probabilities__"
"""``[rows, labels]``: each label's probability as the row's answer (``LLM._label_probabilities``)."""
