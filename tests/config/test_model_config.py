"""Encoder, combiner, decoder, loss and feature settings: honest ranges, refused with the path."""

from __future__ import annotations

import pytest

TEXT = {"name": "review", "type": "text"}


def with_input(feature: dict) -> dict:
    return {"input_features": [{"name": "age", "type": "number"}, feature]}


@pytest.mark.parametrize(("sections", "problem"), [
    (with_input({**TEXT, "encoder": {"type": "transformer", "embedding_size": 30, "num_heads": 4}}),
     "input_features[1].encoder.num_heads: got 4; embedding_size (30) must be a multiple of num_heads: use a "
     "divisor of 30, such as 3"),
    ({"combiner": {"type": "transformer", "hidden_size": 10, "num_heads": 4}},
     "combiner.num_heads: got 4; hidden_size (10) must be a multiple of num_heads: use a divisor of 10, such as 2"),
    ({"output_features": [{"name": "bought", "type": "category", "loss": {"class_weights": [1, -1]}}]},
     "output_features[0].loss.class_weights: got [1.0, -1.0]; class weights must be 0 or more (0 ignores a class)"),
    (with_input({**TEXT, "encoder": {"type": "parallel_cnn", "filter_sizes": []}}),
     "input_features[1].encoder.filter_sizes: List should have at least 1 item after validation, not 0 (got [])"),
])
def test_settings_that_would_break_the_model_are_refused(refused, sections, problem):
    assert refused(**sections) == problem


@pytest.mark.parametrize(("sections", "path", "bad"), [
    (with_input({**TEXT, "encoder": {"type": "parallel_cnn", "filter_sizes": [3, 0]}}),
     "input_features[1].encoder.filter_sizes[1]", "0"),
    (with_input({**TEXT, "encoder": {"type": "rnn", "dropout": 1.0}}), "input_features[1].encoder.dropout", "1.0"),
    ({"combiner": {"output_size": 0}}, "combiner.output_size", "0"),
    ({"combiner": {"type": "transformer", "num_heads": 0}}, "combiner.num_heads", "0"),
    ({"output_features": [{"name": "bought", "type": "binary", "threshold": 1.5}]}, "output_features[0].threshold", "1.5"),
    ({"output_features": [{"name": "bought", "type": "category", "top_k": 0}]}, "output_features[0].top_k", "0"),
    ({"preprocessing": {"sample_ratio": 0}}, "preprocessing.sample_ratio", "0"),
])
def test_out_of_range_model_settings_name_the_field_and_value(refused, sections, path, bad):
    problem = refused(**sections)
    assert problem.startswith(f"{path}: ") and f"(got {bad})" in problem


def test_heads_that_divide_the_width_are_accepted(validate):
    code, _, err = validate(**with_input({**TEXT, "encoder": {"type": "transformer", "embedding_size": 30, "num_heads": 5}}))
    assert code == 0, err
