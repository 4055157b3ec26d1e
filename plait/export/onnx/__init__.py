"""ONNX export with the preprocessing inside: raw columns in, ``plait predict``'s columns out.

One graph holds three parts: each input's preprocessing (``features/<type>.py``), the network
(``torch.onnx.export`` of :class:`~plait.export.network.ExportedNetwork`) and each output's
postprocessing. Beside it, ``plait_onnx.py`` (a copy of ``runner.py``: numpy and onnxruntime
alone) turns Python values into the graph's typed inputs (and tokenizes text, set and bag
cells: ``features/tokens.py``), and ``export.json`` lists the inputs (column, element type, the
runner's reader), the outputs and those of them that hold a list per row.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import onnx
import onnx.compose
from onnx import helper

import plait
from plait.export.network import ExportedNetwork, example_tensors
from plait.export.onnx.features import INPUTS, OUTPUTS, RAW_TYPES
from plait.export.onnx.graph import ML_DOMAIN, GraphBuilder

MODEL_FILE = "model.onnx"
RUNNER_FILE = "plait_onnx.py"
OPSET = 21
"""ONNX's default-domain opset of the graph (onnxruntime 1.18 and later run it)."""
ML_OPSET = 3
"""ai.onnx.ml's: LabelEncoder with string, int64 and float keys and values."""
ROWS = "rows"
CHECKED_METADATA = ("labels", "vector_size", "datetime_format", "day_first")
"""The keys of an input's metadata that a server checking a raw value reads (``plait serve`` on an
export: binary labels, a vector's size, a date's format), copied into export.json."""


def refusals(model) -> list[str]:
    """Every feature of ``model`` the ONNX graph cannot hold, by name, with why."""
    from plait.utils.tokens import CACHED_EMBEDDING

    if model.config.model_type != "ecd":
        return [f"model_type {model.config.model_type!r}: only ECD models (model_type: ecd) export to ONNX"]
    features = model.metadata["features"]
    found = []
    for feature in model.config.input_features:
        if feature.type not in INPUTS:
            found.append(f"input feature {feature.name!r} is of type {feature.type}, whose preprocessing has no ONNX "
                         f"form (exportable inputs: {', '.join(sorted(INPUTS))})")
        elif CACHED_EMBEDDING in features[feature.name]:
            found.append(f"input feature {feature.name!r} is encoded by a pretrained model at preprocessing "
                         "(a cached embedding), which the graph cannot run")
        elif INPUTS[feature.type].refuse:
            found.extend(f"input feature {feature.name!r}: {why}"
                         for why in INPUTS[feature.type].refuse(features[feature.name], feature))
    found.extend(_columns_read_two_ways(model))
    for feature in model.config.output_features:
        if feature.type not in OUTPUTS:
            found.append(f"output feature {feature.name!r} is of type {feature.type}, whose predictions have no ONNX "
                         f"form (exportable outputs: {', '.join(sorted(OUTPUTS))})")
    return found


def raw_form(meta: dict, feature) -> dict:
    """What the graph's input for this feature's column holds: element type, dimensions and the
    runner's reading of it (export.json's entry, less the names)."""
    export = INPUTS[feature.type]
    reader = export.reader(meta, feature) if export.reader else {}
    return {"type": export.raw_type, "dimensions": export.raw_dimensions, **reader}


def _columns_read_two_ways(model) -> list[str]:
    """One graph input per column: features that read one column in different forms cannot share it."""
    features, readers = model.metadata["features"], {}
    for feature in model.config.input_features:
        if feature.type in INPUTS:
            readers.setdefault(feature.source_column, []).append((feature.name, raw_form(features[feature.name], feature)))
    return [f"column {column!r} is read by input features {', '.join(repr(name) for name, _ in read)} in different "
            f"forms ({'; '.join(str(form) for _, form in read)}), which one graph input cannot carry; give each "
            f"feature its own copy of the column"
            for column, read in readers.items() if any(form != read[0][1] for _, form in read)]


def write(model, folder: Path) -> None:
    network = ExportedNetwork(model.module)
    graph_model, raw_columns = with_pre_and_postprocessing(model, network, network_graph(model, network))
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, str(folder / MODEL_FILE))
    shutil.copyfile(Path(__file__).with_name("runner.py"), folder / RUNNER_FILE)
    description = {"format": "onnx", "plait_version": plait.__version__, "model": MODEL_FILE, "runner": RUNNER_FILE,
                   "inputs": raw_columns, "outputs": [o.name for o in graph_model.graph.output],
                   "lists": list_columns(graph_model),
                   "output_features": [{"name": f.name, "type": f.type, "column": f.source_column}
                                       for f in model.config.output_features]}
    (folder / "export.json").write_text(json.dumps(description, indent=2))


