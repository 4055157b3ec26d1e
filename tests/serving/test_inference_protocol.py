"""The Open Inference Protocol (KServe v2) on the local server, driven by Triton's HTTP client
(which KServe's v2 clients resemble) and by a KServe v2 JSON body: the same predictions as
/batch_predict and `plait predict`."""

from __future__ import annotations

from tests.serving.conftest import assert_same_predictions, complete_rows, infer_with_triton


def test_tritons_client_gets_plait_predicts_answers(server, trained):
    _, rows, expected = trained
    kept = complete_rows(rows.head(60))
    got = infer_with_triton(server.url, rows.iloc[kept].reset_index(drop=True))
    assert_same_predictions(got, expected.iloc[kept].reset_index(drop=True), exact=False)


def test_a_kserve_v2_json_body_is_answered_and_bad_ones_get_a_4xx(server, trained, http):
    _, rows, expected = trained
    first = complete_rows(rows)[0]
    row = rows.iloc[first].to_dict()
    body = {"id": "42", "inputs": [
        {"name": "num", "shape": [1], "datatype": "FP32", "data": [float(row["num"])]},
        {"name": "cat", "shape": [1], "datatype": "BYTES", "data": [row["cat"]]},
        {"name": "txt", "shape": [1], "datatype": "BYTES", "data": [row["txt"]]},
        {"name": "flag", "shape": [1], "datatype": "BOOL", "data": [bool(row["flag"])]},
        {"name": "tags", "shape": [1], "datatype": "BYTES", "data": [row["tags"]]},
        {"name": "vec", "shape": [1, 3], "datatype": "FP32", "data": [[float(x) for x in row["vec"].split()]]},
    ], "outputs": [{"name": "label_predictions"}]}
    answer = http.post(f"{server.url}/v2/models/model/infer", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"model_name": "model", "model_version": "1", "id": "42", "outputs": [
        {"name": "label_predictions", "datatype": "BYTES", "shape": [1], "data": [expected.label_predictions[first]]}]}
    for bad, status, message in [
        ({**body, "inputs": body["inputs"][1:]}, 400, "missing input feature(s) 'num'"),
        ({**body, "inputs": [{**body["inputs"][0], "shape": [2]}, *body["inputs"][1:]]}, 400, "holds 2 values, its data 1"),
        ({**body, "outputs": [{"name": "nope"}]}, 400, "has no output(s) 'nope'"),
        ({"inputs": "x"}, 400, "a JSON object with 'inputs'"),
    ]:
        answer = http.post(f"{server.url}/v2/models/model/infer", json=bad)
        assert answer.status_code == status and message in answer.json()["error"], answer.text
    answer = http.post(f"{server.url}/v2/models/other/infer", json=body)
    assert answer.status_code == 404 and "it serves 'model'" in answer.json()["error"]
    assert http.get(f"{server.url}/v2").json()["name"] == "plait"
