"""ONNX import: structure, parameters, errors and the bundled graphs."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placement_gym.graph import bundled_graph_names, graph_from_onnx, load_graph
from placement_gym.graph.bundled import BUNDLED_GRAPHS_DIR, manifest
from placement_gym.graph.onnx_import import import_onnx
from placement_gym.graph.parameters import PARAMETERS_METADATA_KEY, DataInputWarning


def value(name: str, shape, elem_type: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def make_model(nodes, inputs, outputs, initializers=(), value_info=(), parameters=None, check=True):
    graph = helper.make_graph(nodes, "test_graph", inputs, outputs, list(initializers),
                              value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    if parameters is not None:
        helper.set_model_props(model, {"placement_gym.parameters": json.dumps(parameters)})
    if check:
        onnx.checker.check_model(model)
    return model


def weight(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=np.float32), name=name)


def import_quietly(model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no formula" or "taken for data" warning expected
        return graph_from_onnx(model, **kwargs)


def test_topological_order_is_stable_kahn_with_file_order_tie_break():
    # File order: C (consumes a and b), B, A. A valid order must put A and B before C; among
    # them the file order (B before A) breaks the tie.
    nodes = [
        helper.make_node("Add", ["a", "b"], ["y"], name="C"),
        helper.make_node("Neg", ["x"], ["b"], name="B"),
        helper.make_node("Relu", ["x"], ["a"], name="A"),
    ]
    model = make_model(nodes, [value("x", [2, 3])], [value("y", [2, 3])], check=False)
    g = import_quietly(model)
    assert g.op_names == ("B", "A", "C")
    assert g.op_types == ("Neg", "Relu", "Add")


def test_tensors_edges_and_outputs():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r"),
        helper.make_node("Neg", ["a"], ["b"], name="n"),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    model = make_model(nodes, [value("x", [2, 3])], [value("y", [2, 3])])
    g = import_quietly(model)
    assert g.tensor_names == ("x", "a", "b", "y")
    assert g.tensor_producer.tolist() == [-1, 0, 1, 2]
    assert g.tensor_bytes.tolist() == [24.0] * 4
    assert g.tensor_is_output.tolist() == [False, False, False, True]
    assert not g.tensor_is_parameter.any()
    edges = {(g.tensor_names[t], g.op_names[d]) for t, d in zip(g.edge_tensor, g.edge_dst, strict=True)}
    assert edges == {("x", "r"), ("a", "n"), ("a", "add"), ("b", "add")}
    assert g.data_inputs == (("x", (2, 3)),)
    assert g.depth.tolist() == [0, 1, 2]


def test_mul_of_a_tensor_by_itself_has_one_edge():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Mul", ["a", "a"], ["y"])]
    g = import_quietly(make_model(nodes, [value("x", [4])], [value("y", [4])]))
    assert g.n_edges == 2  # x -> Relu, a -> Mul (once)
    assert g.flops[1] == 4


def test_shared_parameter_is_owned_by_its_first_consumer():
    # W (4 x 4 float32 = 64 bytes) is used by two MatMuls (weights shared across time steps).
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="step0"),
             helper.make_node("MatMul", ["h", "W"], ["y"], name="step1")]
    model = make_model(nodes, [value("x", [2, 4])], [value("y", [2, 4])], [weight("W", 4, 4)])
    g = import_quietly(model)
    assert g.param_bytes.tolist() == [64.0, 0.0]
    w = g.tensor_names.index("W")
    assert g.tensor_is_parameter[w] and g.tensor_producer[w] == 0 and g.tensor_bytes[w] == 64
    consumers_of_w = g.edge_dst[g.edge_tensor == w].tolist()
    assert consumers_of_w == [1]  # only the second MatMul gets an edge; the owner has it already
    assert g.data_inputs == (("x", (2, 4)),)


def test_single_use_parameter_is_not_a_tensor_and_weight_free_contract():
    # Weight-free form: the weight is a graph input listed in the metadata; b is a data input.
    nodes = [helper.make_node("Gemm", ["x", "W", "bias"], ["y"], name="fc")]
    inputs = [value("x", [3, 5]), value("W", [5, 7]), value("bias", [7])]
    model = make_model(nodes, inputs, [value("y", [3, 7])], parameters=["W", "bias"])
    g = import_quietly(model)
    assert g.tensor_names == ("x", "y")
    assert g.param_bytes.tolist() == [4.0 * (35 + 7)]
    assert g.data_inputs == (("x", (3, 5)),)
    assert g.flops[0] == 2 * 3 * 7 * 5 + 3 * 7


def test_weight_free_file_without_metadata_finds_its_weights_by_role():
    # The same Gemm without the metadata key: W and bias are read as a Gemm's weight and bias, x as
    # its input A. (Before roles, all three were data inputs and the graph had no parameters.)
    nodes = [helper.make_node("Gemm", ["x", "W", "bias"], ["y"], name="fc", transB=1)]
    inputs = [value("x", [3, 5]), value("W", [7, 5]), value("bias", [7])]
    result = import_onnx(make_model(nodes, inputs, [value("y", [3, 7])]))
    g = result.graph
    assert g.param_bytes.tolist() == [4.0 * (35 + 7)]
    assert g.data_inputs == (("x", (3, 5)),)
    assert [(p.name, p.source, p.roles) for p in result.parameters] == [
        ("W", "graph input", ("Gemm weight",)), ("bias", "graph input", ("Gemm bias",))]
    assert result.roles.data_inputs == {"x": "Gemm input A"}


def test_metadata_wins_over_roles():
    nodes = [helper.make_node("Gemm", ["x", "W", "bias"], ["y"], name="fc", transB=1)]
    inputs = [value("x", [3, 5]), value("W", [7, 5]), value("bias", [7])]
    g = import_quietly(make_model(nodes, inputs, [value("y", [3, 7])], parameters=["W"]))
    assert g.param_bytes.tolist() == [4.0 * 35]  # bias is data: the file says so
    assert dict(g.data_inputs) == {"x": (3, 5), "bias": (7,)}


def test_weights_reshaped_before_use_and_tied_weights_count_once():
    # E (10 x 4) is an embedding table and, transposed, the output projection (tied weights);
    # P reaches the MatMul through Transpose and Reshape, the bias b through Cast.
    nodes = [
        helper.make_node("Gather", ["E", "ids"], ["h"], name="embed"),
        helper.make_node("Transpose", ["P"], ["pt"], name="pt", perm=[1, 0]),
        helper.make_node("Reshape", ["pt", "shape"], ["pr"], name="pr"),
        helper.make_node("MatMul", ["h", "pr"], ["h2"], name="proj"),
        helper.make_node("Cast", ["b"], ["bc"], name="bc", to=TensorProto.FLOAT),
        helper.make_node("Add", ["h2", "bc"], ["h3"], name="bias"),
        helper.make_node("Transpose", ["E"], ["et"], name="et", perm=[1, 0]),
        helper.make_node("MatMul", ["h3", "et"], ["logits"], name="lm_head"),
    ]
    shape = numpy_helper.from_array(np.array([4, 4], dtype=np.int64), name="shape")
    inputs = [value("ids", [2, 3], TensorProto.INT64), value("E", [10, 4]), value("P", [4, 4]),
              value("b", [4], TensorProto.FLOAT16)]
    result = import_onnx(make_model(nodes, inputs, [value("logits", [2, 3, 10])], [shape]))
    g = result.graph
    assert {p.name: p.nbytes for p in result.parameters} == {"E": 160, "P": 64, "b": 8}
    assert g.param_bytes.sum() == 160 + 64 + 8
    assert g.param_bytes[g.op_names.index("embed")] == 160  # E's owner: its first reader
    e = g.tensor_names.index("E")
    assert g.tensor_is_parameter[e] and [g.op_names[d] for d in g.edge_dst[g.edge_tensor == e]] == ["et"]
    assert g.data_inputs == (("ids", (2, 3)),)


def test_inputs_read_as_shapes_or_single_values_are_constants():
    # x @ W, reshaped by an integer input, times a single-element float input.
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
             helper.make_node("Reshape", ["h", "target"], ["r"], name="reshape"),
             helper.make_node("Mul", ["r", "temperature"], ["y"], name="scale")]
    inputs = [value("x", [3, 4]), value("W", [4, 4]), value("target", [2], TensorProto.INT64),
              value("temperature", [1])]
    model = make_model(nodes, inputs, [value("y", [6, 2])], value_info=[value("r", [6, 2])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = import_onnx(model)
    assert result.graph.data_inputs == (("x", (3, 4)),)
    assert [p.name for p in result.parameters] == ["W"]
    assert set(result.roles.constants) == {"target", "temperature"}


def test_float_initializer_read_only_as_a_shape_operand_is_not_a_weight():
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), name="scales")
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="upsample", mode="nearest")]
    g = import_quietly(make_model(nodes, [value("x", [1, 3, 4, 4])], [value("y", [1, 3, 8, 8])], [scales]))
    assert g.param_bytes.sum() == 0  # Resize's scales are values, not something a step trains


def test_float_input_without_a_role_warns_and_is_data():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    model = make_model(nodes, [value("a", [2, 4]), value("b", [2, 4])], [value("y", [2, 4])])
    with pytest.warns(DataInputWarning, match=r"'a', 'b' with a static shape were taken for data"):
        g = graph_from_onnx(model)
    assert dict(g.data_inputs) == {"a": (2, 4), "b": (2, 4)}
    # A graph's only input is its data by elimination: no warning (import_quietly turns one into an error).
    lone = make_model([helper.make_node("Relu", ["a"], ["y"])], [value("a", [2, 4])], [value("y", [2, 4])])
    assert import_quietly(lone).data_inputs == (("a", (2, 4)),)


def test_undeclared_weights_get_their_shapes_from_the_ops_that_read_them():
    # What torch.onnx.export(dynamo=True, export_params=False) writes: W and B are read, never
    # declared; the exporter's value_info gives the activations' shapes.
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3], group=1),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1)]
    model = make_model(nodes, [value("x", [2, 3, 8, 8])], [value("y", [2, 5])],
                       value_info=[value("c", [2, 4, 6, 6]), value("r", [2, 4, 6, 6]), value("f", [2, 144])],
                       check=False)
    result = import_onnx(model)
    assert {p.name: p.shape for p in result.parameters} == {
        "W": (4, 3, 3, 3), "B": (4,), "fc_w": (5, 144), "fc_b": (5,)}
    assert result.graph.param_bytes.tolist() == [4.0 * (108 + 4), 0.0, 0.0, 4.0 * (720 + 5)]
    assert {p.source for p in result.parameters} == {"undeclared"}


def test_undeclared_embedding_table_is_refused_with_the_way_out():
    nodes = [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")]
    model = make_model(nodes, [value("ids", [2, 3], TensorProto.INT64)], [value("y", [2, 3, 4])], check=False)
    with pytest.raises(ValueError, match=r"'table' \(read by Gather 'embed'\).*export_params=True"):
        graph_from_onnx(model)


def test_integer_and_scalar_initializers_are_constants():
    shape = numpy_helper.from_array(np.array([6, 2], dtype=np.int64), name="shape")
    eps = numpy_helper.from_array(np.array(1e-5, dtype=np.float32), name="eps")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Add", ["r", "eps"], ["y"])]
    model = make_model(nodes, [value("x", [3, 4])], [value("y", [6, 2])], [shape, eps])
    g = import_quietly(model)
    assert g.param_bytes.sum() == 0
    assert g.tensor_names == ("x", "r", "y")


def test_constant_nodes_are_folded_away():
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(4, np.float32)))
    nodes = [const, helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    g = import_quietly(make_model(nodes, [value("x", [4])], [value("y", [4])]))
    assert g.op_names == ("add",)
    assert "c" not in g.tensor_names
    assert g.bytes_accessed[0] == 16 * 3  # x and c read, y written
    assert g.param_bytes[0] == 0


def test_unique_op_names():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="same"),
        helper.make_node("Relu", ["a"], ["b"], name="same"),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    g = import_quietly(make_model(nodes, [value("x", [4])], [value("y", [4])], check=False))
    assert len(set(g.op_names)) == 3
    assert g.op_names[0] == "same" and g.op_names[2] == "Relu_2"


def test_shape_computed_from_constants_is_resolved():
    # ONNX data propagation does not follow ConstantOfShape: the importer folds it for inference.
    dims = helper.make_node("Constant", [], ["dims"], value=numpy_helper.from_array(np.array([3], np.int64)))
    ones = helper.make_node("ConstantOfShape", ["dims"], ["ones"],
                            value=numpy_helper.from_array(np.array([1], np.int64)))
    nodes = [dims, ones, helper.make_node("Expand", ["x", "ones"], ["e"]),
             helper.make_node("Relu", ["e"], ["y"])]
    g = import_quietly(make_model(nodes, [value("x", [2, 1, 3])], [value("y", None)], check=False))
    assert g.op_types == ("ConstantOfShape", "Expand", "Relu")
    assert g.tensor_bytes[g.tensor_names.index("e")] == 2 * 1 * 3 * 4


def test_name_and_sha256(tmp_path: Path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [4])], [value("y", [4])])
    path = tmp_path / "tiny_relu.onnx"
    onnx.save(model, path)
    g = import_quietly(path)
    assert g.name == "tiny_relu"
    assert g.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    in_memory = import_quietly(model, name="other")
    assert in_memory.name == "other"
    assert in_memory.sha256 == hashlib.sha256(model.SerializeToString()).hexdigest()


def test_not_onnx_bytes(tmp_path: Path):
    path = tmp_path / "fake.onnx"
    path.write_bytes(b"\x00\xff this is not a protobuf \x01\x02")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        graph_from_onnx(path)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        graph_from_onnx(empty)


def test_cycle_is_reported_with_an_op_on_it():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="entry"),
        helper.make_node("Add", ["a", "c"], ["b"], name="loop_add"),
        helper.make_node("Neg", ["b"], ["c"], name="loop_neg"),
    ]
    model = make_model(nodes, [value("x", [4])], [value("b", [4])], check=False)
    with pytest.raises(ValueError, match="cycle") as info:
        graph_from_onnx(model)
    assert "loop_add" in str(info.value) or "loop_neg" in str(info.value)
    assert "'entry'" not in str(info.value)


def test_dynamic_batch_input_is_rejected():
    relu = helper.make_node("Relu", ["x"], ["y"])
    model = make_model([relu], [value("x", ["N", 4])], [value("y", ["N", 4])])
    with pytest.raises(ValueError, match=r"'x' has no static shape.*\[N, 4\].*batch"):
        graph_from_onnx(model)


def test_dimension_inference_cannot_resolve_is_rejected():
    # The reshape target is a data input, so the Reshape output's shape is unknown.
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"])]
    inputs = [value("x", [2, 6]), value("s", [2], TensorProto.INT64)]
    model = make_model(nodes, inputs, [value("y", None)], check=False)
    with pytest.raises(ValueError, match=r"op 'reshape' \(Reshape\) output tensor 'r' has no static shape"):
        graph_from_onnx(model)


def test_unknown_op_types_warn_once():
    nodes = [
        helper.make_node("FancyA", ["x"], ["a"], domain="com.example"),
        helper.make_node("FancyA", ["a"], ["b"], domain="com.example"),
        helper.make_node("FancyB", ["b"], ["y"], domain="com.example"),
    ]
    graph = helper.make_graph(nodes, "g", [value("x", [4])], [value("y", [4])],
                              value_info=[value("a", [4]), value("b", [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.warns(UserWarning) as record:
        g = graph_from_onnx(model)
    messages = [str(w.message) for w in record if "no cost formula" in str(w.message)]
    assert len(messages) == 1
    assert "com.example.FancyA" in messages[0] and "com.example.FancyB" in messages[0]
    assert g.flops.sum() == 0
    assert g.bytes_accessed.tolist() == [32.0, 32.0, 32.0]


def test_unknown_bundled_name():
    with pytest.raises(ValueError, match=r"unknown graph 'no_such_graph'.*\.onnx"):
        load_graph("no_such_graph")


def test_load_graph_accepts_a_path(tmp_path: Path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [4])], [value("y", [4])])
    path = tmp_path / "by_path.onnx"
    onnx.save(model, path)
    assert load_graph(path).name == "by_path"
    assert load_graph(str(path)) is load_graph(path)  # cached while the file is unchanged


def test_tiny_torch_export(tmp_path: Path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
    model = model.eval()
    path = tmp_path / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(2, 3, 16, 16),), str(path), dynamo=False)
    g = import_quietly(path)
    n_params = sum(p.numel() for p in model.parameters())
    assert g.param_bytes.sum() == 4 * n_params
    conv = g.op_types.index("Conv")
    # Output (2, 8, 7, 7), 3 * 3 * 3 multiply-adds each, + bias.
    assert g.flops[conv] == 2 * (2 * 8 * 7 * 7) * 27 + 2 * 8 * 7 * 7
    assert g.data_inputs[0][1] == (2, 3, 16, 16)


BUNDLED = bundled_graph_names()


@pytest.mark.skipif(not BUNDLED, reason="no bundled graphs yet")
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_graph_imports_cleanly(name: str):
    entry = manifest()["graphs"][name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = load_graph(name)
    proto = onnx.load(BUNDLED_GRAPHS_DIR / entry["file"])
    n_constants = sum(node.op_type == "Constant" for node in proto.graph.node)
    assert g.n_ops == entry["nodes"] - n_constants  # every node but a Constant is an op
    assert g.param_bytes.sum() == 4 * entry["parameters"]  # float32 weights, each counted once
    assert g.sha256 == entry["sha256"]
    assert dict(g.data_inputs) == {k: tuple(v) for k, v in entry["inputs"].items()}
    assert g.flops.sum() > 0
    assert g.category.max() < 6  # no "other" ops


@pytest.mark.skipif(not BUNDLED, reason="no bundled graphs yet")
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_graph_without_its_metadata_imports_the_same(name: str):
    # The metadata lists the parameters; the roles alone must find exactly the same ones, so the
    # graph (every cost, edge and parameter byte) is the same without it.
    proto = onnx.load(BUNDLED_GRAPHS_DIR / manifest()["graphs"][name]["file"])
    kept = [p for p in proto.metadata_props if p.key != PARAMETERS_METADATA_KEY]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = import_onnx(proto, name=name)
    bundled, g = load_graph(name), result.graph
    assert result.roles.method == "roles"
    for key in ("param_bytes", "flops", "bytes_accessed", "tensor_bytes", "tensor_is_parameter",
                "edge_tensor", "edge_dst"):
        assert np.array_equal(getattr(g, key), getattr(bundled, key)), key
    assert g.data_inputs == bundled.data_inputs and g.op_names == bundled.op_names
    running = {p.name for p in result.parameters if "running_" in p.name}
    assert {p.name for p in result.parameters if not p.trainable} == running


@pytest.mark.skipif(not BUNDLED, reason="no bundled graphs yet")
def test_info_command_on_a_bundled_graph_and_a_missing_file(capsys):
    from placement_gym.cli import main

    name = BUNDLED[0]
    assert main(["graphs", "--info", name, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["identified_by"] == "metadata"
    assert info["parameters"]["count"] == manifest()["graphs"][name]["parameters"]
    assert info["warnings"] == []
    assert main(["graphs", "--info", "/nonexistent/model.onnx"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "/nonexistent/model.onnx" in err and "Traceback" not in err
