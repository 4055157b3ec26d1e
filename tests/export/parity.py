"""Checks shared by the export tests: an ONNX export against ``plait predict`` on the same rows."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

PROBABILITY_TOLERANCE = 1e-5


def load_runner(folder: Path):
    """The export folder's own plait_onnx.py, imported by path (what a user of the folder runs)."""
    spec = importlib.util.spec_from_file_location(f"plait_onnx_{abs(hash(str(folder)))}", folder / "plait_onnx.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load(folder)


def assert_same_predictions(got: dict, expected: pd.DataFrame, columns: list[str] | None = None) -> None:
    """The export's columns against ``Model.predict``'s: the same names in the same order, labels
    equal, numbers within PROBABILITY_TOLERANCE."""
    if columns is None:
        assert list(got) == list(expected.columns)
        columns = list(expected.columns)
    for column in columns:
        want, have = expected[column].to_numpy(), np.asarray(got[column])
        assert have.shape[0] == len(want), column
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have.reshape(len(want), -1)[:, 0], want, atol=PROBABILITY_TOLERANCE,
                                       err_msg=column)
        elif want.dtype.kind == "O" and len(want) and isinstance(want[0], (list, np.ndarray)):
            assert [sorted(map(str, row)) for row in have] == [sorted(map(str, row)) for row in want], column
        else:
            assert have.reshape(-1).astype(want.dtype).tolist() == want.tolist(), column


def assert_same_tensors(model, folder: Path, rows: pd.DataFrame, feed=None) -> None:
    """The graph's preprocessing of ``rows`` (or of ``feed``, the same rows as the runner takes
    them) against plait's: each input's model-ready tensor, exactly."""
    import pyarrow as pa

    runner, session, names = _preprocessing_session(folder)
    got = dict(zip(names, session.run([NETWORK_INPUT + n for n in names], runner.feeds(rows if feed is None else feed))))
    predictor = model.predictor_spec().build()
    expected = predictor.tensors(pa.Table.from_pandas(rows, preserve_index=False), predictor.inputs)
    assert sorted(expected) == sorted(names)
    for name, tensor in expected.items():
        np.testing.assert_array_equal(got[name], tensor.numpy(), err_msg=name)


NETWORK_INPUT = "plait/net/in/"
"""What the graph names the network's input tensors (plait.export.onnx.network_graph)."""


@functools.lru_cache(maxsize=4)
def _preprocessing_session(folder: Path):
    """(runner, a session of the export's graph that also returns each network input, their
    feature names): the graph's preprocessing made visible."""
    import onnx
    import onnxruntime

    runner = load_runner(folder)
    graph = onnx.load(str(folder / runner.description["model"]))
    inputs = [v for v in graph.graph.value_info if v.name.startswith(NETWORK_INPUT)]
    graph.graph.output.extend(inputs)
    session = onnxruntime.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    return runner, session, [v.name.removeprefix(NETWORK_INPUT) for v in inputs]
