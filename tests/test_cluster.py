"""Cluster presets, JSON loading and its validation messages."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from placement_gym.cluster import (
    PRESETS,
    Cluster,
    ClusterError,
    cluster_from_dict,
    cluster_to_dict,
    load_cluster,
)
from placement_gym.cluster.presets import DEFAULT_EFFICIENCY
from placement_gym.graph.opgraph import CATEGORIES

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "my_cluster.json"
GB = 1e9


# --- presets -------------------------------------------------------------------------------------------


def test_preset_names_are_the_documented_ones():
    assert set(PRESETS) == {"k80x2", "k80x4", "k40x8", "p100x4", "v100x8", "h100x8", "cpu-igpu"}


@pytest.mark.parametrize(
    "name, n_gpus",
    [("k80x2", 2), ("k80x4", 4), ("k40x8", 8), ("p100x4", 4), ("v100x8", 8), ("h100x8", 8), ("cpu-igpu", 1)],
)
def test_preset_has_one_cpu_and_the_gpus_its_name_says(name, n_gpus):
    cluster = PRESETS[name]()
    assert isinstance(cluster, Cluster)
    assert cluster.name == name
    assert cluster.n_devices == n_gpus + 1
    assert cluster.device_names == ("cpu:0",) + tuple(f"gpu:{k}" for k in range(n_gpus))
    assert cluster.device_kinds == ("cpu",) + ("gpu",) * n_gpus
    assert cluster.description  # says what it models and the sources


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_figures_are_sane(name):
    cluster = PRESETS[name]()
    n = cluster.n_devices
    off = ~np.eye(n, dtype=bool)
    assert np.all(cluster.link_bandwidth[off] > 0) and np.all(cluster.link_latency[off] > 0)
    # Links are symmetric in every preset (no preset models a one-way asymmetry).
    np.testing.assert_array_equal(cluster.link_bandwidth, cluster.link_bandwidth.T)
    np.testing.assert_array_equal(cluster.link_latency, cluster.link_latency.T)
    # Launch overhead "a few microseconds", transfer latency 1-25 us.
    assert np.all((cluster.launch_overhead >= 1e-6) & (cluster.launch_overhead <= 2e-5))
    assert np.all((cluster.link_latency[off] >= 1e-6) & (cluster.link_latency[off] <= 25e-6))
    assert np.all((cluster.efficiency > 0) & (cluster.efficiency <= 1))
    # A GPU of a server preset out-computes its host CPU.
    gpus = np.array(cluster.device_kinds) == "gpu"
    if name != "cpu-igpu":
        assert cluster.peak_flops[gpus].min() > cluster.peak_flops[~gpus].max()


# NVIDIA datasheet figures, as in docs/references.md, "Hardware figures" (per GK210 die for the K80).
DATASHEET = {
    "k80x2": (4.37e12, 12 * GB, 240 * GB),
    "k80x4": (4.37e12, 12 * GB, 240 * GB),
    "k40x8": (4.29e12, 12 * GB, 288 * GB),
    "p100x4": (9.3e12, 16 * GB, 732 * GB),
    "v100x8": (15.7e12, 16 * GB, 900 * GB),
    "h100x8": (67e12, 80 * GB, 3350 * GB),
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_gpu_figures_match_the_datasheets(name):
    peak, memory, bandwidth = DATASHEET[name]
    cluster = PRESETS[name]()
    gpus = np.array(cluster.device_kinds) == "gpu"
    np.testing.assert_allclose(cluster.peak_flops[gpus], peak)
    np.testing.assert_allclose(cluster.memory_capacity[gpus], memory)
    np.testing.assert_allclose(cluster.memory_bandwidth[gpus], bandwidth)


@pytest.mark.parametrize("name", ["k80x2", "k80x4", "k40x8", "p100x4"])
def test_pcie_presets_use_pcie3_figures_everywhere(name):
    cluster = PRESETS[name]()
    off = ~np.eye(cluster.n_devices, dtype=bool)
    # PCIe 3.0 x16 about 12 GB/s achievable; 25 us per transfer (Addanki's simulator).
    np.testing.assert_allclose(cluster.link_bandwidth[off], 12 * GB)
    np.testing.assert_allclose(cluster.link_latency[off], 25e-6)


def test_server_cpus_are_in_the_reference_range():
    # docs/references.md: a Broadwell or Haswell server CPU of 8-18 cores: 0.5-1.3 TFLOP/s, 60-70 GB/s
    # (1.3248 = 18 x 2.3 GHz x 32 rounds to 1.3).
    for name in ("k80x2", "k80x4", "k40x8", "p100x4"):
        cluster = PRESETS[name]()
        assert 0.5e12 <= cluster.peak_flops[0] <= 1.33e12
        assert 60 * GB <= cluster.memory_bandwidth[0] <= 70 * GB


def test_nvlink_presets_are_faster_between_gpus_than_to_the_host():
    v100, h100 = PRESETS["v100x8"](), PRESETS["h100x8"]()
    # V100: 300 GB/s total over 6 links = 25 GB/s per link each way.
    assert v100.link_bandwidth[1, 2] == pytest.approx(300 * GB / 6 / 2)
    assert v100.link_bandwidth[0, 1] == pytest.approx(12 * GB)
    # H100: 900 GB/s total per GPU, half of it each way, through NVSwitch to any one peer.
    assert h100.link_bandwidth[1, 8] == pytest.approx(900 * GB / 2)
    assert h100.link_bandwidth[0, 1] == pytest.approx(50 * GB)  # PCIe 5.0 x16
    for cluster in (v100, h100):
        assert cluster.link_latency[1, 2] < cluster.link_latency[0, 1]


def test_cpu_igpu_shares_memory():
    cluster = PRESETS["cpu-igpu"]()
    # Both read the same DRAM; a copy between them reads and writes it: half its bandwidth.
    assert cluster.memory_bandwidth[0] == cluster.memory_bandwidth[1]
    assert cluster.link_bandwidth[0, 1] == pytest.approx(cluster.memory_bandwidth[0] / 2)
    # Low latency: below any PCIe preset's.
    assert cluster.link_latency[0, 1] < PRESETS["k80x2"]().link_latency[0, 1]


def test_default_efficiency_table_covers_every_kind_and_category():
    assert set(DEFAULT_EFFICIENCY) == {"cpu", "gpu"}
    for table in DEFAULT_EFFICIENCY.values():
        assert tuple(table) == CATEGORIES
        assert all(0 < value <= 1 for value in table.values())
    # CPUs reach a smaller fraction of their peak than GPUs on the compute-bound categories.
    for category in ("matmul", "conv"):
        assert DEFAULT_EFFICIENCY["cpu"][category] < DEFAULT_EFFICIENCY["gpu"][category]


# --- JSON ----------------------------------------------------------------------------------------------


def _assert_same_cluster(a: Cluster, b: Cluster) -> None:
    assert (a.name, a.device_names, a.device_kinds, a.description) == (
        b.name,
        b.device_names,
        b.device_kinds,
        b.description,
    )
    for key in (
        "peak_flops",
        "memory_bandwidth",
        "memory_capacity",
        "launch_overhead",
        "efficiency",
        "link_bandwidth",
        "link_latency",
    ):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_json_round_trip_of_every_preset(name, tmp_path):
    cluster = PRESETS[name]()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster_to_dict(cluster)))
    _assert_same_cluster(load_cluster(path), cluster)
    _assert_same_cluster(cluster_from_dict(cluster_to_dict(cluster), "x"), cluster)


def test_load_cluster_by_preset_name():
    _assert_same_cluster(load_cluster("k80x4"), PRESETS["k80x4"]())


def test_example_cluster_loads():
    cluster = load_cluster(EXAMPLE)
    assert cluster.n_devices == 3
    assert cluster.device_kinds == ("cpu", "gpu", "gpu")
    data = json.loads(EXAMPLE.read_text())
    # Given efficiencies are kept, the rest come from the kind's defaults.
    cpu = dict(zip(CATEGORIES, cluster.efficiency[0], strict=True))
    assert cpu["matmul"] == data["devices"][0]["efficiency"]["matmul"]
    assert cpu["elementwise"] == DEFAULT_EFFICIENCY["cpu"]["elementwise"]
    # Listed links both ways; the GPU pair takes default_link.
    assert cluster.link_bandwidth[1, 0] == data["links"][0]["bandwidth"]
    assert cluster.link_bandwidth[1, 2] == cluster.link_bandwidth[2, 1] == data["default_link"]["bandwidth"]
    assert cluster.link_latency[2, 1] == data["default_link"]["latency"]


def _small() -> dict:
    """A valid two-device cluster dict, hand-written."""
    return {
        "name": "small",
        "devices": [
            {
                "name": "cpu:0",
                "kind": "cpu",
                "peak_flops": 1e12,
                "memory_bandwidth": 6e10,
                "memory": 6.4e10,
                "launch_overhead": 5e-6,
            },
            {
                "name": "gpu:0",
                "kind": "gpu",
                "peak_flops": 4e12,
                "memory_bandwidth": 2.4e11,
                "memory": 1.2e10,
                "launch_overhead": 5e-6,
                "efficiency": {"conv": 0.9},
            },
        ],
        "links": [
            {"src": "cpu:0", "dst": "gpu:0", "bandwidth": 1e10, "latency": 2e-5},
            {"src": "gpu:0", "dst": "cpu:0", "bandwidth": 8e9, "latency": 3e-5},
        ],
    }


def test_small_dict_builds_the_hand_written_figures():
    cluster = cluster_from_dict(_small(), "ignored")
    assert cluster.name == "small"
    np.testing.assert_array_equal(cluster.link_bandwidth, [[0, 1e10], [8e9, 0]])
    np.testing.assert_array_equal(cluster.link_latency, [[0, 2e-5], [3e-5, 0]])
    gpu = dict(zip(CATEGORIES, cluster.efficiency[1], strict=True))
    assert gpu["conv"] == 0.9 and gpu["matmul"] == DEFAULT_EFFICIENCY["gpu"]["matmul"]


def test_name_defaults_to_the_file_stem(tmp_path):
    data = _small()
    del data["name"]
    path = tmp_path / "lab-box.json"
    path.write_text(json.dumps(data))
    assert load_cluster(path).name == "lab-box"


def test_both_ways_sets_the_reverse_link():
    data = _small()
    data["links"] = [{"src": "gpu:0", "dst": "cpu:0", "bandwidth": 5e9, "latency": 1e-5, "both_ways": True}]
    cluster = cluster_from_dict(data, "small")
    assert cluster.link_bandwidth[0, 1] == cluster.link_bandwidth[1, 0] == 5e9


def test_default_link_fills_only_unlisted_pairs():
    data = _small()
    data["links"] = data["links"][:1]
    data["default_link"] = {"bandwidth": 3e9, "latency": 4e-5}
    cluster = cluster_from_dict(data, "small")
    assert cluster.link_bandwidth[0, 1] == 1e10 and cluster.link_bandwidth[1, 0] == 3e9
    assert cluster.link_latency[1, 0] == 4e-5


def _mutated(change) -> dict:
    data = copy.deepcopy(_small())
    change(data)
    return data


def _set(path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _delete(path):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return change


BAD = [
    ("missing device field", _delete(["devices", 1, "memory"]), ["gpu:0", "missing field", "memory"]),
    (
        "unknown device field",
        _set(["devices", 0, "cores"], 8),
        ["cpu:0", "unknown field", "cores", "allowed"],
    ),
    ("unknown top field", _set(["gpus"], 4), ["unknown field", "gpus", "devices"]),
    ("missing devices", _delete(["devices"]), ["missing field", "devices"]),
    ("unknown link field", _set(["links", 0, "speed"], 1), ["cpu:0 -> gpu:0", "unknown field", "speed"]),
    ("missing link field", _delete(["links", 1, "latency"]), ["gpu:0 -> cpu:0", "missing field", "latency"]),
    ("string figure", _set(["devices", 1, "peak_flops"], "4e12"), ["gpu:0", "peak_flops", "positive finite"]),
    ("bool figure", _set(["devices", 1, "memory"], True), ["gpu:0", "memory", "positive finite"]),
    (
        "negative figure",
        _set(["devices", 0, "memory_bandwidth"], -1.0),
        ["cpu:0", "memory_bandwidth", "positive finite", "-1"],
    ),
    ("zero figure", _set(["devices", 0, "launch_overhead"], 0), ["cpu:0", "launch_overhead", "positive"]),
    ("nan figure", _set(["devices", 1, "peak_flops"], math.nan), ["gpu:0", "peak_flops", "not finite"]),
    (
        "infinite figure",
        _set(["links", 0, "bandwidth"], math.inf),
        ["cpu:0 -> gpu:0", "bandwidth", "not finite"],
    ),
    ("zero latency", _set(["links", 1, "latency"], 0.0), ["gpu:0 -> cpu:0", "latency", "positive"]),
    ("bad kind", _set(["devices", 1, "kind"], "tpu"), ["gpu:0", "kind", "cpu", "gpu", "tpu"]),
    ("duplicate device", _set(["devices", 1, "name"], "cpu:0"), ["duplicate device name", "cpu:0"]),
    ("unknown link device", _set(["links", 0, "dst"], "gpu:7"), ["gpu:7", "not a device", "cpu:0, gpu:0"]),
    ("self link", _set(["links", 0, "dst"], "cpu:0"), ["cpu:0 -> cpu:0", "itself"]),
    (
        "missing link",
        _delete(["links", 1]),
        ["missing link gpu:0 -> cpu:0", "every ordered pair", "default_link"],
    ),
    ("duplicate link", _set(["links", 0, "both_ways"], True), ["gpu:0 -> cpu:0", "more than once"]),
    ("bad both_ways", _set(["links", 0, "both_ways"], "yes"), ["both_ways", "true or false"]),
    (
        "unknown category",
        _set(["devices", 1, "efficiency"], {"attention": 0.5}),
        ["gpu:0", "attention", "allowed categories", "matmul", "data_movement"],
    ),
    (
        "efficiency above one",
        _set(["devices", 1, "efficiency"], {"matmul": 1.5}),
        ["gpu:0", "efficiency['matmul']", "(0, 1]"],
    ),
    ("efficiency zero", _set(["devices", 1, "efficiency"], {"matmul": 0}), ["gpu:0", "matmul", "(0, 1]"]),
    ("empty devices", _set(["devices"], []), ["devices", "non-empty"]),
    (
        "default_link unknown field",
        _set(["default_link"], {"bandwidth": 1e9, "latency": 1e-5, "x": 1}),
        ["default_link", "unknown field", "x"],
    ),
    (
        "default_link negative",
        _set(["default_link"], {"bandwidth": -1e9, "latency": 1e-5}),
        ["default_link", "bandwidth", "positive"],
    ),
]


@pytest.mark.parametrize("label, change, words", BAD, ids=[b[0] for b in BAD])
def test_validation_errors_name_what_is_wrong(label, change, words):
    with pytest.raises(ClusterError) as info:
        cluster_from_dict(_mutated(change), "small")
    assert isinstance(info.value, ValueError)
    for word in words:
        assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"


def test_nan_and_infinity_in_a_file_are_rejected(tmp_path):
    # Python's json reads the non-standard NaN / Infinity tokens as floats: they must still be refused.
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_small()).replace("4000000000000.0", "NaN"))
    with pytest.raises(ClusterError, match="peak_flops.*not finite"):
        load_cluster(path)


def test_invalid_json_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x", "devices": [')
    with pytest.raises(ClusterError, match="not valid JSON.*line 1"):
        load_cluster(path)


def test_json_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ClusterError, match="one JSON object"):
        load_cluster(path)


def test_unknown_name_lists_presets_and_mentions_json():
    with pytest.raises(ValueError) as info:
        load_cluster("k80x3")
    message = str(info.value)
    assert "k80x3" in message and "JSON" in message
    for name in PRESETS:
        assert name in message


def test_missing_default_link_field():
    with pytest.raises(ClusterError, match="default_link.*missing field 'latency'"):
        cluster_from_dict(_mutated(_set(["default_link"], {"bandwidth": 1e9})), "small")


def test_this_machines_virtual_cpu_devices_load_by_name():
    cluster = load_cluster("cpu3")
    assert cluster.device_names == ("cpu:0", "cpu:1", "cpu:2")
    assert set(cluster.device_kinds) == {"cpu"}
    with pytest.raises(ValueError, match="cpu<N>"):
        load_cluster("cpu0")
