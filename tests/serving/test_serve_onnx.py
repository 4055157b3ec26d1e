"""`plait serve` on an ONNX export: the same endpoints, checks and answers as on the plait model
folder it was exported from, computed by onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.serving.conftest import RunningServer, assert_same_predictions, infer_with_triton, row_request, split_request


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(model folder, its ONNX export, 20 input rows) of a tiny model, trained and exported once."""
    from plait.api import Model

    root = tmp_path_factory.mktemp("onnx_served")
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"age": rng.normal(10, 3, 200), "color": rng.choice(["a", "b", "c"], 200),
                          "member": rng.choice([True, False], 200)})
    frame.loc[::17, "age"] = np.nan
    frame["label"] = np.where(frame["age"].fillna(10) > 10, "high", "low")
    frame["score"] = frame["age"].fillna(10) * 2 + (frame["color"] == "a")
    config = {"input_features": [{"name": "age", "type": "number"}, {"name": "color", "type": "category"},
                                 {"name": "member", "type": "binary"}],
              "output_features": [{"name": "label", "type": "category"}, {"name": "score", "type": "number"}],
              "trainer": {"epochs": 1, "batch_size": 64},
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    model = Model(config)
    model.train(frame, progress_bar=False)
    path = model.save(root / "model")
    model.export_model(root / "onnx" / "model", format="onnx")  # served as "model", as the folder is
    return str(path), str(root / "onnx" / "model"), frame[["age", "color", "member"]].head(20)


@pytest.fixture(scope="module")
def servers(exported):
    with RunningServer(exported[0]) as torch_server, RunningServer(exported[1]) as onnx_server:
        yield torch_server, onnx_server


def test_the_export_is_served_by_onnxruntime_with_the_model_folders_inputs(servers, exported):
    from plait.serving.predictors.onnx_export import OnnxPredictor

    torch_server, onnx_server = servers
    assert isinstance(onnx_server.model.predictor, OnnxPredictor)
    assert [(i.column, i.type) for i in onnx_server.model.inputs] == [(i.column, i.type) for i in torch_server.model.inputs]


def test_predict_and_batch_predict_answer_as_the_model_folder(servers, exported, http):
    rows = exported[2]
    answers = {}
    for server in servers:
        singles = [http.post(f"{server.url}/predict", json=row_request(row)).json() for _, row in rows.iterrows()]
        batch = http.post(f"{server.url}/batch_predict", json=split_request(rows)).json()
        answers[server] = singles, [dict(zip(batch["columns"], r)) for r in batch["data"]]
    torch_singles, torch_batch = answers[servers[0]]
    onnx_singles, onnx_batch = answers[servers[1]]
    assert_same_predictions(onnx_singles, pd.DataFrame(torch_singles), exact=False)
    assert_same_predictions(onnx_batch, pd.DataFrame(torch_batch), exact=False)


def test_the_inference_protocol_answers_as_the_model_folder(servers, exported):
    rows = exported[2].dropna().reset_index(drop=True)
    torch_answer, onnx_answer = (infer_with_triton(server.url, rows) for server in servers)
    assert_same_predictions(onnx_answer, pd.DataFrame(torch_answer), exact=False)


@pytest.mark.parametrize("endpoint, body", [
    ("predict", {"age": 1.0, "color": "a"}),
    ("predict", {"age": "ten", "color": "a", "member": True}),
    ("predict", {"age": 1.0, "color": "a", "member": "maybe", "aeg": 2}),
    ("predict", {"age": 1.0, "color": {"a": 1}, "member": True}),
    ("batch_predict", [{"age": 1.0, "color": "a", "member": True}, {"age": 1.0, "color": "a", "member": "maybe"}]),
    ("v2/models/model/infer", {"inputs": [{"name": "age", "shape": [1], "datatype": "FP64", "data": [1.0]}]}),
])
def test_a_bad_request_gets_the_same_4xx_and_the_server_goes_on(servers, exported, http, endpoint, body):
    answers = [http.post(f"{server.url}/{endpoint}", data=json.dumps(body),
                         headers={"content-type": "application/json"}) for server in servers]
    assert answers[1].status_code == answers[0].status_code == 400
    assert answers[1].json() == answers[0].json()
    assert http.post(f"{servers[1].url}/predict", json={"age": 1.0, "color": "a", "member": True}).status_code == 200


def test_explain_on_an_export_is_a_404_that_names_the_model_folder_and_the_folder_explains(servers, http):
    row = {"age": 1.0, "color": "a", "member": True}
    torch_server, onnx_server = servers
    answer = http.post(f"{onnx_server.url}/explain", json=row)
    assert answer.status_code == 404 and "serve the plait model folder it was exported from" in answer.json()["error"]
    assert http.post(f"{torch_server.url}/explain", json=row).json()["class"] in ("high", "low")


def test_an_export_of_images_is_refused_before_serving(tmp_path):
    from plait.errors import ModelError
    from plait.serving.predictors import open_folder

    (tmp_path / "export.json").write_text(json.dumps({"format": "onnx", "model": "model.onnx", "outputs": [], "inputs": [
        {"name": "photo", "type": "uint8", "shape": ["rows", 32, 32, 3], "feature": "photo", "feature_type": "image"}]}))
    with pytest.raises(ModelError, match=r"cannot take image or audio inputs of an ONNX export yet \(input column\(s\) "
                                         r"'photo' \(image\)\); serve the plait model folder"):
        open_folder(tmp_path)
