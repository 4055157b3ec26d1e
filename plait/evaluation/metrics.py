"""Metrics from sufficient statistics: counts and sums that add up exactly across workers.

Each output keeps a flat float64 vector of statistics. Merging shards (or workers, through one
all-reduce) is elementwise addition, so metrics of merged statistics equal metrics computed on
the whole data. Nothing here averages per-worker averages.

One class per output type says which statistics it keeps (``layout``), how a batch adds to them
(``add``) and the metrics they give (``metrics``); ``METRICS_BY_TYPE`` picks it. Every class also
keeps the head's own per-row loss, so the ``loss`` metric is the loss that is trained. A new
metric goes into its type's class here, and its name into ``plait.config.metrics``.
"""

from __future__ import annotations

import math

import numpy as np

import torch

from plait.models.base import feature_name
from plait.models.grpo import REWARD
from plait.models.labels import WRITTEN
from plait.models.preference import PREFERENCE, PreferenceScores
from plait.models.sequence_heads import PAD, STOP
from plait.evaluation.overall import binary_curves, confusion_statistics
from plait.evaluation.sequence_metrics import BLEU_ORDER, corpus_bleu, edit_distance, ngram_matches, rouge_f

AUC_BINS = 4096
MAX_CONFUSION_CLASSES = 256


class OutputMetrics:
    """Statistics layout, update and final metrics for one output feature: the loss, which every
    type keeps, and what its subclass adds."""

    def __init__(self, head):
        self.head = head
        self.type = head.feature.type
        self.classes = getattr(head, "logits_size", 1)
        # "loss" sums the rows' weighted losses and "loss_weight" their weights: the head's own
        # per-row loss (class weights included), so the metric is the loss that is trained.
        self.layout = {"count": 1, "loss": 1, "loss_weight": 1, **self.statistics()}
        self.size = sum(self.layout.values())

    def statistics(self) -> dict[str, int]:
        """The type's own statistics: name -> how many numbers."""
        raise NotImplementedError

    def add(self, s: dict[str, torch.Tensor], logits: torch.Tensor, target: torch.Tensor) -> None:
        """Add a batch to the statistics ``s`` (views into the output's vector)."""
        raise NotImplementedError

    def metrics(self, s: dict[str, torch.Tensor], n: float) -> dict[str, float]:
        """The type's metrics (all but the loss) from its statistics over ``n`` rows."""
        raise NotImplementedError

    def overall(self, s: dict[str, torch.Tensor]) -> dict:
        """Ludwig's dataset-level entries of ``test_statistics.json`` (``evaluation/overall.py``)
        from the statistics; none for most types."""
        return {}

    def zeros(self, device="cpu") -> torch.Tensor:
        return torch.zeros(self.size, dtype=torch.float64, device=device)

    def unpack(self, stats: torch.Tensor) -> dict[str, torch.Tensor]:
        return dict(zip(self.layout, torch.split(stats, list(self.layout.values()))))

    @torch.no_grad()
    def update(self, stats: torch.Tensor, logits: torch.Tensor, target: torch.Tensor) -> None:
        parts = self.unpack(stats)
        logits = logits.float()
        rows = self.head.row_losses(logits, target)
        parts["loss"] += _sum(rows.losses)
        parts["loss_weight"] += _sum(rows.weights) if rows.weights is not None else rows.losses.numel()
        self.add(parts, logits, target)

    def compute(self, stats: torch.Tensor, overall: bool = False) -> dict:
        """The metrics; with ``overall``, Ludwig's dataset-level entries too."""
        s = {k: v.cpu() for k, v in self.unpack(stats).items()}
        n = float(s["count"].item())
        if n == 0:
            return {}
        result = {k: float(v) for k, v in {"loss": self.loss(s), **self.metrics(s, n)}.items()}
        return {**result, **self.overall(s)} if overall else result

    def loss(self, s: dict[str, torch.Tensor]) -> float:
        # finish_loss: a root mean square loss is the root of the rows' mean, not a mean of rows.
        return self.head.finish_loss(_ratio(float(s["loss"].item()), float(s["loss_weight"].item())))


