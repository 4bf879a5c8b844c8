"""Cluster presets, JSON loading and its validation messages."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cluster import (
    PRESETS,
    Cluster,
    ClusterError,
    cluster_from_dict,
    cluster_to_dict,
    load_cluster,
)
from placement_gym.cluster.hardware import (
    ARCHITECTURES,
    BAECHI_PYTORCH_COPY,
    DEFAULT_EFFICIENCY,
    DEFAULT_TENSOR_EFFICIENCY,
    default_efficiency_row,
)
from placement_gym.graph.opgraph import CATEGORIES

EXAMPLE = ROOT / "examples" / "my_cluster.json"
GB = 1e9


# --- presets -------------------------------------------------------------------------------------------


N_GPUS = {
    "k80x2": 2,
    "k80x4": 4,
    "k40x2": 2,
    "k40x4": 4,
    "k40x8": 8,
    "dgx1-p100": 8,
    "baechi-rtx2080x4": 4,
    "p100x4": 4,
    "v100x8": 8,
    "h100x8": 8,
    "cpu-igpu": 1,
}


# Presets of several nodes (tests/cluster/test_multinode.py): nodes, GPUs and CPUs.
MULTI_NODE = {"dgx-a100": (1, 8), "dgx-h100x2": (2, 16), "dgx-h100x4": (4, 32), "dgx-h100x8": (8, 64),
              "h100-a100": (2, 16)}


def test_the_documented_presets_are_presets():
    # A preset is a data file (tests/cluster/test_cluster_preset_files.py): one added later needs no
    # entry here.
    assert set(N_GPUS) | set(MULTI_NODE) <= set(PRESETS)
    assert not set(N_GPUS) & set(MULTI_NODE)


@pytest.mark.parametrize("name, n_gpus", sorted(N_GPUS.items()))
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
    # Launch overhead "a few microseconds", transfer latency 1-25 us; Baechi's GPU-to-GPU copies are
    # its fitted PyTorch figure, 0.1 ms per transfer (it includes the copy's setup in eager mode).
    assert np.all((cluster.launch_overhead >= 1e-6) & (cluster.launch_overhead <= 2e-5))
    gpus = np.array(cluster.device_kinds) == "gpu"
    usual = off
    if name == "baechi-rtx2080x4":
        gpu_pairs = off & np.outer(gpus, gpus)
        np.testing.assert_array_equal(cluster.link_latency[gpu_pairs], BAECHI_PYTORCH_COPY[1])
        usual = off & ~gpu_pairs
    assert np.all((cluster.link_latency[usual] >= 1e-6) & (cluster.link_latency[usual] <= 25e-6))
    assert np.all((cluster.efficiency > 0) & (cluster.efficiency <= 1))
    # A GPU of a server preset out-computes its host CPU.
    if name != "cpu-igpu":
        assert cluster.peak_flops[gpus].min() > cluster.peak_flops[~gpus].max()


# NVIDIA datasheet figures, as in docs/references.md, "Hardware figures" (per GK210 die for the K80),
# and the GPU's architecture.
DATASHEET = {
    "k80x2": (4.37e12, 12 * GB, 240 * GB, "kepler"),
    "k80x4": (4.37e12, 12 * GB, 240 * GB, "kepler"),
    "k40x2": (4.29e12, 12 * GB, 288 * GB, "kepler"),
    "k40x4": (4.29e12, 12 * GB, 288 * GB, "kepler"),
    "k40x8": (4.29e12, 12 * GB, 288 * GB, "kepler"),
    "dgx1-p100": (10.6e12, 16 * GB, 732 * GB, "pascal"),
    "baechi-rtx2080x4": (10.07e12, 8 * GB, 448 * GB, "turing"),
    "p100x4": (9.3e12, 16 * GB, 732 * GB, "pascal"),
    "v100x8": (15.7e12, 16 * GB, 900 * GB, "volta"),
    "h100x8": (67e12, 80 * GB, 3350 * GB, "hopper"),
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_gpu_figures_match_the_datasheets(name):
    peak, memory, bandwidth, architecture = DATASHEET[name]
    cluster = PRESETS[name]()
    gpus = np.array(cluster.device_kinds) == "gpu"
    np.testing.assert_allclose(cluster.peak_flops[gpus], peak)
    np.testing.assert_allclose(cluster.memory_capacity[gpus], memory)
    # Memory-bound ops reach the architecture's calibrated share of the datasheet bandwidth.
    fraction = ARCHITECTURES[architecture].bandwidth_fraction
    assert 0.5 <= fraction <= 1
    np.testing.assert_allclose(cluster.memory_bandwidth[gpus], bandwidth * fraction)


@pytest.mark.parametrize("name", sorted(N_GPUS))
def test_preset_efficiencies_are_their_architectures(name):
    # GPUs: the defaults of their kind with their architecture's calibrated figures on top; CPUs (x86,
    # not calibrated): the defaults of their kind.
    gpu_architecture = DATASHEET[name][3] if name in DATASHEET else {"cpu-igpu": "xe-lp"}[name]
    cluster = PRESETS[name]()
    for i, kind in enumerate(cluster.device_kinds):
        architecture = gpu_architecture if kind == "gpu" else "x86"
        table = {**DEFAULT_EFFICIENCY[kind], **ARCHITECTURES[architecture].efficiency}
        expected = [table[category] for category in CATEGORIES]
        np.testing.assert_array_equal(cluster.efficiency[i], expected, err_msg=cluster.device_names[i])
        np.testing.assert_array_equal(cluster.efficiency[i], default_efficiency_row(kind, architecture))
    np.testing.assert_array_equal(cluster.efficiency[0], default_efficiency_row("cpu"))


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
    # Both read the same DRAM (89.6 GB/s); the CPU reaches all of it (x86's bandwidth fraction is 1),
    # the iGPU its architecture's share. A copy between them reads and writes it: half its bandwidth.
    assert cluster.memory_bandwidth[0] == pytest.approx(89.6 * GB)
    assert cluster.memory_bandwidth[1] == pytest.approx(89.6 * GB * ARCHITECTURES["xe-lp"].bandwidth_fraction)
    assert cluster.link_bandwidth[0, 1] == pytest.approx(89.6 * GB / 2)
    # Both copy directions share the one DRAM.
    assert cluster.link_route(0, 1) == cluster.link_route(1, 0) == ("dram",)
    # Low latency: below any PCIe preset's.
    assert cluster.link_latency[0, 1] < PRESETS["k80x2"]().link_latency[0, 1]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_state_their_executor_costs(name):
    cluster = PRESETS[name]()
    gpus = np.array(cluster.device_kinds) == "gpu"
    if name in MULTI_NODE:  # one host per node (tests/cluster/test_multinode.py)
        assert cluster.host_names == tuple(f"node:{k}" for k in range(MULTI_NODE[name][0]))
    elif name in N_GPUS:
        assert cluster.host_names == ("host:0",)
        np.testing.assert_array_equal(cluster.device_host, 0)
    assert min(cluster.host_dispatch_threads) >= 1
    assert np.all(cluster.dispatch_time >= 0) and np.all(cluster.transfer_sync >= 0)
    # CPUs pay no per-copy synchronisation: their copies are the GPU's DMA.
    np.testing.assert_array_equal(cluster.transfer_sync[~gpus], 0.0)
    if name == "cpu-igpu":  # no framework executor modelled (OpenVINO): no such cost
        np.testing.assert_array_equal(cluster.dispatch_time, 0.0)
        np.testing.assert_array_equal(cluster.transfer_sync, 0.0)
    else:
        # Microseconds of a host thread per op launch, tens of microseconds per copy on a GPU.
        assert np.all((cluster.dispatch_time >= 1e-6) & (cluster.dispatch_time <= 1e-4))
        assert np.all((cluster.transfer_sync[gpus] >= 1e-6) & (cluster.transfer_sync[gpus] <= 1e-4))


def test_pytorch_preset_has_one_dispatch_thread_and_tensorflow_presets_one_per_core():
    assert PRESETS["baechi-rtx2080x4"]().host_dispatch_threads == (1,)
    assert PRESETS["k80x4"]().host_dispatch_threads == (8,)  # Broadwell 8-core
    assert PRESETS["k40x8"]().host_dispatch_threads == (18,)  # Haswell 18-core


def test_k80_boards_share_their_uplink():
    cluster = PRESETS["k80x4"]()
    gpu = [cluster.device_index(f"gpu:{k}") for k in range(4)]
    cpu = cluster.device_index("cpu:0")
    # gpu:0 and gpu:1 are the two dies of board 0: a copy between them stays behind its switch.
    within = cluster.link_route(gpu[0], gpu[1])
    assert within == ("gpu:0 out", "gpu:1 in")
    # gpu:2 is on board 1: the copy leaves board 0 and enters board 1.
    across = cluster.link_route(gpu[0], gpu[2])
    assert "board 0 up" in across and "board 1 down" in across
    assert set(across) >= {"gpu:0 out", "gpu:2 in"}
    assert not any(segment.startswith("board") for segment in within)
    # gpu:1 -> gpu:3 contends with gpu:0 -> gpu:2 on both boards' links; the host's copies to a
    # board enter it over its downlink only.
    assert {"board 0 up", "board 1 down"} <= set(cluster.link_route(gpu[1], gpu[3]))
    assert cluster.link_route(cpu, gpu[2]) == ("gpu:2 in", "board 1 down")
    assert cluster.link_route(gpu[3], cpu) == ("gpu:3 out", "board 1 up")


def test_presets_without_a_switch_route_over_the_gpu_ports_only():
    for name in ("k40x4", "p100x4", "v100x8", "h100x8"):
        cluster = PRESETS[name]()
        assert cluster.link_route(1, 2) == ("gpu:0 out", "gpu:1 in"), name
        assert cluster.link_route(0, 1) == ("gpu:0 in",), name
        assert all(segment.endswith((" in", " out")) for segment in cluster.segment_names), name


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
    for field in dataclasses.fields(Cluster):
        mine, theirs = getattr(a, field.name), getattr(b, field.name)
        if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray):
            np.testing.assert_array_equal(mine, theirs, err_msg=field.name)
        else:
            assert mine == theirs, field.name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_json_round_trip_of_every_preset(name, tmp_path):
    cluster = PRESETS[name]()
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster_to_dict(cluster)))
    _assert_same_cluster(load_cluster(path), cluster)
    _assert_same_cluster(cluster_from_dict(cluster_to_dict(cluster), "x"), cluster)
    # Same digest: a JSON file with a preset's figures is that preset (task ids rely on it).
    assert load_cluster(path).content_sha256 == cluster.content_sha256
    assert cluster_from_dict(cluster_to_dict(cluster), "x").content_sha256 == cluster.content_sha256


def test_json_writes_the_executor_costs_and_segments():
    cluster = PRESETS["k80x4"]()
    data = cluster_to_dict(cluster)
    gpu = data["devices"][1]
    assert gpu["dispatch_time"] == cluster.dispatch_time[1] > 0
    assert gpu["transfer_sync"] == cluster.transfer_sync[1] > 0
    assert gpu["host"] == "host:0"
    assert data["hosts"] == {"host:0": {"dispatch_threads": 8}}
    link = next(row for row in data["links"] if (row["src"], row["dst"]) == ("gpu:0", "gpu:2"))
    assert link["segments"] == list(cluster.link_route(1, 3))
    # No segments key where a link has none.
    assert all("segments" not in row for row in cluster_to_dict(_no_segments_cluster())["links"])


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


def _no_segments_cluster() -> Cluster:
    return cluster_from_dict(_small(), "small")


def test_small_dict_builds_the_hand_written_figures():
    cluster = cluster_from_dict(_small(), "ignored")
    assert cluster.name == "small"
    np.testing.assert_array_equal(cluster.link_bandwidth, [[0, 1e10], [8e9, 0]])
    np.testing.assert_array_equal(cluster.link_latency, [[0, 2e-5], [3e-5, 0]])
    gpu = dict(zip(CATEGORIES, cluster.efficiency[1], strict=True))
    assert gpu["conv"] == 0.9 and gpu["matmul"] == DEFAULT_EFFICIENCY["gpu"]["matmul"]


def test_sources_change_no_figure():
    data = _small()
    data["sources"] = {"gpu:0": "a datasheet", "links": "measured with a copy of 64 MB"}
    plain, noted = cluster_from_dict(_small(), "small"), cluster_from_dict(data, "small")
    assert noted.content_sha256 == plain.content_sha256 and noted.description == plain.description


def test_architecture_gives_the_calibrated_efficiencies_under_the_file_s_own():
    data = _small()
    gpu = data["devices"][1]  # gives conv 0.9 itself
    gpu["architecture"] = "kepler"
    cluster = cluster_from_dict(data, "small")
    row = dict(zip(CATEGORIES, cluster.efficiency[1].tolist(), strict=True))
    # Kepler's calibrated matmul (0.28) replaces the GPU default (0.7); the file's conv wins over
    # Kepler's (0.32); what neither gives is the GPU default.
    assert ARCHITECTURES["kepler"].efficiency["matmul"] == 0.28
    assert row["matmul"] == 0.28 and row["conv"] == 0.9
    assert row["elementwise"] == DEFAULT_EFFICIENCY["gpu"]["elementwise"] == 0.5
    # memory_bandwidth is the file's, whatever the architecture's bandwidth_fraction.
    assert cluster.memory_bandwidth[1] == gpu["memory_bandwidth"]
    # No tensor peak: half precision runs at the FP32 efficiency (no tensor figures are kept).
    assert cluster.tensor_peak_flops is None and cluster.tensor_efficiency is None


def test_architecture_gives_the_tensor_efficiency_of_a_device_with_a_tensor_peak():
    data = _small()
    gpu = data["devices"][1]
    gpu["tensor_peak_flops"] = 1e14
    bare = cluster_from_dict(data, "small")  # no architecture: the FP32 efficiency of each category
    np.testing.assert_array_equal(bare.tensor_rate[1], [1e14 * 0.7, 1e14 * 0.9])
    gpu["architecture"] = "hopper"  # matmul 0.65, conv 0.7 of the tensor peak (docs/calibration.md)
    hopper = cluster_from_dict(data, "small")
    np.testing.assert_array_equal(hopper.tensor_rate[1], [1e14 * 0.65, 1e14 * 0.7])
    gpu["architecture"] = "turing"  # not calibrated in half precision: the tensor defaults
    turing = cluster_from_dict(data, "small")
    np.testing.assert_array_equal(turing.tensor_rate[1], [1e14 * DEFAULT_TENSOR_EFFICIENCY["matmul"],
                                                          1e14 * DEFAULT_TENSOR_EFFICIENCY["conv"]])
    gpu["tensor_efficiency"] = {"conv": 0.5}  # the file's own wins
    np.testing.assert_array_equal(cluster_from_dict(data, "small").tensor_rate[1], [1e14 * 0.7, 1e14 * 0.5])
    # The CPU, without a tensor peak, runs half precision at its FP32 peak and efficiency.
    np.testing.assert_array_equal(hopper.tensor_rate[0], [1e12 * 0.5, 1e12 * 0.4])


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


def test_a_dict_without_executor_fields_has_no_executor_costs():
    cluster = cluster_from_dict(_small(), "small")
    np.testing.assert_array_equal(cluster.dispatch_time, 0.0)
    np.testing.assert_array_equal(cluster.transfer_sync, 0.0)
    np.testing.assert_array_equal(cluster.device_host, 0)
    assert cluster.host_names == ("host:0",) and cluster.host_dispatch_threads == (1,)
    assert cluster.segment_names == () and cluster.link_segments.shape == (2, 2, 0)
    assert cluster.link_route(0, 1) == ()
    # The same digest as a Cluster built without them: their defaults are "no such cost".
    plain = Cluster(
        name="small",
        device_names=cluster.device_names,
        device_kinds=cluster.device_kinds,
        peak_flops=cluster.peak_flops,
        memory_bandwidth=cluster.memory_bandwidth,
        memory_capacity=cluster.memory_capacity,
        launch_overhead=cluster.launch_overhead,
        efficiency=cluster.efficiency,
        link_bandwidth=cluster.link_bandwidth,
        link_latency=cluster.link_latency,
    )
    assert cluster.content_sha256 == plain.content_sha256


def _three_devices() -> dict:
    """_small plus a second GPU on its own host; links by default_link."""
    data = _small()
    gpu = dict(data["devices"][1], name="gpu:1", host="box b", dispatch_time=2e-5, transfer_sync=1e-5)
    data["devices"].append(gpu)
    data["default_link"] = {"bandwidth": 1e9, "latency": 1e-5}
    return data


def test_executor_fields_and_hosts_are_read():
    data = _three_devices()
    data["devices"][0]["dispatch_time"] = 5e-6
    data["devices"][1]["host"] = "box a"
    data["hosts"] = {"box b": {"dispatch_threads": 4}}
    cluster = cluster_from_dict(data, "three")
    np.testing.assert_array_equal(cluster.dispatch_time, [5e-6, 0.0, 2e-5])
    np.testing.assert_array_equal(cluster.transfer_sync, [0.0, 0.0, 1e-5])
    # Hosts in the order devices first name them; one thread unless hosts says otherwise.
    assert cluster.host_names == ("host:0", "box a", "box b")
    np.testing.assert_array_equal(cluster.device_host, [0, 1, 2])
    assert cluster.host_dispatch_threads == (1, 1, 4)


def test_segments_are_declared_by_use_and_both_ways_copies_them():
    data = _three_devices()
    data["links"] = [
        {"src": "gpu:0", "dst": "gpu:1", "bandwidth": 5e9, "latency": 1e-5, "segments": ["sw up", "sw down"]},
        {"src": "cpu:0", "dst": "gpu:1", "bandwidth": 5e9, "latency": 1e-5, "segments": ["sw down"]},
        {
            "src": "cpu:0",
            "dst": "gpu:0",
            "bandwidth": 5e9,
            "latency": 1e-5,
            "both_ways": True,
            "segments": ["x"],
        },
    ]
    cluster = cluster_from_dict(data, "three")
    assert cluster.segment_names == ("sw up", "sw down", "x")
    assert cluster.link_segments.shape == (3, 3, 2)
    assert cluster.link_route(1, 2) == ("sw up", "sw down")
    assert cluster.link_route(0, 2) == ("sw down",)
    assert cluster.link_route(0, 1) == cluster.link_route(1, 0) == ("x",)
    # Pairs default_link fills occupy no segment.
    assert cluster.link_route(2, 1) == cluster.link_route(2, 0) == ()
    again = cluster_from_dict(cluster_to_dict(cluster), "three")
    assert again.content_sha256 == cluster.content_sha256


def test_json_keeps_the_routes_of_a_cluster_numbered_otherwise():
    # Segments numbered against first use (as no JSON can number them): every link's route survives,
    # only the numbering is the JSON's.
    preset = PRESETS["k80x2"]()
    order = np.arange(len(preset.segment_names))[::-1]
    renumbered = dataclasses.replace(
        preset,
        segment_names=tuple(preset.segment_names[k] for k in order),
        link_segments=np.where(preset.link_segments >= 0, order[preset.link_segments], -1),
    )
    again = cluster_from_dict(cluster_to_dict(renumbered), "x")
    assert len(cluster_to_dict(renumbered)["links"]) == 6
    for i in range(3):
        for j in range(3):
            assert again.link_route(i, j) == renumbered.link_route(i, j) == preset.link_route(i, j)


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
        ["gpu:0", "efficiency['matmul']", "from 0.0001 to 1"],
    ),
    (
        "efficiency zero",
        _set(["devices", 1, "efficiency"], {"matmul": 0}),
        ["gpu:0", "matmul", "from 0.0001 to 1"],
    ),
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
    (
        "negative dispatch_time",
        _set(["devices", 1, "dispatch_time"], -1e-6),
        ["gpu:0", "dispatch_time", "finite number >= 0", "-1e-06"],
    ),
    (
        "string transfer_sync",
        _set(["devices", 0, "transfer_sync"], "5us"),
        ["cpu:0", "transfer_sync", "finite number >= 0", "'5us'"],
    ),
    (
        "nan transfer_sync",
        _set(["devices", 1, "transfer_sync"], math.nan),
        ["gpu:0", "transfer_sync", "not finite"],
    ),
    ("bool dispatch_time", _set(["devices", 1, "dispatch_time"], True), ["gpu:0", "dispatch_time", ">= 0"]),
    ("empty host", _set(["devices", 1, "host"], ""), ["gpu:0", "host", "non-empty string"]),
    ("host not a string", _set(["devices", 0, "host"], 1), ["cpu:0", "host", "non-empty string"]),
    ("hosts not an object", _set(["hosts"], ["host:0"]), ["hosts", "object", "dispatch_threads"]),
    (
        "zero threads",
        _set(["hosts"], {"host:0": {"dispatch_threads": 0}}),
        ["host 'host:0'", "dispatch_threads", "integer >= 1", "got 0"],
    ),
    (
        "fractional threads",
        _set(["hosts"], {"host:0": {"dispatch_threads": 2.5}}),
        ["host 'host:0'", "dispatch_threads", "integer >= 1", "2.5"],
    ),
    (
        "bool threads",
        _set(["hosts"], {"host:0": {"dispatch_threads": True}}),
        ["host 'host:0'", "dispatch_threads", "integer >= 1", "True"],
    ),
    (
        "unknown host in hosts",
        _set(["hosts"], {"host:0": {"dispatch_threads": 2}, "host:9": {"dispatch_threads": 2}}),
        ["host 'host:9'", "no device names it", "host:0"],
    ),
    (
        "unknown host field",
        _set(["hosts"], {"host:0": {"threads": 2}}),
        ["host 'host:0'", "unknown field", "threads", "dispatch_threads"],
    ),
    (
        "missing dispatch_threads",
        _set(["hosts"], {"host:0": {}}),
        ["host 'host:0'", "missing field", "dispatch_threads"],
    ),
    (
        "segments not a list",
        _set(["links", 0, "segments"], "pcie"),
        ["cpu:0 -> gpu:0", "segments", "list of segment names", "'pcie'"],
    ),
    (
        "empty segment name",
        _set(["links", 1, "segments"], ["up", ""]),
        ["gpu:0 -> cpu:0", "segments[1]", "non-empty string"],
    ),
    (
        "segment not a string",
        _set(["links", 0, "segments"], [3]),
        ["cpu:0 -> gpu:0", "segments[0]", "non-empty string", "3"],
    ),
    (
        "segment listed twice",
        _set(["links", 0, "segments"], ["up", "down", "up"]),
        ["cpu:0 -> gpu:0", "segment 'up'", "listed twice"],
    ),
    (
        "unknown architecture",
        _set(["devices", 1, "architecture"], "fermi"),
        ["gpu:0", "architecture", "kepler", "hopper", "'fermi'"],
    ),
    ("architecture not a string", _set(["devices", 1, "architecture"], 7), ["gpu:0", "architecture", "7"]),
    ("sources not an object", _set(["sources"], ["datasheet"]), ["sources", "object", "datasheet"]),
    ("empty source note", _set(["sources"], {"gpu:0": ""}), ["sources['gpu:0']", "non-empty string"]),
    ("source note not text", _set(["sources"], {"gpu:0": 4.37e12}), ["sources['gpu:0']", "4370000000000.0"]),
    (
        "control character in a source",
        _set(["sources"], {"gpu:0": "datasheet\x1b[31m"}),
        ["sources['gpu:0']", "printable text"],
    ),
    (
        "default_link segments",
        _set(["default_link"], {"bandwidth": 1e9, "latency": 1e-5, "segments": ["up"]}),
        ["default_link", "cannot have segments", "links"],
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
