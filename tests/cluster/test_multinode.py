"""Multi-node presets (DGX H100 x2/x4/x8, DGX A100, an A100 + H100 pair): shape, datasheet figures,
rail-aligned InfiniBand as shared NIC segments, hand-computed transfers between and inside nodes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import hand_graph

from placement_gym.cluster import PRESETS, load_cluster
from placement_gym.cluster.presets import ARCHITECTURES
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.graph.opgraph import CATEGORIES
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task

GB = 1e9
# name -> (GPU generation of each node)
NODES = {
    "dgx-a100": ("a100",),
    "dgx-h100x2": ("h100",) * 2,
    "dgx-h100x4": ("h100",) * 4,
    "dgx-h100x8": ("h100",) * 8,
    "h100-a100": ("a100", "h100"),
}
# NVIDIA datasheets: FP32 peak, dense bf16 tensor peak, memory, memory bandwidth, architecture; the
# compute NIC (DGX H100: ConnectX-7 400 Gb/s; DGX A100: ConnectX-6 200 Gb/s HDR) in bytes/s.
GPUS = {
    "h100": (67e12, 989e12, 80 * GB, 3350 * GB, "hopper", 400e9 / 8),
    "a100": (19.5e12, 312e12, 80 * GB, 2039 * GB, "ampere", 200e9 / 8),
}

# NVLink through NVSwitch, one way per GPU: A100 600 GB/s total, H100 900 GB/s total (datasheets)
NVSWITCH = {"a100": 300 * GB, "h100": 450 * GB}


@pytest.mark.parametrize("name", sorted(NODES))
def test_each_node_is_a_cpu_and_eight_gpus_on_its_own_host(name):
    cluster = PRESETS[name]()
    nodes = NODES[name]
    assert cluster.n_devices == 9 * len(nodes)
    expected = []
    for k in range(len(nodes)):
        expected += [f"cpu:{k}"] + [f"gpu:{8 * k + j}" for j in range(8)]
    assert cluster.device_names == tuple(expected)
    assert cluster.device_kinds == (("cpu",) + ("gpu",) * 8) * len(nodes)
    assert cluster.host_names == tuple(f"node:{k}" for k in range(len(nodes)))
    np.testing.assert_array_equal(cluster.device_host, np.repeat(np.arange(len(nodes)), 9))
    assert load_cluster(name).content_sha256 == cluster.content_sha256
    assert get_task("cifar10_cnn", name).id == f"cifar10_cnn/{name}/train"


@pytest.mark.parametrize("name", sorted(NODES))
def test_gpus_carry_their_datasheet_figures(name):
    cluster = PRESETS[name]()
    for k, generation in enumerate(NODES[name]):
        peak, tensor, memory, bandwidth, architecture, _ = GPUS[generation]
        gpus = slice(9 * k + 1, 9 * k + 9)
        np.testing.assert_array_equal(cluster.peak_flops[gpus], peak)
        np.testing.assert_array_equal(cluster.tensor_peak_flops[gpus], tensor)
        np.testing.assert_array_equal(cluster.memory_capacity[gpus], memory)
        np.testing.assert_allclose(
            cluster.memory_bandwidth[gpus], bandwidth * ARCHITECTURES[architecture].bandwidth_fraction
        )
        # the host CPU has no tensor peak of its own: half precision runs at its FP32 rate
        cpu = 9 * k
        assert cluster.tensor_peak_flops[cpu] == cluster.peak_flops[cpu]
        matmul = CATEGORIES.index("matmul")
        assert cluster.tensor_rate[cpu, 0] == cluster.peak_flops[cpu] * cluster.efficiency[cpu, matmul]
    assert "InfiniBand" in cluster.description and "datasheet" in cluster.description


def test_presets_are_distinct_problems():
    hashes = {PRESETS[name]().content_sha256 for name in NODES}
    assert len(hashes) == len(NODES)


@pytest.mark.parametrize("name", ["dgx-h100x2", "h100-a100"])
def test_links_between_nodes_are_the_nics_and_slower_than_inside(name):
    cluster = PRESETS[name]()
    nic = min(GPUS[generation][5] for generation in NODES[name])
    gpu0, gpu1, gpu8, gpu9 = (cluster.device_index(f"gpu:{k}") for k in (0, 1, 8, 9))
    assert cluster.link_bandwidth[gpu0, gpu8] == nic
    assert cluster.link_bandwidth[gpu0, gpu1] > 5 * nic  # NVSwitch: 300 or 450 GB/s one way
    # rail-aligned: GPU j's copies leave and enter through NIC j of its node
    assert cluster.link_route(gpu0, gpu8) == ("node:0 nic:0 out", "node:1 nic:0 in")
    assert cluster.link_route(gpu1, gpu9) == ("node:0 nic:1 out", "node:1 nic:1 in")
    assert cluster.link_route(gpu0, gpu9) == ("node:0 nic:0 out", "node:1 nic:1 in")
    assert cluster.link_route(gpu0, gpu1) == ("gpu:0 out", "gpu:1 in")
    # a copy of 1 GB: within a node over NVSwitch (5 us), between nodes over InfiniBand (10 us)
    graph = hand_graph([("a", 1e9, 1e9, 0), ("b", 1e9, 1e3, 0)], [("a", "b")])
    task = make_task(graph, _bare(cluster), "inference")
    op = task.duration[0]  # a and b have the same FLOPs and move no bytes
    inside = simulate(task, [gpu0, gpu1]).runtime
    across = simulate(task, [gpu0, gpu8]).runtime
    nvswitch = NVSWITCH[NODES[name][0]]
    assert inside == pytest.approx(op[gpu0] + 5e-6 + 1e9 / nvswitch + op[gpu1], rel=1e-12)
    assert across == pytest.approx(op[gpu0] + 10e-6 + 1e9 / nic + op[gpu8], rel=1e-12)
    assert across - op[gpu8] > inside - op[gpu1]


def _bare(cluster):
    """``cluster`` without its executor costs, so that op and copy times add up by hand."""
    n = cluster.n_devices
    return dataclasses.replace(cluster, dispatch_time=np.zeros(n), transfer_sync=np.zeros(n))


def test_two_copies_through_one_nic_take_turns_by_hand():
    # a on gpu:0 sends its 1 GB output (fp32) to c on gpu:8 and d on gpu:9, both in node 1: both copies
    # leave through node 0's NIC 0, one after the other; without the NIC segments they overlap.
    cluster = _bare(PRESETS["dgx-h100x2"]())
    gpu0, gpu8, gpu9 = (cluster.device_index(f"gpu:{k}") for k in (0, 8, 9))
    graph = hand_graph([("a", 1e12, 1e9, 0), ("c", 1e12, 1e3, 0), ("d", 1e12, 1e3, 0)],
                       [("a", "c"), ("a", "d")])
    task = make_task(graph, cluster, "inference")
    # op time: 1e12 FLOPs at H100's FP32 peak x its matmul efficiency, + 5.7 us launch overhead
    # (hand_graph's ops move no bytes)
    op = 1e12 / (67e12 * cluster.efficiency[gpu0, CATEGORIES.index("matmul")]) + 5.7e-6
    copy = 10e-6 + 1e9 / (400e9 / 8)  # InfiniBand latency + 1 GB at 400 Gb/s
    shared = simulate(task, [gpu0, gpu8, gpu9])
    assert shared.runtime == pytest.approx(op + 2 * copy + op, rel=1e-12)
    assert shared.runtime == reference_simulate(task, [gpu0, gpu8, gpu9]).runtime
    private = _without_segments(cluster)
    task = make_task(graph, private, "inference")
    assert simulate(task, [gpu0, gpu8, gpu9]).runtime == pytest.approx(op + copy + op, rel=1e-12)
    # copies from gpu:0 to gpu:8 and from gpu:1 to gpu:9 use two rails: they overlap
    graph = hand_graph([("a", 1e12, 1e9, 0), ("b", 1e12, 1e9, 0), ("c", 1e12, 1e3, 0), ("d", 1e12, 1e3, 0)],
                       [("a", "c"), ("b", "d")])
    task = make_task(graph, cluster, "inference")
    gpu1 = cluster.device_index("gpu:1")
    assert simulate(task, [gpu0, gpu1, gpu8, gpu9]).runtime == pytest.approx(op + copy + op, rel=1e-12)


def _without_segments(cluster):
    n = cluster.n_devices
    return dataclasses.replace(cluster, segment_names=(), link_segments=np.full((n, n, 0), -1))


def test_an_h100_out_computes_an_a100_in_bf16():
    cluster = PRESETS["h100-a100"]()
    a100, h100 = cluster.device_index("gpu:0"), cluster.device_index("gpu:8")
    task = get_task("bert_base", "h100-a100", precision="bf16")
    times = [simulate(task, np.full(task.n_forward, device)).runtime for device in (a100, h100)]
    assert times[1] < times[0]
    # its largest matmul: 989 vs 312 TFLOP/s of tensor cores, each at its architecture's efficiency
    matmul = int(np.argmax(np.where(task.graph.category == CATEGORIES.index("matmul"), task.graph.flops, 0)))
    compute = task.duration[matmul] - cluster.launch_overhead
    assert compute[a100] / compute[h100] == pytest.approx(
        (989e12 * cluster.tensor_rate[h100, 0] / cluster.tensor_peak_flops[h100])
        / (312e12 * cluster.tensor_rate[a100, 0] / cluster.tensor_peak_flops[a100]), rel=1e-9)