def list_columns(graph_model: onnx.ModelProto) -> list[str]:
    """The outputs that hold a list per row, as matrices [rows, items]: a set's labels (strings,
    "" where a row has no item), a vector's numbers. The runner turns each row into its list."""
    return [o.name for o in graph_model.graph.output if len(o.type.tensor_type.shape.dim) == 2]


def network_graph(model, network: ExportedNetwork) -> onnx.ModelProto:
    """The network alone, from ``torch.onnx.export``: inputs and outputs named ``plait/net/...``."""
    import torch

    examples = example_tensors(model.module, model.metadata["features"])
    rows = torch.export.Dim("rows", min=1)
    with warnings.catch_warnings():  # torch's own deprecations inside the exporter, not the user's to act on
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", ".*The axis name", UserWarning)
        # forward(*tensors) is one argument to torch.export: its dynamic shapes are one tuple
        program = torch.onnx.export(network, examples, dynamo=True, opset_version=OPSET, verbose=False,
                                    dynamic_shapes=(tuple({0: rows} for _ in examples),),
                                    input_names=[f"in/{name}" for name in network.inputs],
                                    output_names=[f"out/{name}/{key}" for name, key in network.outputs])
    # The graph's inputs are named after the data's columns, which may be any name torch gives a
    # value of its own ("cat", "add"): every name of the network's part starts with plait/net/.
    return onnx.compose.add_prefix(program.model_proto, "plait/net/")


def with_pre_and_postprocessing(model, network: ExportedNetwork, net: onnx.ModelProto) -> tuple[onnx.ModelProto, list]:
    """``net`` with raw-column inputs before it and ``plait predict``'s columns after it; and the
    raw columns as export.json lists them."""
    g = GraphBuilder()
    raw_inputs, raw_columns = preprocessing(g, model, network, net)
    preprocessing_nodes = len(g.nodes)
    outputs = postprocessing(g, model, network, net)
    graph = helper.make_graph(g.nodes[:preprocessing_nodes] + list(net.graph.node) + g.nodes[preprocessing_nodes:],
                              "plait", raw_inputs, outputs, initializer=list(net.graph.initializer) + g.initializers,
                              value_info=list(net.graph.value_info))
    opsets = {o.domain: o.version for o in net.opset_import}
    opsets[""] = max(opsets.get("", OPSET), OPSET)
    opsets[ML_DOMAIN] = max(opsets.get(ML_DOMAIN, ML_OPSET), ML_OPSET)
    combined = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                                 functions=list(net.functions), producer_name="plait",
                                 producer_version=plait.__version__)
    combined.ir_version = net.ir_version
    # The output columns' element types and shapes, which ONNX's shape inference writes in.
    return onnx.shape_inference.infer_shapes(combined, strict_mode=True), raw_columns


def preprocessing(g: GraphBuilder, model, network: ExportedNetwork, net: onnx.ModelProto) -> tuple[list, list]:
    """The nodes from each raw column to the network's input; the graph's inputs, one per column
    (two features may read one), and their export.json entries."""
    features, by_name = model.metadata["features"], {f.name: f for f in model.config.input_features}
    inputs, columns = {}, []
    for feature_name, net_input in zip(network.inputs, net.graph.input):
        feature = by_name[feature_name]
        export, column = INPUTS[feature.type], feature.source_column
        if column not in inputs:
            shape = [ROWS, *(f"{column}/{d}" for d in export.raw_dimensions)]
            inputs[column] = helper.make_tensor_value_info(column, RAW_TYPES[export.raw_type], shape)
            meta = features[feature_name]
            form = raw_form(meta, feature)
            form.pop("dimensions")
            columns.append({"name": column, **form, "shape": shape, "feature": feature.name,
                            "feature_type": feature.type,
                            "metadata": {key: meta[key] for key in CHECKED_METADATA if key in meta}})
        g.op("Identity", export.build(g, column, features[feature_name], feature), name=net_input.name)
    return list(inputs.values()), columns


def postprocessing(g: GraphBuilder, model, network: ExportedNetwork, net: onnx.ModelProto) -> list:
    """The nodes from the network's predictions to ``plait predict``'s columns; the graph's outputs."""
    predicted: dict[str, dict[str, str]] = {}
    for (output, key), net_output in zip(network.outputs, net.graph.output):
        predicted.setdefault(output, {})[key] = net_output.name
    features, columns = model.metadata["features"], {}
    for feature in model.config.output_features:
        columns.update(OUTPUTS[feature.type](g, predicted[feature.name], features[feature.name], feature))
    for column, tensor in columns.items():
        g.op("Identity", tensor, name=column)
    return [helper.make_empty_tensor_value_info(column) for column in columns]