class BinaryMetrics(OutputMetrics):
    def statistics(self):
        return {"tp": 1, "fp": 1, "fn": 1, "tn": 1, "hist_pos": AUC_BINS, "hist_neg": AUC_BINS}

    def add(self, s, logits, target):
        y = target > 0.5
        p = torch.sigmoid(logits)
        pred = p >= self.head.feature.threshold
        s["count"] += y.numel()
        s["tp"] += (pred & y).sum(); s["fp"] += (pred & ~y).sum()
        s["fn"] += (~pred & y).sum(); s["tn"] += (~pred & ~y).sum()
        bins = (p * AUC_BINS).long().clamp(max=AUC_BINS - 1)
        s["hist_pos"] += torch.bincount(bins[y], minlength=AUC_BINS)
        s["hist_neg"] += torch.bincount(bins[~y], minlength=AUC_BINS)

    def metrics(self, s, n):
        tp, fp, fn, tn = (float(s[k].item()) for k in ("tp", "fp", "fn", "tn"))
        precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        return {"accuracy": (tp + tn) / n, "precision": precision, "recall": recall,
                "f1": _ratio(2 * precision * recall, precision + recall), "roc_auc": _auc(s["hist_pos"], s["hist_neg"])}

    def overall(self, s):
        # Ludwig's binary class names; the matrix's first row and column are the negatives.
        cm = np.array([[s["tn"].item(), s["fp"].item()], [s["fn"].item(), s["tp"].item()]])
        auc = _auc(s["hist_pos"], s["hist_neg"])
        return {**confusion_statistics(cm, ["False", "True"]), **binary_curves(s["hist_pos"].numpy(), s["hist_neg"].numpy()),
                "roc_auc_macro": auc, "roc_auc_micro": auc}


class CategoryMetrics(OutputMetrics):
    def statistics(self):
        confusion = self.classes**2 if self.classes <= MAX_CONFUSION_CLASSES else 0
        # "unseen": rows whose label the training data never had (target -1); see add.
        return {"correct": 1, "hits_at_k": 1, "unseen": 1, "confusion": confusion}

    def add(self, s, logits, target):
        # A label training never saw (-1) has no logit, so the model cannot be right about it: the
        # row counts, as a miss, in accuracy and hits_at_k (Ludwig scores it as its unknown class,
        # which no prediction matches). The loss and the confusion matrix cover the known labels
        # only, since neither has a class for it; the "unseen" count says how many were left out.
        target = target.long()
        valid = target >= 0
        s["count"] += target.numel()
        s["unseen"] += (~valid).sum()
        logits, target = logits[valid], target[valid]
        pred = logits.argmax(-1)
        s["correct"] += (pred == target).sum()
        k = min(self.head.feature.top_k, logits.shape[-1])
        s["hits_at_k"] += (logits.topk(k, dim=-1).indices == target.unsqueeze(-1)).any(-1).sum()
        if s["confusion"].numel():
            cells = torch.bincount(target * self.classes + pred, minlength=self.classes**2)
            s["confusion"] += cells

    def metrics(self, s, n):
        result = {"accuracy": float(s["correct"].item()) / n, "hits_at_k": float(s["hits_at_k"].item()) / n}
        if s["unseen"].item():  # only then, so that clean data keeps the usual set of metrics
            result["unseen_labels"] = float(s["unseen"].item())
        if s["confusion"].numel():
            result.update(_macro_scores(s["confusion"].reshape(self.classes, self.classes)))
        return result

    def overall(self, s):
        if not s["confusion"].numel():  # over MAX_CONFUSION_CLASSES classes: no matrix is kept
            return {}
        cm = s["confusion"].reshape(self.classes, self.classes).numpy()
        return confusion_statistics(cm, list(self.head.metadata["vocabulary"])[:self.classes])


