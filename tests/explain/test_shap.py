"""plait's model as SHAP's black box: on a table whose labels depend on two of six inputs (x0 and
the category c0), SHAP's kernel explainer and plait's permutation importance rank the same
two first; numpy rows and DataFrames score alike; each output type gives its shape of scores."""

from __future__ import annotations

import numpy as np
import pytest
import shap

from relevant_table import RELEVANT, relevant_rows

from plait import Model
from plait.errors import UsageError
from plait.explain.shap import encode_categories, input_columns, probability_function

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    inputs = [{"name": f"x{i}", "type": "number"} for i in range(4)] + [{"name": "c0", "type": "category"},
                                                                      {"name": "c1", "type": "category"}]
    model = Model({"input_features": inputs, "output_features": [{"name": "y", "type": "binary"},
                                                                 {"name": "z", "type": "category"}],
                   "trainer": {"epochs": 5, "batch_size": 32},
                   "backend": {"type": "local", "cache_dir": str(tmp_path_factory.mktemp("shap"))}})
    model.train(dataset=relevant_rows(400, 0, numbers=4), progress_bar=False, random_seed=1)
    return model


def test_shap_and_permutation_importance_rank_the_two_relevant_inputs_first(model):
    rows = encode_categories(model, relevant_rows(48, 1, numbers=4)[input_columns(model)])
    # KernelExplainer: with six inputs it enumerates all 62 coalitions against 8 background rows,
    # 40 rows x 496 evaluations in all. (PermutationExplainer ranks them alike, but its first call
    # compiles shap's numba code: about 20 s.)
    explainer = shap.KernelExplainer(probability_function(model, "y", encoded_categories=True), rows.iloc[:8])
    values = explainer(rows.iloc[8:], silent=True).values
    mean_abs = dict(zip(rows.columns, np.abs(values).mean(axis=0)))
    assert set(sorted(mean_abs, key=lambda name: -mean_abs[name])[:2]) == RELEVANT
    permutation = model.explain(relevant_rows(200, 2, numbers=4), output_feature_name="y", method="permutation").summary
    assert set(permutation["ranking"][:2]) == RELEVANT


def test_numpy_rows_get_the_input_columns_names(model):
    frame = relevant_rows(8, 3, numbers=4)[input_columns(model)]
    function = probability_function(model)
    encoded = encode_categories(model, frame)
    by_frame = function(frame)
    assert by_frame.shape == (8,) and ((by_frame >= 0) & (by_frame <= 1)).all()
    np.testing.assert_allclose(function(frame.to_numpy()), by_frame)  # an object array: numbers and labels
    np.testing.assert_allclose(probability_function(model, encoded_categories=True)(encoded.to_numpy()), by_frame)
    np.testing.assert_allclose(probability_function(model, class_label="False")(frame), 1 - by_frame)
    predicted = model.predict(frame)
    np.testing.assert_allclose(by_frame, predicted["y_probabilities_True"], rtol=1e-6)


def test_a_category_output_gives_every_class_or_the_one_asked(model):
    frame = relevant_rows(5, 4, numbers=4)
    every = probability_function(model, "z")(frame[input_columns(model)])
    vocabulary = model.metadata["features"]["z"]["vocabulary"]
    assert every.shape == (5, len(vocabulary))
    np.testing.assert_allclose(every.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(probability_function(model, "z", class_label="high")(frame),
                               every[:, vocabulary.index("high")])


@pytest.mark.parametrize("arguments, message", [
    ({"output_feature_name": "nope"}, "'nope' is not an output of this model"),
    ({"class_label": "maybe"}, "class_label 'maybe': not a class of output 'y'; its classes are False, True"),
])
def test_mistakes_are_one_plait_error(model, arguments, message):
    with pytest.raises(UsageError, match=message):
        probability_function(model, **arguments)


def test_codes_outside_the_vocabulary_are_refused(model):
    rows = encode_categories(model, relevant_rows(3, 5, numbers=4)[input_columns(model)]).assign(c0=99.0)
    with pytest.raises(UsageError, match="column 'c0': encoded_categories reads a category input as its index"):
        probability_function(model, encoded_categories=True)(rows)
