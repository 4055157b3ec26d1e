"""Per-row scores of predicted token sequences against their targets, as sums that add up across
batches and workers: edit distance, BLEU's n-gram counts, ROUGE F-measures, character errors.

Rows are short (a sequence output's length), so each is scored with numpy over its tokens; a
batch is a loop over its rows.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

BLEU_ORDER = 4


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences (one row of the table at a time, vectorized)."""
    a, b = list(a), list(b)
    if not a or not b:
        return max(len(a), len(b))
    b_array = np.asarray([hash(x) for x in b])
    row = np.arange(len(b) + 1)
    for i, token in enumerate(a, start=1):
        substitute = row[:-1] + (b_array != hash(token))
        new = np.empty_like(row)
        new[0] = i
        new[1:] = np.minimum(substitute, row[1:] + 1)
        # Insertions chain along the row: a running minimum of (cost - position), plus position.
        new = np.minimum.accumulate(new - np.arange(len(new))) + np.arange(len(new))
        row = new
    return int(row[-1])


def ngram_matches(prediction: list, reference: list) -> tuple[list[int], list[int]]:
    """For n = 1..4: the clipped n-gram matches of the prediction and its n-gram count."""
    matches, totals = [], []
    for n in range(1, BLEU_ORDER + 1):
        predicted = Counter(tuple(prediction[i:i + n]) for i in range(len(prediction) - n + 1))
        wanted = Counter(tuple(reference[i:i + n]) for i in range(len(reference) - n + 1))
        matches.append(sum(min(count, wanted[gram]) for gram, count in predicted.items()))
        totals.append(max(0, len(prediction) - n + 1))
    return matches, totals


def corpus_bleu(matches: np.ndarray, totals: np.ndarray, predicted_length: float, reference_length: float) -> float:
    """BLEU-4 from summed n-gram counts (uniform weights, brevity penalty, no smoothing)."""
    if predicted_length == 0 or np.any(matches == 0):
        return 0.0
    precision = np.exp(np.mean(np.log(matches / totals)))
    brevity = 1.0 if predicted_length > reference_length else np.exp(1 - reference_length / predicted_length)
    return float(brevity * precision)


def rouge_f(prediction: list, reference: list) -> tuple[float, float, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F-measures of one row."""
    scores = []
    for n in (1, 2):
        predicted = Counter(tuple(prediction[i:i + n]) for i in range(len(prediction) - n + 1))
        wanted = Counter(tuple(reference[i:i + n]) for i in range(len(reference) - n + 1))
        overlap = sum((predicted & wanted).values())
        scores.append(_f(overlap, sum(predicted.values()), sum(wanted.values())))
    lcs = _longest_common_subsequence(prediction, reference)
    scores.append(_f(lcs, len(prediction), len(reference)))
    return scores[0], scores[1], scores[2]


def _f(overlap: int, predicted: int, wanted: int) -> float:
    if overlap == 0 or predicted == 0 or wanted == 0:
        return 0.0
    precision, recall = overlap / predicted, overlap / wanted
    return 2 * precision * recall / (precision + recall)


def _longest_common_subsequence(a: list, b: list) -> int:
    if not a or not b:
        return 0
    b_array = np.asarray([hash(x) for x in b])
    row = np.zeros(len(b) + 1, dtype=np.int64)
    for token in a:
        equal = b_array == hash(token)
        diagonal = np.where(equal, row[:-1] + 1, 0)
        row = np.maximum.accumulate(np.concatenate([[0], np.maximum(diagonal, row[1:])]))
    return int(row[-1])