class NumberMetrics(OutputMetrics):
    def statistics(self):
        return {"abs_err": 1, "sq_err": 1, "y": 1, "y2": 1}

    def add(self, s, logits, target):
        meta = self.head.metadata
        pred = logits.double() * meta["scale"] + meta["shift"]
        y = target.double() * meta["scale"] + meta["shift"]
        s["count"] += y.numel()
        s["abs_err"] += (pred - y).abs().sum(); s["sq_err"] += ((pred - y) ** 2).sum()
        s["y"] += y.sum(); s["y2"] += (y * y).sum()

    def metrics(self, s, n):
        sq, y, y2 = (float(s[k].item()) for k in ("sq_err", "y", "y2"))
        total = y2 - y * y / n
        return {"mean_absolute_error": float(s["abs_err"].item()) / n, "mean_squared_error": sq / n,
                "root_mean_squared_error": math.sqrt(sq / n), "r2": 1 - sq / total if total > 0 else 0.0}


class VectorMetrics(OutputMetrics):
    """Vectors and time series: errors per position; r2 is the positions' mean, as scikit-learn's."""

    def statistics(self):
        size = self.classes
        return {"abs_err": 1, "sq_err": size, "y": size, "y2": size}

    def add(self, s, logits, target):
        pred, y = logits.double(), target.double()
        s["count"] += y.shape[0]
        s["abs_err"] += (pred - y).abs().mean(-1).sum()
        s["sq_err"] += ((pred - y) ** 2).sum(0)
        s["y"] += y.sum(0); s["y2"] += (y * y).sum(0)

    def metrics(self, s, n):
        sq, y, y2 = (s[k].double() for k in ("sq_err", "y", "y2"))
        total = y2 - y * y / n
        r2 = torch.where(total > 0, 1 - sq / total.clamp(min=1e-300), torch.zeros_like(total))
        mse = float(sq.sum().item()) / (n * max(1, sq.numel()))
        return {"mean_absolute_error": float(s["abs_err"].item()) / n, "mean_squared_error": mse,
                "root_mean_squared_error": math.sqrt(mse), "r2": float(r2.mean().item())}


class CategoryDistributionMetrics(OutputMetrics):
    def statistics(self):
        return {"kl": 1, "correct": 1}

    def add(self, s, logits, target):
        log_p, y = torch.log_softmax(logits.double(), dim=-1), target.double()
        s["count"] += y.shape[0]
        s["kl"] += torch.where(y > 0, y * (y.clamp(min=1e-300).log() - log_p), 0.0).sum()
        s["correct"] += (log_p.argmax(-1) == y.argmax(-1)).sum()

    def metrics(self, s, n):
        return {"kl_divergence": float(s["kl"].item()) / n, "cross_entropy": self.loss(s),
                "accuracy": float(s["correct"].item()) / n}


class ImageMetrics(OutputMetrics):
    """Segmentation masks: accuracy and iou over pixels."""

    def statistics(self):  # per class: pixels in both the prediction and the target, in either
        return {"pixels": 1, "correct": 1, "intersection": self.classes, "union": self.classes}

    def add(self, s, logits, target):
        pred, target, classes = logits.argmax(1).reshape(-1), target.long().reshape(-1), self.classes
        hits = pred == target
        intersection = torch.bincount(target[hits], minlength=classes)
        s["count"] += logits.shape[0]
        s["pixels"] += target.numel()
        s["correct"] += hits.sum()
        s["intersection"] += intersection
        either = torch.bincount(pred, minlength=classes) + torch.bincount(target, minlength=classes)
        s["union"] += either - intersection

    def metrics(self, s, n):
        # iou: the mean over classes of the summed counts' ratio (not a mean of per-batch ratios);
        # a class in neither the predictions nor the targets has no ratio and is left out.
        union, present = s["union"].double(), s["union"] > 0
        iou = (s["intersection"].double()[present] / union[present]).mean().item() if present.any() else 0.0
        return {"accuracy": _ratio(float(s["correct"].item()), float(s["pixels"].item())), "iou": iou}


