"""Hostile or careless input to the envs, the importer, clusters and the CLI: each is refused with one
line that names what is wrong and what is allowed, before anything large is allocated."""

from __future__ import annotations

import dataclasses
import json
import warnings

import gymnasium as gym
import numpy as np
import onnx
import pytest
from conftest import hand_cluster, hand_graph
from onnx import TensorProto, helper, numpy_helper
from paths import ROOT

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.cli import main
from placement_gym.cluster import PRESETS, load_cluster
from placement_gym.cluster.load import ClusterError, cluster_from_dict
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.graph.onnx_import import graph_from_onnx
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task

ENV_CLASSES = (DevicePlacementEnv, DevicePlacementStagedEnv, DevicePlacementRefineEnv)
ENV_IDS = ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0")
LIMIT_VARIABLE = "PLACEMENT_GYM_MAX_ALLOCATION_BYTES"


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text.strip(), text
    return text


def value(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model(nodes, inputs, outputs, initializers=(), opsets=(("", 18),), value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(initializers),
                              value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def relu_neg() -> onnx.ModelProto:
    """x -> Relu 'r' -> aaaa -> Neg 'n' -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["aaaa"], name="r"),
             helper.make_node("Neg", ["aaaa"], ["y"], name="n")]
    return model(nodes, [value("x", [2, 4])], [value("y", [2, 4])])


def with_bytes(proto: onnx.ModelProto, old: bytes, new: bytes) -> onnx.ModelProto:
    """``proto`` with the first occurrence of ``old`` in its serialized form replaced by ``new`` (the
    only way to put bytes that are not UTF-8 into a string field: protobuf refuses them from Python)."""
    data = proto.SerializeToString()
    assert old in data and len(old) == len(new)
    return onnx.load_model_from_string(data.replace(old, new, 1))


def tiny_env(env_class, **kwargs):
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0)], edges=[])
    return env_class(graph=graph, cluster=hand_cluster(2), objective="inference", **kwargs)


def cluster_dict() -> dict:
    return {
        "name": "two",
        "devices": [
            {"name": "cpu:0", "kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 6e10,
             "memory": 6.4e10, "launch_overhead": 5e-6},
            {"name": "gpu:0", "kind": "gpu", "peak_flops": 4e12, "memory_bandwidth": 2.4e11,
             "memory": 1.2e10, "launch_overhead": 5e-6},
        ],
        "links": [{"src": "cpu:0", "dst": "gpu:0", "bandwidth": 1e10, "latency": 1e-5, "both_ways": True}],
    }


# --- 9. ONNX names and op types that are not UTF-8 ------------------------------------------------

def test_onnx_op_type_that_is_not_utf8_is_refused_naming_the_node():
    hostile = with_bytes(relu_neg(), b"Relu", b"R\xffel")
    with pytest.raises(ValueError) as error:
        graph_from_onnx(hostile)
    text = one_line(error)
    assert "'r'" in text and "op_type" in text and "UTF-8" in text


def test_onnx_tensor_name_that_is_not_utf8_is_refused_instead_of_cutting_the_edge():
    hostile = with_bytes(relu_neg(), b"aaaa", b"a\xffaa")  # Relu's output only: Neg still reads 'aaaa'
    with pytest.raises(ValueError) as error:
        graph_from_onnx(hostile)
    text = one_line(error)
    assert "'r'" in text and "output" in text and "UTF-8" in text


# --- 10. Cluster figures outside a plausible range ------------------------------------------------

@pytest.mark.parametrize("tiny", [1e-300, 5e-324])
@pytest.mark.parametrize("field", ["peak_flops", "memory_bandwidth", "link_bandwidth", "efficiency"])
def test_tiny_cluster_figures_are_refused_naming_the_field(field, tiny):
    cluster = hand_cluster(2)
    figures = getattr(cluster, field).copy()
    figures.flat[1] = tiny
    with pytest.raises(ValueError) as error:
        dataclasses.replace(cluster, **{field: figures})
    text = one_line(error)
    assert field in text and "gpu:" in text and "from" in text


@pytest.mark.parametrize(("path", "figure", "named"), [
    (("devices", 1, "peak_flops"), 5e-324, "peak_flops"),
    (("devices", 0, "memory_bandwidth"), 1e-300, "memory_bandwidth"),
    (("links", 0, "bandwidth"), 1e-300, "bandwidth"),
    (("devices", 1, "memory"), 1e30, "memory"),
    (("links", 0, "latency"), 1e6, "latency"),
])
def test_implausible_figures_in_cluster_json_are_refused_naming_the_field(path, figure, named):
    data = cluster_dict()
    data[path[0]][path[1]][path[2]] = figure
    with pytest.raises(ClusterError) as error:
        cluster_from_dict(data, "hostile")
    text = one_line(error)
    assert named in text and ("gpu:0" in text or "cpu:0" in text) and repr(figure) in text


def test_every_preset_lies_within_the_documented_figure_ranges():
    from placement_gym.cluster.cluster import FIGURE_RANGES

    for name in PRESETS:
        cluster = load_cluster(name)
        for key, allowed in FIGURE_RANGES.items():
            figures = getattr(cluster, key)
            if figures is None:  # a half-precision figure a cluster does not give (no tensor cores)
                continue
            if key.startswith("link_"):
                figures = figures[~np.eye(cluster.n_devices, dtype=bool)]
            assert np.all(allowed.admits(figures)), (name, key)


# --- 11. Allocations past a limit -----------------------------------------------------------------

def test_a_cluster_of_a_hundred_thousand_virtual_cpus_is_refused_before_allocating():
    with pytest.raises(ValueError) as error:
        load_cluster("cpu100000")
    text = one_line(error)
    assert "100000 devices" in text and "GiB" in text and LIMIT_VARIABLE in text


def test_a_billion_max_ops_is_refused_before_allocating():
    with pytest.raises(ValueError) as error:
        tiny_env(DevicePlacementEnv, max_ops=10**9)
    text = one_line(error)
    assert "max_ops" in text and "GiB" in text and LIMIT_VARIABLE in text


def test_the_allocation_limit_is_configurable_and_guards_clusters_tasks_and_observations(monkeypatch):
    monkeypatch.setenv(LIMIT_VARIABLE, "1e6")
    with pytest.raises(ValueError, match=f"1000 devices.*{LIMIT_VARIABLE}"):
        load_cluster("cpu1000")
    with pytest.raises(ValueError, match=f"task.*{LIMIT_VARIABLE}"):
        make_task(random_graph(4000, seed=1), hand_cluster(4), "train_step")
    with pytest.raises(ValueError, match=f"max_ops=100000.*{LIMIT_VARIABLE}"):
        tiny_env(DevicePlacementStagedEnv, max_ops=100_000)
    monkeypatch.setenv(LIMIT_VARIABLE, "1e9")
    assert load_cluster("cpu1000").n_devices == 1000
    monkeypatch.setenv(LIMIT_VARIABLE, "lots")
    with pytest.raises(ValueError, match=f"{LIMIT_VARIABLE}.*'lots'"):
        load_cluster("cpu1000")


# --- 12. Unclear errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("graph", [None, 123])
def test_a_graph_that_is_neither_a_name_a_path_nor_a_graph_gets_one_line_saying_what_is_accepted(graph):
    with pytest.raises(ValueError) as error:
        gym.make("DevicePlacement-v0", graph=graph)
    text = one_line(error)
    assert "graph" in text and "bundled graph name" in text and "OpGraph" in text and repr(graph) in text


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_render_mode_human_is_refused_by_gym_make_naming_the_allowed_modes(env_id):
    with pytest.raises(ValueError) as error:
        gym.make(env_id, graph="cifar10_cnn", cluster="k80x2", objective="inference", render_mode="human")
    assert "'human'" in one_line(error) and "ansi, rgb_array" in one_line(error)
    env = gym.make(env_id, graph="cifar10_cnn", cluster="k80x2", objective="inference", render_mode="ansi")
    assert env.metadata["render_modes"] == ["ansi", "rgb_array"] and env.render_mode == "ansi"


def test_conv_with_zero_strides_is_refused_naming_the_node_and_attribute():
    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), dtype=np.float32), name="W")
    conv = helper.make_node("Conv", ["x", "W"], ["y"], name="conv", kernel_shape=[3, 3], strides=[0, 0])
    with pytest.raises(ValueError) as error:
        graph_from_onnx(model([conv], [value("x", [1, 3, 8, 8])], [value("y", [1, 4, 6, 6])], [weight]))
    text = one_line(error)
    assert "'conv'" in text and "strides" in text and ">= 1" in text


def test_a_negative_dimension_is_refused_naming_the_node_and_tensor():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Neg", ["a"], ["y"], name="n")]
    with pytest.raises(ValueError) as error:
        graph_from_onnx(model(nodes, [value("x", [2, -3])], [value("y", [2, -3])]))
    text = one_line(error)
    assert "'x'" in text and "'r'" in text and "-3" in text and ">= 0" in text


def _unknown_ops_model() -> onnx.ModelProto:
    """An unknown default-domain op of element-wise shapes (twice) and an op of another domain."""
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["a"], name="f1"),
        helper.make_node("Frobnicate", ["a"], ["b"], name="f2"),
        helper.make_node("Mystery", ["b"], ["y"], name="m", domain="com.example"),
    ]
    return model(nodes, [value("x", [2, 3])], [value("y", [6])], opsets=(("", 18), ("com.example", 1)),
                 value_info=[value("a", [2, 3]), value("b", [2, 3])])


def test_an_unknown_op_type_costed_as_elementwise_warns_once_per_op_type(tmp_path):
    path = tmp_path / "unknown_ops.onnx"
    onnx.save(_unknown_ops_model(), path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph_from_onnx(path)
    messages = [str(w.message) for w in caught]
    guessed = [m for m in messages if "Frobnicate" in m]
    assert len(guessed) == 1 and "element-wise" in guessed[0]
    assert any("com.example.Mystery" in m for m in messages)


def test_graphs_info_shows_the_warnings_gym_make_emits(tmp_path, capsys):
    path = tmp_path / "unknown_ops.onnx"
    onnx.save(_unknown_ops_model(), path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym.make("DevicePlacement-v0", graph=str(path), cluster="k80x2", objective="inference")
    emitted = {str(w.message) for w in caught if "graph" in str(w.message)}
    assert emitted
    assert main(["graphs", "--info", str(path)]) == 0
    shown = capsys.readouterr().out
    for message in emitted:
        assert f"warning: {message}" in shown
    assert main(["graphs", "--info", str(path), "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["warnings"]) == emitted


@pytest.mark.parametrize("name", ["gpu:\x1b[31m0", "gpu:0\n", "gpu:\u202e0"])
def test_control_characters_in_device_names_are_refused(name):
    with pytest.raises(ValueError) as error:
        dataclasses.replace(hand_cluster(2), device_names=(name, "gpu:1"))
    assert "printable" in one_line(error) and repr(name) in one_line(error)
    data = cluster_dict()
    data["devices"][1]["name"] = name
    data["links"][0]["dst"] = name
    with pytest.raises(ClusterError) as error:
        cluster_from_dict(data, "hostile")
    assert "printable" in one_line(error) and repr(name) in one_line(error)


def test_control_characters_in_a_cluster_name_are_refused():
    with pytest.raises(ValueError, match="printable"):
        dataclasses.replace(hand_cluster(2), name="evil\x1b]0;title\x07")
    with pytest.raises(ClusterError, match="printable"):
        cluster_from_dict({**cluster_dict(), "name": "evil\x1b[2J"}, "hostile")


@pytest.mark.parametrize("env_class", ENV_CLASSES[1:])
def test_every_env_accepts_the_integral_float_action_that_single_shot_accepts(env_class):
    single = tiny_env(DevicePlacementEnv)
    single.reset(seed=0)
    single.step(np.array([1.0, 0.0]))  # single-shot takes integral floats
    env = tiny_env(env_class, **({"initial": "gpu:0"} if env_class is DevicePlacementRefineEnv else {}))
    env.reset(seed=0)
    env.step(1.0)
    env.step(np.float32(0.0))
    np.testing.assert_array_equal(env.placement(), [1, 0])
    env.reset(seed=0)
    for bad in (0.5, True, np.nan):
        with pytest.raises(ValueError, match=r"one device index in 0\.\.1"):
            env.step(bad)


@pytest.mark.parametrize("env_class", ENV_CLASSES)
def test_reset_options_that_are_not_a_dict_are_refused(env_class):
    env = tiny_env(env_class)
    with pytest.raises(ValueError) as error:
        env.reset(options="str")
    assert "options must be a dict or None" in one_line(error) and "'str'" in one_line(error)
    env.reset(options={})
    env.reset(options=None)


def test_parameter_metadata_of_an_onnx_file_is_parsed_strictly():
    """The parameter list an exported model carries in its metadata is the user's input too: 100,000
    nested brackets or a duplicate key are one-line errors, not a RecursionError or a silent pick."""
    from placement_gym.graph.parameters import PARAMETERS_METADATA_KEY

    for value, words in (("[" * 100_000 + "]" * 100_000, "nests"), ('{"a": 1, "a": 2}', "duplicate key")):
        hostile = relu_neg()
        helper.set_model_props(hostile, {PARAMETERS_METADATA_KEY: value})
        with pytest.raises(ValueError, match=words) as error:
            graph_from_onnx(hostile)
        assert "\n" not in str(error.value) and PARAMETERS_METADATA_KEY in str(error.value)


# --- 12. Versions nobody can read, and clusters past their limits (issue 62) -------------------------

@pytest.mark.parametrize(("ir_version", "opset", "named"), [
    (999, 18, "IR version 999"), (2, 18, "IR version 2"), (10, 999, "opset 999"), (10, 0, "opset 0")])
def test_an_onnx_file_of_an_unknown_ir_version_or_opset_is_refused_naming_the_supported_range(
        tmp_path, capsys, ir_version, opset, named):
    hostile = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2])], [value("y", [2])],
                    opsets=(("", opset),))
    hostile.ir_version = ir_version
    path = tmp_path / "hostile.onnx"
    onnx.save(hostile, path)
    assert main(["graphs", "--info", str(path)]) == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and named in message
    highest = onnx.IR_VERSION if "IR" in named else onnx.defs.onnx_opset_version()
    assert f"to {highest}" in message  # the supported range, up to what the installed onnx knows


def test_the_bundled_and_real_world_onnx_files_declare_supported_versions():

    from placement_gym.graph.onnx_import import supported_versions

    (low_ir, high_ir), (low_opset, high_opset) = supported_versions()
    root = ROOT
    files = sorted(root.glob("graphs/*.onnx")) + sorted(root.glob("tests/fixtures/onnx_real/*.onnx"))
    assert len(files) > 10
    for path in files:
        declared = onnx.load(path, load_external_data=False)
        assert low_ir <= declared.ir_version <= high_ir, path
        opsets = [o.version for o in declared.opset_import if o.domain in ("", "ai.onnx")]
        assert opsets and all(low_opset <= v <= high_opset for v in opsets), path


def test_a_cluster_file_of_a_hundred_thousand_devices_is_refused_before_reading_them(tmp_path):
    device = {"kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory": 1e10,
              "launch_overhead": 1e-5}
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"devices": [{"name": f"d{k}", **device} for k in range(100_000)],
                                "default_link": {"bandwidth": 1e10, "latency": 1e-5}}))
    with pytest.raises(ValueError) as error:
        load_cluster(str(path))
    assert "100000 devices" in one_line(error) and LIMIT_VARIABLE in one_line(error)


def test_a_cluster_file_with_more_links_than_ordered_pairs_is_refused_before_reading_them():
    data = cluster_dict()
    link = data["links"][0]
    data["links"] = [dict(link) for _ in range(5)]
    with pytest.raises(ClusterError, match="5 links; 2 devices have 2 ordered pairs") as error:
        cluster_from_dict(data, "many-links")
    one_line(error)


def test_a_link_of_a_hundred_thousand_segments_is_refused_naming_the_most_allowed():
    from placement_gym.cluster.load import MAX_LINK_SEGMENTS

    data = cluster_dict()
    data["links"][0]["segments"] = [f"s{k}" for k in range(100_000)]
    with pytest.raises(ClusterError) as error:
        cluster_from_dict(data, "segments")
    assert "100000 segments" in one_line(error) and f"at most {MAX_LINK_SEGMENTS}" in one_line(error)
    data["links"][0]["segments"] = [f"s{k}" for k in range(MAX_LINK_SEGMENTS)]
    assert len(cluster_from_dict(data, "segments").segment_names) == MAX_LINK_SEGMENTS
