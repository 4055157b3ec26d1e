"""ONNX exports of number, binary and category features: onnxruntime on the raw rows gives
``plait predict``'s columns (labels exactly, probabilities within 1e-5), through the CLI, and in
a process where neither torch nor plait can be imported. A model the graph cannot hold is
refused by name before any file is written."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from parity import assert_same_predictions, assert_same_tensors, load_runner

from plait import Model
from plait.cli import main

pytest.importorskip("onnxruntime")


def _tabular_rows(rows: int, seed: int) -> pd.DataFrame:
    """Numbers with gaps and an outlier, categories with unseen and missing values and mixed
    case, binary inputs as words, labels as booleans and as two strings."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"size": rng.normal(10, 3, rows), "color": rng.choice(["Red", "green", "blue", "teal"], rows),
                          "member": rng.choice(["yes", "no", "Y", "n"], rows), "cat": rng.integers(0, 5, rows)})
    frame["kind"] = np.where(frame["size"] > 10, "big", np.where(frame["color"] == "Red", "red", "small"))
    frame["price"] = frame["size"] * 2.5 + frame["cat"]
    frame["sold"] = (frame["size"] + rng.normal(0, 2, rows)) > 10
    frame.loc[::9, "size"] = np.nan
    frame.loc[::13, "color"] = None
    frame.loc[5, "size"] = 1e6
    return frame