class SequenceMetrics(OutputMetrics):
    def statistics(self):
        return {"tokens": 1, "correct_tokens": 1, "correct_sequences": 1, "correct_last": 1, "edit_distance": 1}

    def add(self, s, output, target):
        """Token and sequence accuracy over the target's tokens and its stop token (padding left
        out); last accuracy, of the last token before the stop; the row-level scores compare the
        predicted tokens, up to their end, with the target's, up to its stop token."""
        head = self.head
        tokens, target = head.tokens(output), head.aligned(target, output.shape[1])
        counted = target != PAD  # the stop token counts: a sequence that does not end is wrong
        real = counted & (target != getattr(head, "stop_id", STOP))  # an LLM's is its model's end token
        s["count"] += target.shape[0]
        s["tokens"] += counted.sum()
        hits = (tokens == target) & counted
        s["correct_tokens"] += hits.sum()
        s["correct_sequences"] += ((tokens == target) | ~counted).all(1).sum()
        last = (real.long().cumsum(1) == real.sum(1, keepdim=True)) & real
        s["correct_last"] += (hits & last).sum()
        predicted = _cut(tokens, head.lengths(tokens))
        wanted = _cut(target, real.sum(1))
        s["edit_distance"] += sum(edit_distance(p, w) for p, w in zip(predicted, wanted))
        self.add_rows(s, predicted, wanted)

    def add_rows(self, s, predicted: list[list[int]], wanted: list[list[int]]) -> None:
        """Scores of whole rows of tokens, beyond the edit distance (a text's, below)."""

    def metrics(self, s, n):
        tokens = float(s["tokens"].item())
        loss = _ratio(float(s["loss"].item()), float(s["loss_weight"].item()))
        return {"token_accuracy": _ratio(float(s["correct_tokens"].item()), tokens),
                "sequence_accuracy": float(s["correct_sequences"].item()) / n,
                "last_accuracy": float(s["correct_last"].item()) / n,
                "perplexity": math.exp(min(loss, 700.0)), "edit_distance": float(s["edit_distance"].item()) / n}


class TextMetrics(SequenceMetrics):
    """A sequence's metrics, and BLEU, ROUGE and the character error rate of the decoded text."""

    def statistics(self):
        return {**super().statistics(), "ngram_matches": BLEU_ORDER, "ngram_totals": BLEU_ORDER,
                "predicted_length": 1, "reference_length": 1, "rouge": 3, "char_errors": 1, "chars": 1}

    def add_rows(self, s, predicted, wanted):
        """BLEU's n-gram counts, ROUGE and character errors, summed over the batch's rows in Python
        and added to the statistics once (not a tensor operation per row)."""
        vocabulary = self.head.metadata["vocabulary"]
        sums = {"ngram_matches": np.zeros(BLEU_ORDER), "ngram_totals": np.zeros(BLEU_ORDER), "rouge": np.zeros(3),
                "predicted_length": 0, "reference_length": 0, "char_errors": 0, "chars": 0}
        for p, w in zip(predicted, wanted):
            matches, totals = ngram_matches(p, w)
            sums["ngram_matches"] += matches; sums["ngram_totals"] += totals
            sums["rouge"] += rouge_f(p, w)
            sums["predicted_length"] += len(p); sums["reference_length"] += len(w)
            predicted_text, wanted_text = (" ".join(vocabulary[t] for t in row) for row in (p, w))
            sums["char_errors"] += edit_distance(predicted_text, wanted_text); sums["chars"] += len(wanted_text)
        for key, value in sums.items():
            s[key] += torch.as_tensor(value, dtype=s[key].dtype, device=s[key].device)

    def metrics(self, s, n):
        rouge = (s["rouge"] / n).tolist()
        return {**super().metrics(s, n),
                "bleu": corpus_bleu(s["ngram_matches"].numpy(), s["ngram_totals"].numpy(),
                                    float(s["predicted_length"].item()), float(s["reference_length"].item())),
                "rouge1_fmeasure": rouge[0], "rouge2_fmeasure": rouge[1], "rougeL_fmeasure": rouge[2],
                "char_error_rate": _ratio(float(s["char_errors"].item()), float(s["chars"].item()))}


