"""An LLM's category output (Ludwig's ``category_extractor``): the model learns to write each row's
label, the generated text is matched to a label by the config's rules, and generation can be held
to the labels' texts (``constrain_to_vocabulary``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hf_models import FRENCH, LORA, LORA_TRAINER, colour_rows, local_llm_config, write_colour_llama
from plait.api import Model
from plait.config.llm import CategoryExtractorDecoder, LLMCategoryPreprocessing
from plait.features.llm_labels import LabelMatcher

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def category(fallback: str = "inconnu", **decoder) -> dict:
    return {"output_features": [{"name": "french", "type": "category", "decoder": decoder,
                                 "preprocessing": {"vocab": FRENCH, "fallback_label": fallback}}]}


def test_a_fine_tuned_category_output_predicts_labels_through_its_rules(base, cache_dir, tmp_path):
    # The rule names red's label by a pattern; the other labels match their own text.
    sections = category(match={"rouge": {"type": "regex", "value": "^rou"}})
    model = Model(local_llm_config(base, cache_dir, adapter=LORA, trainer=LORA_TRAINER, **sections))
    model.train(colour_rows(), progress_bar=False)
    predictions = model.predict(colour_rows(1))
    labels = [*FRENCH, "inconnu"]  # the fallback label is a class too
    assert list(predictions.columns) == ["french_predictions", "french_response", "french_probability",
                                         *[f"french_probabilities_{label}" for label in labels]]
    assert predictions["french_predictions"].tolist() == predictions["french_response"].tolist() == FRENCH
    assert (predictions["french_probability"] > 0.5).all()
    # Each label's probability as the whole answer, over the labels: they sum to 1 and the
    # written label's is the likeliest.
    per_label = predictions[[f"french_probabilities_{label}" for label in labels]].to_numpy()
    assert per_label.sum(1) == pytest.approx(1.0, abs=1e-5)
    assert [labels[i] for i in per_label.argmax(1)] == FRENCH
    model.save(tmp_path / "model")
    assert Model.load(tmp_path / "model").predict(colour_rows(1))["french_predictions"].tolist() == FRENCH
    metrics = model.evaluate(colour_rows(1))["french"]
    assert metrics["sequence_accuracy"] == metrics["accuracy"] == metrics["f1"] == 1.0
    # One row per label; the fallback label ("inconnu") is the matrix's last class, never seen.
    assert metrics["confusion_matrix"] == [[int(i == j < len(FRENCH)) for j in range(len(FRENCH) + 1)]
                                           for i in range(len(FRENCH) + 1)]
    assert metrics["per_class_stats"]["rouge"]["true_positives"] == 1


def test_a_category_outputs_metrics_score_the_labels_predict_gives(base, cache_dir):
    """An untrained model writes wrong labels: evaluation's accuracy and confusion matrix are
    those of predict's labels against the rows' labels, computed from the generated answers."""
    model = Model(local_llm_config(base, cache_dir, trainer={"type": "none"},
                                   **category(fallback="inconnu", constrain_to_vocabulary=True)))
    model.train(colour_rows(2), progress_bar=False)
    rows = colour_rows(2)
    predicted = model.predict(rows)["french_predictions"].tolist()
    labels = [*FRENCH, "inconnu"]
    expected = [[0] * len(labels) for _ in labels]
    for true, guess in zip(rows["french"], predicted):
        expected[labels.index(true)][labels.index(guess)] += 1
    metrics = model.evaluate(rows)["french"]
    assert metrics["confusion_matrix"] == expected
    assert metrics["accuracy"] == pytest.approx(sum(t == g for t, g in zip(rows["french"], predicted)) / len(rows))
    assert metrics["accuracy"] < 1.0, "the untrained model is wrong somewhere (else the test shows nothing)"


def test_a_row_whose_label_is_not_in_the_vocabulary_counts_as_wrong_and_is_named(base, cache_dir, caplog):
    model = Model(local_llm_config(base, cache_dir, trainer={"type": "none"},
                                   **category(fallback="inconnu", constrain_to_vocabulary=True)))
    model.train(colour_rows(2), progress_bar=False)
    rows = colour_rows(1).assign(french=["red", *FRENCH[1:]])  # a word of the tokenizer, not a label
    metrics = model.evaluate(rows)["french"]
    assert metrics["unseen_labels"] == 1 and sum(map(sum, metrics["confusion_matrix"])) == len(FRENCH) - 1
    assert "1 of 8 evaluated rows have a label that is not in preprocessing.vocab" in caplog.text


def test_constrained_generation_writes_only_labels_even_untrained(base, cache_dir):
    model = Model(local_llm_config(base, cache_dir, trainer={"type": "none"},
                                   **category(fallback="rouge", constrain_to_vocabulary=True)))
    model.train(colour_rows(2), progress_bar=False)
    predictions = model.predict(colour_rows(1))
    assert set(predictions["french_response"]) <= set(FRENCH)
    assert predictions["french_predictions"].tolist() == predictions["french_response"].tolist()
    # Unconstrained, the random model writes other words too.
    free = Model(local_llm_config(base, cache_dir, trainer={"type": "none"}, **category(fallback="rouge")))
    free.train(colour_rows(2), progress_bar=False)
    assert not set(free.predict(colour_rows(1))["french_response"]) <= set(FRENCH)


def matcher(match: dict | None = None, vocab=("positive", "negative", "neutral"), fallback="unknown") -> LabelMatcher:
    return LabelMatcher(SimpleNamespace(decoder=CategoryExtractorDecoder(match=match),
                                        preprocessing=LLMCategoryPreprocessing(vocab=list(vocab), fallback_label=fallback)))


@pytest.mark.parametrize("text, label", [
    ("Positive.", "positive"),                       # the label itself, case and punctuation aside
    ("I'd say it is negative overall", "negative"),  # else the first label the text contains
    ("no idea", "unknown"),                          # else the fallback
])
def test_labels_without_rules_match_their_own_text(text, label):
    assert matcher()(text) == label


@pytest.mark.parametrize("text, label", [
    ("```json\n{\"label\": \"Negative\"}\n```", "negative"),  # Ludwig's json_schema rule: fenced JSON
    ("{\"sentiment\": \"neutral\"}", "neutral"),             # a dict's first value
    ("5 stars", "positive"),                                  # a regex
    ("positive", "positive"),                                  # rules first, in their order
    ("not json", "unknown"),
])
def test_rules_are_tried_in_their_order(text, label):
    rules = {"negative": {"type": "json_schema", "value": "negative"}, "neutral": {"type": "json_schema", "value": "neutral"},
             "positive": {"type": "regex", "value": r"^\d stars$|^positive$"}}
    assert matcher(rules)(text) == label
