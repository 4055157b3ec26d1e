"""The same app as a Ray Serve deployment on the session's Ray cluster: two replicas, a batch
shared between them, answers as the local server's."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import requests

from tests.serving.conftest import (assert_same_predictions, complete_rows, infer_with_triton, row_request, split_request,
                                   wait_for)


@pytest.fixture(scope="module")
def ray_served(ray_cluster, trained):
    from ray import serve

    from plait.serving.ray_serve import APP_NAME, _application, check_room

    settings = {"num_replicas": 2, "cpus_per_replica": 0.25, "batch_piece_rows": 100}
    app, config = _application(trained[0], settings)
    check_room(config)
    with socket.socket() as probe:  # a free port for Serve's proxy
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://127.0.0.1:{port}"
    wait_for(f"{url}/")
    yield url
    serve.shutdown()


def test_two_replicas_answer_single_rows_and_share_a_batch_as_plait_predict(ray_served, trained):
    _, rows, expected = trained
    answers = [requests.post(f"{ray_served}/predict", json=row_request(row)).json() for _, row in rows.head(10).iterrows()]
    assert_same_predictions(answers, expected.head(10), exact=False)
    # 300 rows in pieces of 100: the replicas predict them together, and the answer keeps the order.
    answer = requests.post(f"{ray_served}/batch_predict", json=split_request(rows)).json()
    assert_same_predictions([dict(zip(answer["columns"], r)) for r in answer["data"]], expected, exact=False)
    assert requests.post(f"{ray_served}/predict", json={"nope": 1}).status_code == 400
    # /explain is the same app's: a replica explains with its model, as Model.explain does.
    explained = requests.post(f"{ray_served}/explain?output_feature_name=label&steps=10",
                              json=split_request(rows.head(3))).json()
    from plait.api import Model

    by_model = Model.load(trained[0], backend="local").explain(rows.head(3), output_feature_name="label", steps=10).rows
    np.testing.assert_allclose([r[explained["columns"].index("num_attribution")] for r in explained["data"]],
                               by_model["num_attribution"], atol=1e-5)
    kept = complete_rows(rows.head(30))  # the Open Inference Protocol, through Triton's client
    assert_same_predictions(infer_with_triton(ray_served, rows.iloc[kept].reset_index(drop=True)),
                            expected.iloc[kept].reset_index(drop=True), exact=False)


def test_replicas_the_cluster_cannot_hold_are_refused_before_deploying(ray_cluster, trained):
    from plait.errors import BackendError
    from plait.serving.ray_serve import _application, check_room

    _, config = _application(trained[0], {"num_replicas": 2, "gpus_per_replica": 1})
    with pytest.raises(BackendError, match=r"2 replica\(s\) x \(1 CPU, 1 GPU\) do not fit this Ray cluster, which "
                                           r"has room for 0: a replica runs on one node, and the cluster has 1 node "
                                           r"with 4 CPU, 0 GPU"):
        check_room(config)


def test_an_llm_replica_answers_openais_client_whole_and_streamed(ray_served, tmp_path):
    openai = pytest.importorskip("openai")
    from ray import serve

    from hf_models import COLORS, colour_rows, llm_config, write_colour_llama
    from plait.api import Model
    from plait.serving.ray_serve import _application

    model = Model({**llm_config(write_colour_llama(tmp_path / "llama"), generation={"min_new_tokens": 2}),
                   "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}})
    model.train(colour_rows(16), progress_bar=False)
    expected = model.predict(colour_rows(1))["french_predictions"].tolist()
    app, _ = _application(str(model.save(tmp_path / "colours")), {"cpus_per_replica": 0.25})
    serve.run(app, name="plait-llm", route_prefix="/llm", blocking=False)  # beside the other application
    wait_for(f"{ray_served}/llm/")
    client = openai.OpenAI(base_url=f"{ray_served}/llm/v1", api_key="unused", max_retries=0)
    assert [c.text for c in client.completions.create(model="colours", prompt=COLORS).choices] == expected
    stream = client.chat.completions.create(model="colours", messages=[{"role": "user", "content": "red"}], stream=True)
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 2 and "".join(pieces) == expected[0]
    serve.delete("plait-llm")