class SetMetrics(OutputMetrics):
    def statistics(self):
        # "unseen": rows whose true set holds items training never saw; see add.
        return {"jaccard": 1, "tp": 1, "fp": 1, "fn": 1, "unseen": 1}

    def add(self, s, logits, target):
        # Columns past the logits' count each row's items that training never saw (none when the
        # target has no such column). No prediction can hold them: each is a false negative, and
        # part of the row's union in jaccard. The loss leaves them out (SetHead.row_losses).
        items = logits.shape[-1]
        y, unseen = target[:, :items] > 0.5, target[:, items:].double().sum(-1)
        pred = torch.sigmoid(logits) >= self.head.feature.threshold
        s["count"] += y.shape[0]
        s["unseen"] += (unseen > 0).sum()
        inter, union = (pred & y).sum(-1).double(), (pred | y).sum(-1).double() + unseen
        s["jaccard"] += torch.where(union > 0, inter / union.clamp(min=1), torch.ones_like(union)).sum()
        s["tp"] += (pred & y).sum(); s["fp"] += (pred & ~y).sum(); s["fn"] += (~pred & y).sum() + unseen.sum()

    def metrics(self, s, n):
        tp, fp, fn = (float(s[k].item()) for k in ("tp", "fp", "fn"))
        precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
        result = {"jaccard": float(s["jaccard"].item()) / n, "precision": precision, "recall": recall,
                  "f1": _ratio(2 * precision * recall, precision + recall)}
        if s["unseen"].item():  # rows, as for category outputs; only then, as there
            result["unseen_labels"] = float(s["unseen"].item())
        return result


METRICS_BY_TYPE: dict[str, type[OutputMetrics]] = {
    "binary": BinaryMetrics, "category": CategoryMetrics, "number": NumberMetrics, "vector": VectorMetrics,
    "timeseries": VectorMetrics, "category_distribution": CategoryDistributionMetrics, "image": ImageMetrics,
    "sequence": SequenceMetrics, "text": TextMetrics, "set": SetMetrics,
}
"""The statistics class of each output feature type."""


def metrics_for(head) -> OutputMetrics:
    """The metrics of the output whose head is ``head``."""
    return METRICS_BY_TYPE[getattr(head, "metrics_type", None) or head.feature.type](head)


def _macro_scores(cm: torch.Tensor) -> dict[str, float]:
    """Precision, recall and F1 of a confusion matrix of counts (true class by predicted class),
    each the mean over the classes that occur in the data."""
    tp = cm.diag()
    precision = torch.where(cm.sum(0) > 0, tp / cm.sum(0).clamp(min=1), torch.zeros_like(tp))
    recall = torch.where(cm.sum(1) > 0, tp / cm.sum(1).clamp(min=1), torch.zeros_like(tp))
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall).clamp(min=1e-12), torch.zeros_like(tp))
    present = cm.sum(1) > 0
    return {"precision": precision[present].mean().item(), "recall": recall[present].mean().item(),
            "f1": f1[present].mean().item()}