CONFIG = {
    "input_features": [
        {"name": "size", "type": "number", "preprocessing": {"outlier_strategy": "fill_with_mean"}},
        # named as a value of torch's network graph ("cat"): the graph's column inputs must not clash
        {"name": "cat", "type": "number", "preprocessing": {"normalization": "minmax"}},
        # the same column's ranks: a piecewise-linear map in the graph
        {"name": "size_rank", "column": "size", "type": "number", "preprocessing": {"normalization": "quantile"}},
        {"name": "color", "type": "category", "preprocessing": {"lowercase": True}},
        {"name": "member", "type": "binary"},
    ],
    "output_features": [{"name": "kind", "type": "category"}, {"name": "price", "type": "number"},
                        {"name": "sold", "type": "binary"}],
    "trainer": {"epochs": 2, "batch_size": 32},
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A model of every tabular type, saved and exported with ``plait export_model``."""
    root = tmp_path_factory.mktemp("onnx")
    model = Model({**CONFIG, "backend": {"type": "local", "cache_dir": str(root / "cache")}})
    model.train(dataset=_tabular_rows(300, 0), progress_bar=False, random_seed=1)
    model.save(root / "model")
    assert main(["export_model", "--model_path", str(root / "model"), "--output_path", str(root / "onnx")]) == 0
    unseen = _tabular_rows(120, 7)
    unseen.loc[3, "color"], unseen.loc[4, "member"], unseen.loc[6, "size"] = "purple", None, None
    return model, root / "onnx", unseen.drop(columns=["kind", "price", "sold"])


@pytest.mark.parametrize("feature_type", ["number", "binary", "category"])
def test_onnxruntime_on_raw_rows_gives_plait_predict_columns(exported, feature_type):
    model, folder, rows = exported
    got, expected = load_runner(folder).predict(rows), model.predict(rows)
    by_type = {"number": "price", "binary": "sold", "category": "kind"}
    assert_same_predictions(got, expected, [c for c in expected.columns if c.startswith(by_type[feature_type] + "_")])


def test_the_graph_preprocesses_each_number_input_as_plait_does(exported):
    model, folder, rows = exported
    assert_same_tensors(model, folder, rows)


def test_the_export_runs_with_numpy_and_onnxruntime_alone(exported, tmp_path):
    model, folder, rows = exported
    rows.to_json(tmp_path / "rows.json", orient="records")
    script = f"""
import importlib.abc, json, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torch", "plait", "pandas", "pyarrow"):
            raise ImportError("no " + name + " here")
sys.meta_path.insert(0, Refuse())
sys.path.insert(0, {str(folder)!r})
import plait_onnx
rows = json.load(open({str(tmp_path / "rows.json")!r}))
columns = plait_onnx.load({str(folder)!r}).predict_rows(rows)
json.dump({{k: v.tolist() for k, v in columns.items()}}, open({str(tmp_path / "out.json")!r}, "w"))
"""
    subprocess.run([sys.executable, "-I", "-c", script], check=True, timeout=120)
    got = json.loads((tmp_path / "out.json").read_text())
    assert_same_predictions({k: np.asarray(v) for k, v in got.items()}, model.predict(rows))


def test_torch_export_and_safetensors_formats(exported, tmp_path):
    import torch

    from plait.export.network import ExportedNetwork

    model, _, rows = exported
    model.export_model(tmp_path / "program", format="torch_export")
    program = torch.export.load(str(tmp_path / "program" / "model.pt2"))
    description = json.loads((tmp_path / "program" / "export.json").read_text())
    predictor = model.predictor_spec().build()
    tensors = predictor.tensors(__import__("pyarrow").Table.from_pandas(rows), predictor.inputs)
    inputs = [tensors[i["feature"]] for i in description["inputs"]]
    for got, want in zip(program.module()(*inputs), ExportedNetwork(model.module)(*inputs)):
        torch.testing.assert_close(got, want)
    model.export_model(tmp_path / "weights", format="safetensors")
    assert Model.load(tmp_path / "weights").predict(rows).equals(model.predict(rows))


def test_a_model_the_graph_cannot_hold_is_refused_by_name_before_any_file(tmp_path, capsys):
    from plait.export.onnx import refusals

    model, _ = Model({"input_features": [{"name": "series", "type": "timeseries"}],
                      "output_features": [{"name": "y", "type": "number"}]}), None
    model.metadata = {"features": {"series": {"type": "timeseries"}, "y": {"type": "number"}}}
    assert refusals(model) == ["input feature 'series' is of type timeseries, whose preprocessing has no ONNX form "
                               "(exportable inputs: bag, binary, category, date, h3, image, number, set, text, "
                               "vector)"]
    model = Model({"input_features": [{"name": "review", "type": "text", "preprocessing": {"tokenizer": "bpe"}},
                                      {"name": "when", "type": "date",
                                       "preprocessing": {"datetime_format": "%d/%m/%Y"}}],
                   "output_features": [{"name": "y", "type": "number"}]})
    model.metadata = {"features": {"review": {"type": "text", "bpe": "{}"}, "y": {"type": "number"},
                                   "when": {"type": "date", "datetime_format": "%d/%m/%Y"}}}
    assert refusals(model) == [
        "input feature 'review': its BPE subword tokenizer (tokenizer: bpe) has no ONNX form; word tokenizers "
        "(space, space_punct, ...) export",
        "input feature 'when': datetime_format '%d/%m/%Y' has no ONNX form: the graph reads ISO dates only "
        "(%Y-%m-%d, %Y-%m-%d %H:%M:%S, %Y-%m-%dT%H:%M:%S, %Y-%m-%d %H:%M, %Y-%m-%dT%H:%M)"]
    model = Model({"input_features": [{"name": "tags", "type": "set"},
                                      {"name": "words", "type": "bag", "column": "tags"}],
                   "output_features": [{"name": "y", "type": "number"}]})
    model.metadata = {"features": {"tags": {"type": "set", "fill_value": ""}, "y": {"type": "number"},
                                   "words": {"type": "bag", "fill_value": "<UNK>"}}}
    [why] = refusals(model)
    assert why.startswith("column 'tags' is read by input features 'tags', 'words' in different forms (")
    assert main(["export_model", "--model_path", str(tmp_path / "nothing"), "--output_path", str(tmp_path / "out")]) == 2
    assert "plait: error:" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_an_existing_output_folder_is_refused(exported, capsys):
    model, folder, _ = exported
    assert main(["export_model", "--model_path", str(model.path), "--output_path", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("plait: error: --output_path") and err.count("\n") == 1
