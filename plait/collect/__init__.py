"""Looking inside a trained model, with Ludwig's collect commands: ``collect_summary`` (its layers,
their parameter counts, its weights' names and its config), ``collect_weights`` (named tensors,
one file each) and ``collect_activations`` (named layers' outputs on a dataset, computed where the
backend maps batches: in this process, or as a Ray Data job on Ray)."""

from plait.collect.activations import collect_activations
from plait.collect.files import save_tensors
from plait.collect.summary import ModelSummary, model_summary
from plait.collect.weights import collect_weights

__all__ = ["ModelSummary", "collect_activations", "collect_weights", "model_summary", "save_tensors"]
