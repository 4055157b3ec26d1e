"""A trained model of every feature type, its `plait predict` answers, and real servers of it on
loopback ports (uvicorn in a thread of this process; the SIGTERM test starts `plait serve`)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest
import requests

from tests.conftest import EVERY_TYPE_INPUTS, EVERY_TYPE_OUTPUTS, every_type_frame

INPUT_COLUMNS = list(dict.fromkeys(f.get("column", f["name"]) for f in EVERY_TYPE_INPUTS))


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """(model folder, input rows, `plait predict`'s answers for them) of a model of every
    feature type, trained once per session."""
    from plait.api import Model

    root = tmp_path_factory.mktemp("served")
    frame = every_type_frame(600, seed=3)
    config = {"input_features": [dict(f) for f in EVERY_TYPE_INPUTS],
              "output_features": [dict(f) for f in EVERY_TYPE_OUTPUTS] + [{"name": "flag_out", "type": "binary"}],
              "trainer": {"epochs": 2, "batch_size": 64},
              "backend": {"type": "local", "cache_dir": str(root / "cache")}}
    frame["flag_out"] = frame["num"].fillna(0) > 10
    model = Model(config)
    model.train(frame, progress_bar=False)
    path = model.save(root / "model")
    rows = frame[INPUT_COLUMNS].head(300).reset_index(drop=True)
    rows.to_csv(root / "rows.csv", index=False)
    from plait.cli import main

    assert main(["predict", "--model-path", str(path), "--dataset", str(root / "rows.csv"),
                 "--output-directory", str(root / "predicted")]) == 0
    expected = pd.read_parquet(root / "predicted" / "predictions.parquet")
    return str(path), rows, expected


class RunningServer:
    """uvicorn serving a model on a loopback port, in a thread of this process."""

    def __init__(self, model_path: str, settings: dict | None = None):
        from plait.serving.local import listening_socket, uvicorn_server
        from plait.serving.metrics import ServerMetrics
        from plait.serving.model import ServedModel

        self.model = ServedModel(model_path, settings=settings)
        self.metrics = ServerMetrics()
        self.server = uvicorn_server(self.model, self.metrics)
        self.socket = listening_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> "RunningServer":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="module")
def server(trained):
    with RunningServer(trained[0]) as running:
        yield running


@pytest.fixture
def http():
    with requests.Session() as session:
        yield session


def row_request(row: pd.Series) -> dict:
    """A row as a JSON request: missing values as null, as a client would send them."""
    return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}


def split_request(rows: pd.DataFrame) -> dict:
    """Rows as pandas "split" JSON, missing values as null."""
    return rows.astype(object).where(rows.notna(), None).to_dict(orient="split")


def assert_same_predictions(answers: list[dict], expected: pd.DataFrame, exact: bool) -> None:
    """Served answers against `plait predict`'s: the same columns and labels; numbers equal as
    float32 (``exact``), or within float32 rounding (a row predicted in another batch size runs
    through other CPU kernels, which round differently by an ulp or two)."""
    got = pd.DataFrame(answers)
    assert list(got.columns) == list(expected.columns)
    for column in expected.columns:
        want = expected[column].to_numpy()
        if want.dtype.kind == "f":
            have = got[column].to_numpy(dtype=np.float32)
            if exact:
                np.testing.assert_array_equal(have, want, err_msg=column)
            else:
                np.testing.assert_allclose(have, want, rtol=2e-6, atol=1e-6, err_msg=column)
        else:
            assert got[column].tolist() == expected[column].tolist(), column


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer within {seconds} s"
        time.sleep(0.2)




def complete_rows(rows: pd.DataFrame) -> list[int]:
    """The positions of rows without a missing value (an inference protocol tensor has no null)."""
    return [i for i, keep in enumerate(rows.notna().all(axis=1)) if keep]


def infer_with_triton(url: str, rows: pd.DataFrame) -> list[dict]:
    """Every output of the model for ``rows``, asked through Triton's HTTP client (the Open
    Inference Protocol), one dict per row: inputs as tensors, numbers FP64, a vector [rows, n]."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("model")
    metadata = client.get_model_metadata("model")
    assert {t["name"] for t in metadata["inputs"]} == set(rows.columns)
    tensors = []
    for column in rows.columns:
        values = rows[column]
        if column == "vec":
            array = np.array([[float(x) for x in v.split()] for v in values], dtype=np.float64)
        elif values.dtype.kind == "f":
            array = values.to_numpy(dtype=np.float64)
        else:
            array = np.array([str(v) for v in values], dtype=object)
        tensor = httpclient.InferInput(column, list(array.shape), "FP64" if array.dtype == np.float64 else "BYTES")
        tensor.set_data_from_numpy(array, binary_data=False)
        tensors.append(tensor)
    outputs = [o["name"] for o in metadata["outputs"]]
    answer = client.infer("model", tensors, outputs=[httpclient.InferRequestedOutput(n, binary_data=False) for n in outputs])
    columns = {name: answer.as_numpy(name) for name in outputs}
    return [{name: (v[i].decode() if isinstance(v[i], bytes) else v[i]) for name, v in columns.items()}
            for i in range(len(rows))]