def _cut(tokens: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """Each row's first ``length`` tokens, as lists."""
    return [row[:length] for row, length in zip(tokens.tolist(), lengths.tolist())]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 0.0


def _auc(hist_pos: torch.Tensor, hist_neg: torch.Tensor) -> float:
    """ROC AUC from score histograms: P(score_pos > score_neg) + 0.5 P(tie within a bin)."""
    pos, neg = hist_pos.double(), hist_neg.double()
    total_pos, total_neg = pos.sum().item(), neg.sum().item()
    if total_pos == 0 or total_neg == 0:
        return 0.5
    pos_above = pos.flip(0).cumsum(0).flip(0) - pos  # positives in strictly higher bins
    return float(((pos_above + 0.5 * pos) * neg).sum().item() / (total_pos * total_neg))


def _sum(values: torch.Tensor) -> torch.Tensor:
    """Per-row losses summed in float64, so that shard sums add up to the whole's sum."""
    return values.double().sum()


class MetricSet:
    """Statistics for every output of a model, packed in one vector for a single all-reduce."""

    def __init__(self, model):
        self.outputs = {feature_name(key): metrics_for(head) for key, head in model.heads.items()}
        self.weights = dict(model.loss_weights)
        objective = (PreferenceMetrics(model) if model.preference is not None else
                     RewardMetrics(model) if model.grpo is not None else None)
        labels = LabelMetrics(model) if getattr(model, "writes_labels", False) else None
        self.extras = [m for m in (objective, labels) if m is not None]
        """An LLM's metrics beyond its output's: its trainer's own (and combined loss), where the
        objective is not the cross-entropy (a preference trainer's, GRPO's); a category output's
        labels. Each reads the evaluation pass's outputs under its ``key``."""

    def zeros(self, device="cpu") -> dict[str, torch.Tensor]:
        stats = {name: m.zeros(device) for name, m in self.outputs.items()}
        for extra in self.extras:
            stats[extra.key] = torch.zeros(extra.size, dtype=torch.float64, device=device)
        return stats

    def update(self, stats: dict, logits: dict, targets: dict) -> None:
        for name, metric in self.outputs.items():
            metric.update(stats[name], logits[name], targets[name])
        for extra in self.extras:
            if extra.key in logits:
                extra.update(stats[extra.key], logits, targets)

    def reduce(self, stats: dict, all_reduce_sum) -> dict:
        names = list(stats)
        flat = all_reduce_sum(torch.cat([stats[n] for n in names]))
        return dict(zip(names, torch.split(flat, [stats[n].numel() for n in names])))

    def compute(self, stats: dict, overall: bool = False) -> dict[str, dict]:
        """Each output's metrics and the combined loss; with ``overall``, Ludwig's dataset-level
        entries too (a confusion matrix, curves: what ``test_statistics.json`` holds)."""
        result = {name: m.compute(stats[name], overall) for name, m in self.outputs.items()}
        result["combined"] = {"loss": sum(self.weights[n] * result[n].get("loss", 0.0) for n in self.outputs)}
        for extra in self.extras:
            extra.compute(stats[extra.key], result, overall)
        return result


class LabelMetrics:
    """An LLM's category output scored as a category: the label of the answer the model writes
    for each row (matched by the output's rules, exactly as predict labels it) against the row's
    label. Accuracy, macro precision, recall and F1, and with ``overall`` the confusion matrix and
    Ludwig's per-class statistics over the labels (``preprocessing.labels``' order). A row whose
    label is not one of them counts as a miss, as a category output's unseen label does."""

    key = WRITTEN

    def __init__(self, model):
        from plait.features.llm_labels import LabelMatcher

        self.output = model.output_names[0]
        self.head = model.head(self.output)
        self.labels = list(self.head.metadata["labels"])
        self.index = {label: i for i, label in enumerate(self.labels)}
        self.matcher = LabelMatcher(self.head.feature)
        """Written text -> label, by the output's rules (predict's matcher)."""
        self.label_of_tokens = {self._through_end(ids): i for i, ids in enumerate(self.head.metadata["label_ids"])}
        """A label's stored ids, its end token included -> its index (how a row's target is read)."""
        self.size = 2 + len(self.labels) ** 2  # rows, unseen rows, the confusion matrix

    @torch.no_grad()
    def update(self, stats: torch.Tensor, logits: dict, targets: dict) -> None:
        from plait.features import hf_tokens

        written = logits[WRITTEN]
        lengths = self.head.lengths(written).tolist()
        texts = hf_tokens.decode([row[:n] for row, n in zip(written.tolist(), lengths)], self.head.metadata["hf_tokenizer"])
        predicted = [self.index[self.matcher(text)] for text in texts]
        wanted = [self.label_of_tokens.get(self._through_end(row), -1) for row in targets[self.output].long().tolist()]
        classes = len(self.labels)
        counts = np.zeros(self.size)
        counts[0] = len(wanted)
        for true, guess in zip(wanted, predicted):
            if true < 0:
                counts[1] += 1
            else:
                counts[2 + true * classes + guess] += 1
        stats += torch.as_tensor(counts, dtype=stats.dtype, device=stats.device)

    def _through_end(self, row: list[int]) -> tuple:
        stop = self.head.stop_id
        return tuple(row[:row.index(stop) + 1]) if stop in row else tuple(row)

    def compute(self, stats: torch.Tensor, result: dict, overall: bool = False) -> None:
        stats = stats.cpu()
        rows, unseen = float(stats[0]), float(stats[1])
        if not rows:
            return
        cm = stats[2:].reshape(len(self.labels), len(self.labels))
        scores = {"accuracy": float(cm.diag().sum()) / rows, **_macro_scores(cm)}
        if unseen:
            scores["unseen_labels"] = unseen
        if overall:
            scores.update(confusion_statistics(cm.numpy(), self.labels))
        result.setdefault(self.output, {}).update(scores)


class RewardMetrics:
    """GRPO's reward of the model's greedy completion of each row (where the batches carry the
    target: training's validation, and evaluation). The combined loss is 1 - the mean reward: what
    early stopping watches and the best weights are kept by, as the cross-entropy would not say
    whether the completions improved."""

    key, size = REWARD, 2

    def __init__(self, model):
        self.output = model.output_names[0]

    @torch.no_grad()
    def update(self, stats: torch.Tensor, logits: dict, targets: dict) -> None:
        rewards = logits[REWARD].double()
        stats += torch.stack([rewards.sum(), torch.tensor(float(len(rewards)), dtype=stats.dtype,
                                                          device=rewards.device)]).to(stats.device)

    def compute(self, stats: torch.Tensor, result: dict, overall: bool = False) -> None:
        total, rows = (float(v) for v in stats.cpu())
        if rows:
            result["combined"]["loss"] = 1 - total / rows
            result.setdefault(self.output, {})["reward"] = total / rows


class PreferenceMetrics:
    """A preference trainer's loss and reward accuracy, where the batches carried the rejected
    completions (training and validation; not a later evaluation of raw data, which has none).
    Its loss is the combined loss: what training minimizes, and what early stopping watches."""

    key, size = PREFERENCE, 3

    def __init__(self, model):
        self.objective, self.output = model.preference, model.output_names[0]
        self.head = model.head(self.output)

    @torch.no_grad()
    def update(self, stats: torch.Tensor, logits: dict, targets: dict) -> None:
        scores = PreferenceScores.of(logits[PREFERENCE])
        chosen_loss = self.head.loss(logits[self.output], targets[self.output])
        rows = len(scores.chosen)
        loss = self.objective.loss(scores, chosen_loss)
        stats += torch.tensor([float(loss) * rows, rows, float((scores.margins() > 0).sum())], dtype=stats.dtype,
                              device=stats.device)

    def compute(self, stats: torch.Tensor, result: dict, overall: bool = False) -> None:
        loss, rows, preferred = (float(v) for v in stats.cpu())
        if rows:
            result["combined"]["loss"] = loss / rows
            result.setdefault(self.output, {})["reward_accuracy"] = preferred / rows
