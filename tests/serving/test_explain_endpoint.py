"""`/explain` on the served model of every feature type: its answers are `Model.explain`'s for
the same rows, in /predict's and /batch_predict's shapes, and a bad request gets /predict's 4xx."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.serving.conftest import row_request, split_request


@pytest.fixture(scope="module")
def explained(trained):
    """(rows, `Model.explain`'s rows for them: the predicted class of ``label``, 50 steps; and
    every class of ``label``, 10 steps), feature-level as the server answers."""
    from plait.api import Model

    model_path, rows, _ = trained
    model, rows = Model.load(model_path, backend="local"), rows.head(12)
    return (rows, model.explain(rows, output_feature_name="label", parts=False).rows,
            model.explain(rows, output_feature_name="label", every_class=True, steps=10, parts=False).rows)


def assert_same_explanations(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    """The same columns, classes and steps; scores and attributions within 1e-5 (a row explained
    in another batch runs through other CPU kernels)."""
    assert list(got.columns) == list(expected.columns)
    for column in expected.columns:
        if expected[column].dtype.kind == "f":
            np.testing.assert_allclose(got[column].to_numpy(dtype=np.float64), expected[column], rtol=0, atol=1e-5,
                                       err_msg=column)
        else:
            assert got[column].tolist() == expected[column].tolist(), column


def test_one_row_as_json_or_form_fields_is_explained_as_model_explain(server, http, explained):
    rows, expected, _ = explained
    answers = [http.post(f"{server.url}/explain", json=row_request(row)).json() for _, row in rows.head(4).iterrows()]
    assert set(answers[0]) == {"class", "score", "baseline_score", "delta", "steps"} | {
        c for c in expected.columns if c.endswith("_attribution")}
    assert_same_explanations(pd.DataFrame(answers), expected.head(4).drop(columns=["row"]))
    # Ludwig's form fields, the options among them (no column of the model has their names).
    form = {k: ("" if v is None else str(v)) for k, v in row_request(rows.iloc[1]).items()}
    form |= {"output_feature_name": "label", "steps": "50"}
    answer = http.post(f"{server.url}/explain", files={k: (None, v) for k, v in form.items()}).json()
    assert_same_explanations(pd.DataFrame([answer]), expected.iloc[[1]].drop(columns=["row"]))


def test_a_batch_of_every_class_is_explained_as_model_explain_in_the_shape_it_came_in(server, http, explained):
    rows, _, expected = explained
    query = "?output_feature_name=label&every_class=true&steps=10"
    labelled = split_request(rows) | {"index": list(range(100, 112))}
    split = http.post(f"{server.url}/explain{query}", json=labelled).json()
    assert split["index"] == [100 + i // 3 for i in range(36)]  # each row's label in the request, once per class
    assert_same_explanations(pd.DataFrame(split["data"], columns=split["columns"]), expected)
    five = rows.head(5)
    as_records = five.astype(object).where(five.notna(), None).to_dict("records")
    records = http.post(f"{server.url}/explain{query}", json=as_records).json()
    assert_same_explanations(pd.DataFrame(records), expected.head(15))
    # Ludwig's batch form: the rows in the field 'dataset', the options beside them.
    form = {"dataset": (None, rows.head(2).to_json(orient="split", index=False)), "output_feature_name": (None, "label"),
            "every_class": (None, "true"), "steps": (None, "10")}
    by_form = http.post(f"{server.url}/explain", files=form).json()
    assert_same_explanations(pd.DataFrame(by_form["data"], columns=by_form["columns"]), expected.head(6))
    one = http.post(f"{server.url}/explain{query}", json=row_request(rows.iloc[2])).json()
    assert [r["class"] for r in one] == expected["class"].tolist()[6:9]


@pytest.mark.parametrize("query, body_change, expected", [
    ("", {"cat": None, "nmu": 3}, "unknown feature(s) 'nmu' (did you mean 'num'?)"),
    ("", {"num": "ten"}, "input feature 'num' (number) expects a number, got 'ten'"),
    ("?steps=5000", {}, "steps '5000': give a whole number of integration steps from 1 to 1000"),
    ("?steps=0", {}, "steps '0': give a whole number"),
    ("?every_class=maybe", {}, "every_class 'maybe': give true or false"),
    ("?output_feature_name=nope", {}, "output_feature_name 'nope' is not an output of this model; its outputs are "
                                      "label, score, flag_out"),
    ("?output_feature_name=label&stpes=5", {}, "/explain takes the query parameters output_feature_name, every_class, "
                                               "steps; not 'stpes'"),
])
def test_a_bad_request_gets_a_400_as_on_predict_and_the_server_goes_on(server, http, explained, query, body_change,
                                                                      expected):
    rows, reference, _ = explained
    row = row_request(rows.iloc[0]) | body_change
    if "cat" in body_change:
        del row["cat"]
    response = http.post(f"{server.url}/explain{query}", json=row)
    assert response.status_code == 400 and expected in response.json()["error"], response.text
    if not query:  # the row's mistakes: /predict's very message
        assert response.json() == http.post(f"{server.url}/predict", json=row).json()
        batch = http.post(f"{server.url}/explain", json=[row, row])
        assert batch.json() == http.post(f"{server.url}/batch_predict", json=[row, row]).json()
    assert http.post(f"{server.url}/explain", json=row_request(rows.iloc[0])).json()["score"] == pytest.approx(
        reference["score"][0], abs=1e-5)
