"""Every endpoint over a real loopback connection, its answers against `plait predict`'s."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson

from tests.serving.conftest import INPUT_COLUMNS, assert_same_predictions, row_request


def test_liveness_and_info(server, http):
    assert http.get(f"{server.url}/").json() == {"message": "plait model server is alive"}
    info = http.get(f"{server.url}/info").json()
    assert list(dict.fromkeys(f["column"] for f in info["input_features"])) == INPUT_COLUMNS
    outputs = {f["name"]: f for f in info["output_features"]}
    assert outputs["label"]["type"] == "category"
    assert "label_probabilities_p" in outputs["label"]["prediction_columns"]


def test_single_rows_as_json_and_as_form_fields_answer_as_plait_predict(server, http, trained):
    _, rows, expected = trained
    answers = [http.post(f"{server.url}/predict", json=row_request(row)).json() for _, row in rows.head(25).iterrows()]
    assert_same_predictions(answers, expected.head(25), exact=False)
    # Ludwig's clients send form fields: every value is text, and a missing value an empty field.
    form = [{k: ("" if v is None else str(v)) for k, v in row_request(row).items()} for _, row in rows.head(5).iterrows()]
    by_form = [http.post(f"{server.url}/predict", files={k: (None, v) for k, v in f.items()}).json() for f in form]
    assert_same_predictions(by_form, expected.head(5), exact=False)


def test_a_batch_answers_exactly_as_plait_predict_in_the_shape_it_came_in(server, http, trained):
    _, rows, expected = trained
    split = rows.to_json(orient="split", index=False)
    answer = http.post(f"{server.url}/batch_predict", files={"dataset": (None, split)}).json()
    assert answer["index"] == list(range(len(rows)))
    assert_same_predictions([dict(zip(answer["columns"], r)) for r in answer["data"]], expected, exact=True)
    records = http.post(f"{server.url}/batch_predict", data=rows.head(40).to_json(orient="records"),
                        headers={"content-type": "application/json"}).json()
    assert isinstance(records, list) and len(records) == 40
    assert_same_predictions(records, expected.head(40), exact=False)


def test_labelled_rows_are_welcome_and_their_labels_ignored(server, http, trained):
    _, rows, expected = trained
    row = {**row_request(rows.iloc[0]), "label": "q", "score": 1.5}
    assert_same_predictions([http.post(f"{server.url}/predict", json=row).json()], expected.head(1), exact=False)


def test_concurrent_single_rows_share_forward_passes_and_each_gets_its_own_answer(server, trained):
    import requests

    _, rows, expected = trained
    before = _micro_batches(server)

    def ask(i: int) -> dict:
        return requests.post(f"{server.url}/predict", json=row_request(rows.iloc[i])).json()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, [i % 50 for i in range(400)]))
    assert_same_predictions(answers, expected.iloc[[i % 50 for i in range(400)]].reset_index(drop=True), exact=False)
    passes, served = (now - then for now, then in zip(_micro_batches(server), before))
    assert served == 400 and passes < 400  # some rows shared a pass


def _micro_batches(server) -> tuple[float, float]:
    """(forward passes, rows) the micro-batcher ran so far, from the metrics endpoint."""
    import requests

    text = requests.get(f"{server.url}/metrics").text
    value = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line and not line.startswith("#")}
    return value["plait_micro_batch_rows_count"], value["plait_micro_batch_rows_sum"]


def test_metrics_count_requests_by_endpoint_and_status(server, http):
    http.post(f"{server.url}/predict", json={"nope": 1})
    text = http.get(f"{server.url}/metrics").text
    assert 'plait_requests_total{endpoint="predict",status="400"}' in text
    assert "plait_request_duration_seconds_bucket" in text and "plait_requests_in_flight" in text


def test_floats_are_written_with_float32_digits(server, http, trained):
    _, rows, _ = trained
    raw = http.post(f"{server.url}/predict", json=row_request(rows.iloc[1])).content
    value = orjson.loads(raw)["label_probability"]
    assert repr(value) == repr(float(str(np.float32(value))))  # shortest digits that round-trip in float32


def test_a_vector_holding_nan_or_inf_is_predicted_as_a_missing_vector_by_the_server_and_the_api(server, http, trained):
    """As inf in a number is: the feature's missing_value_strategy fills it. It reached the model
    and gave NaN probabilities beside a confident label."""
    import pandas as pd

    from plait.api import Model

    model_path, rows, _ = trained
    row = row_request(rows.iloc[1])
    filled = Model.load(model_path).predict(pd.DataFrame([row | {"vec": None}, row | {"vec": [1.0, float("inf"), 3.0]}]))
    assert filled.filter(like="probabilit").notna().all().all()
    assert_same_predictions([filled.iloc[0].to_dict()], filled.iloc[[1]], exact=False)
    answers = [http.post(f"{server.url}/predict", json=row | {"vec": vec}).json() for vec in ("1 nan 3", "-inf 0 0", "1e300 0 0")]
    answers += http.post(f"{server.url}/batch_predict", json=[row | {"vec": "1 NaN 3"}]).json()
    assert_same_predictions(answers, filled.iloc[[0] * 4].reset_index(drop=True), exact=False)
