"""Mixed precision (bf16/fp16): tensor-core op times, 2-byte tensors, 16 bytes per parameter with Adam,
hand-computed; the reference simulator's agreement; fp32 unchanged; ids, get_task, EnvConfig, the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import (
    OBJECTIVES,
    assert_simulators_agree,
    hand_cluster,
    hand_graph,
    random_cluster,
    random_task_sizes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_gym.cli import main
from placement_gym.cluster import PRESETS, ClusterError, cluster_from_dict, cluster_to_dict
from placement_gym.cluster.cluster import TENSOR_CATEGORIES
from placement_gym.cluster.presets import tensor_efficiency_row
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.envs.config import EnvConfig
from placement_gym.graph.opgraph import CATEGORIES
from placement_gym.graph.synthetic import random_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.ids import split_task_id, task_identity
from placement_gym.task.named import get_task, parse_task_id
from placement_gym.task.step import Step

GB = 1e9
H100_TENSOR_PEAK = 989e12  # NVIDIA H100 SXM datasheet: dense bf16/fp16 tensor-core FLOP/s
H100_FP32_PEAK = 67e12


def tensor_cluster(n_devices=2, tensor_flops=8e12, tensor_efficiency=0.5):
    """`hand_cluster` (1e12 FLOP/s FP32 at efficiency 1) with tensor cores of ``tensor_flops`` reaching
    ``tensor_efficiency`` on matmul and conv."""
    return dataclasses.replace(
        hand_cluster(n_devices),
        tensor_peak_flops=np.full(n_devices, tensor_flops),
        tensor_efficiency=np.full((n_devices, len(TENSOR_CATEGORIES)), tensor_efficiency),
    )


# One matmul of 1e12 FLOPs reading a 4 MB (fp32) weight of 1e6 elements, writing 8 MB (fp32).
ONE_MATMUL = hand_graph([("mm", 1e12, 8e6, 4e6)], [])


def test_a_matmul_runs_at_the_tensor_rate_in_half_precision_by_hand():
    cluster = tensor_cluster(1)
    fp32 = make_task(ONE_MATMUL, cluster, "inference")
    bf16 = make_task(ONE_MATMUL, cluster, "inference", precision="bf16")
    overhead = 1e-6
    assert fp32.duration[0, 0] == pytest.approx(1e12 / 1e12 + overhead, rel=1e-12)
    assert bf16.duration[0, 0] == pytest.approx(1e12 / (8e12 * 0.5) + overhead, rel=1e-12)
    # inference in bf16 keeps the bf16 weights alone: 2 bytes per parameter element
    assert bf16.static_bytes[0] == 1e6 * 2
    assert fp32.static_bytes[0] == 1e6 * 4
    assert bf16.tensor_bytes[bf16.tensor_producer == 0].tolist() == [8e6 / 2]


def test_one_matmul_on_one_h100_trains_as_by_hand():
    # h100x8, gpu:0: forward FLOPs / (989 TFLOP/s x Hopper's matmul tensor efficiency), backward twice
    # that; the Adam update (12 FLOPs and 28 bytes per parameter element) stays on the FP32 path.
    cluster = PRESETS["h100x8"]()
    gpu = cluster.device_index("gpu:0")
    task = make_task(ONE_MATMUL, cluster, "train+bf16")
    efficiency = tensor_efficiency_row("hopper")[TENSOR_CATEGORIES.index("matmul")]
    overhead = 5.7e-6  # per-op launch overhead of the preset (Addanki's / Park's simulators)
    forward, backward, update = task.duration[:, gpu]
    assert forward == pytest.approx(1e12 / (H100_TENSOR_PEAK * efficiency) + overhead, rel=1e-12)
    assert backward == pytest.approx(2e12 / (H100_TENSOR_PEAK * efficiency) + overhead, rel=1e-12)
    elements = 1e6
    elementwise = cluster.efficiency[gpu, CATEGORIES.index("elementwise")]
    update_compute = 12 * elements / (H100_FP32_PEAK * elementwise)
    update_memory = 28 * elements / cluster.memory_bandwidth[gpu]
    assert update == pytest.approx(max(update_compute, update_memory) + overhead, rel=1e-12)
    # Mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 grads) + 4 (fp32 master) + 8 (moments) bytes
    assert task.static_memory(np.array([gpu]))[gpu] == 16 * elements
    # the whole step on gpu:0: one dispatch (launches run ahead) and the three ops back to back
    result = simulate(task, np.array([gpu]))
    expected = cluster.dispatch_time[gpu] + forward + backward + update
    assert result.runtime == pytest.approx(expected, rel=1e-12)
    assert result.runtime == reference_simulate(task, np.array([gpu])).runtime


@pytest.mark.parametrize("optimizer, state_bytes", [("adam", 8), ("momentum", 4), ("sgd", 0)])
def test_static_memory_per_parameter_in_mixed_precision(optimizer, state_bytes):
    task = make_task(ONE_MATMUL, tensor_cluster(1), Step(optimizer=optimizer, precision="fp16"))
    assert task.static_bytes[0] == 1e6 * (2 + 2 + 4 + state_bytes)


def test_half_precision_halves_the_bytes_of_tensors_and_transfers():
    # a on gpu:0 sends 1 GB (fp32) to b on gpu:1: 0.5 GB in bf16 over the 1 GB/s link (+ 100 us).
    graph = hand_graph([("a", 1e9, 1e9, 0), ("b", 1e9, 1e3, 0)], [("a", "b")])
    cluster = tensor_cluster(2, tensor_flops=4e12, tensor_efficiency=0.25)  # tensor rate = FP32 rate
    fp32 = simulate(make_task(graph, cluster, "inference"), [0, 1])
    bf16 = simulate(make_task(graph, cluster, "inference", precision="bf16"), [0, 1])
    op = 1e9 / 1e12 + 1e-6
    assert fp32.runtime == pytest.approx(op + 1e-4 + 1e9 / 1e9 + op, rel=1e-12)
    assert bf16.runtime == pytest.approx(op + 1e-4 + 0.5e9 / 1e9 + op, rel=1e-12)
    # the received copy counts on gpu:1 at 2 bytes per element
    assert bf16.peak_memory[1] == pytest.approx(fp32.peak_memory[1] / 2)


def test_memory_bound_ops_keep_the_fp32_rate_and_move_half_the_bytes():
    graph = dataclasses.replace(
        ONE_MATMUL, category=np.array([CATEGORIES.index("elementwise")]), bytes_accessed=np.array([1e12])
    )
    cluster = dataclasses.replace(tensor_cluster(1), memory_bandwidth=np.array([1e12]))
    fp32 = make_task(graph, cluster, "inference")
    bf16 = make_task(graph, cluster, "inference", precision="bf16")
    assert fp32.duration[0, 0] == pytest.approx(max(1.0, 1.0) + 1e-6, rel=1e-12)
    # FLOPs at the FP32 rate (1 s), bytes halved (0.5 s): the FP32 rate decides
    assert bf16.duration[0, 0] == pytest.approx(1.0 + 1e-6, rel=1e-12)


def test_a_device_without_tensor_cores_runs_half_precision_at_its_fp32_rate():
    cluster = hand_cluster(1)
    assert cluster.tensor_peak_flops is None and cluster.tensor_efficiency is None
    fp32 = make_task(ONE_MATMUL, cluster, "train_step")
    bf16 = make_task(ONE_MATMUL, cluster, "train_step", precision="bf16")
    np.testing.assert_array_equal(bf16.duration[:2], fp32.duration[:2])  # no bytes: compute decides


def test_fp32_tasks_do_not_read_the_half_precision_figures():
    graph = random_graph(40, seed=3)
    plain = random_cluster(3, np.random.default_rng(3))
    with_tensor = dataclasses.replace(plain, tensor_peak_flops=plain.peak_flops * 8)
    for objective in ("inference", "train_step"):
        a, b = make_task(graph, plain, objective), make_task(graph, with_tensor, objective)
        np.testing.assert_array_equal(a.duration, b.duration)
        np.testing.assert_array_equal(a.static_bytes, b.static_bytes)
        np.testing.assert_array_equal(a.tensor_bytes, b.tensor_bytes)


def _random_tensor_cluster(n: int, seed: int, executor_costs: bool):
    rng = np.random.default_rng(seed)
    cluster = random_cluster(n, rng, executor_costs)
    return dataclasses.replace(
        cluster,
        tensor_peak_flops=cluster.peak_flops * rng.uniform(1, 16, n),
        tensor_efficiency=rng.uniform(0.2, 1.0, (n, len(TENSOR_CATEGORIES))),
    )


@settings(max_examples=40, deadline=None)
@given(**random_task_sizes((1, 40), (1, 4)),
       objective=OBJECTIVES,
       precision=st.sampled_from(["bf16", "fp16"]),
       executor_costs=st.booleans())
def test_fast_simulator_equals_the_reference_in_half_precision(
    n_ops, n_devices, seed, objective, precision, executor_costs
):
    graph = random_graph(n_ops, seed=seed)
    task = make_task(graph, _random_tensor_cluster(n_devices, seed, executor_costs), objective,
                     precision=precision)
    rng = np.random.default_rng(seed)
    assert_simulators_agree(task, (rng.integers(0, n_devices, n_ops), np.zeros(n_ops, dtype=int)))


def test_bf16_is_faster_than_fp32_on_an_h100_and_the_same_on_a_k80():
    h100 = get_task("bert_base", "h100x8"), get_task("bert_base", "h100x8", precision="bf16")
    gpu = h100[0].cluster.device_index("gpu:0")
    single = [simulate(task, np.full(task.n_forward, gpu)).runtime for task in h100]
    assert single[1] < single[0] / 2
    # a K80 has no tensor cores: only the halved bytes speed it up, never beyond its FP32 compute
    k80 = get_task("bert_base", "k80x2"), get_task("bert_base", "k80x2", precision="bf16")
    k80_single = [simulate(task, np.full(task.n_forward, 1)).runtime for task in k80]
    assert k80_single[0] / 2 < k80_single[1] <= k80_single[0]


# --- ids, get_task, envs, CLI ----------------------------------------------------------------------------


def test_precision_is_in_the_task_id_after_the_optimizer():
    assert get_task("cifar10_cnn", "k80x2", precision="bf16").id == "cifar10_cnn/k80x2/train+bf16"
    sgd = get_task("cifar10_cnn", "k80x2", optimizer="sgd", precision="fp16")
    assert sgd.id == "cifar10_cnn/k80x2/train+sgd+fp16"
    inference = get_task("cifar10_cnn", "k80x2", "inference", precision="bf16")
    assert inference.id == "cifar10_cnn/k80x2/inference+bf16"
    assert get_task("cifar10_cnn", "k80x2").id == "cifar10_cnn/k80x2/train"  # the default is not written
    assert get_task("cifar10_cnn", "k80x2", precision="bf16") is not get_task("cifar10_cnn", "k80x2")
    for task_id in ("cifar10_cnn/k80x2/train+bf16", "cifar10_cnn/k80x2/train+sgd+fp16",
                    "cifar10_cnn/k80x2/inference+bf16"):
        assert parse_task_id(task_id).id == task_id
    assert split_task_id("a/b/train+momentum+bf16") == ("a", "b", Step("train_step", "momentum", "bf16"))


@pytest.mark.parametrize("task_id", [
    "a/b/train+bf16+sgd",  # the precision before the optimizer
    "a/b/train+bf16+fp16",  # two precisions
    "a/b/train+bf16+bf16",
    "a/b/train+fp32",  # defaults written out
    "a/b/train+adam+bf16",
    "a/b/train+sgd+momentum",  # two optimizers
    "a/b/train+mb4+bf16",  # micro-batches before the precision
])
def test_a_task_id_with_a_wrong_objective_is_refused_in_one_line(task_id):
    form = (r"then optionally \+<optimizer> .*"
            r"then optionally \+<precision> \(bf16 or fp16; fp32 is the default\)")
    with pytest.raises(ValueError, match=form) as error:
        split_task_id(task_id)
    assert "\n" not in str(error.value)


def test_unknown_precision_is_refused_everywhere():
    with pytest.raises(ValueError, match="unknown precision 'fp8'; allowed: fp32, bf16, fp16"):
        make_task(ONE_MATMUL, hand_cluster(1), precision="fp8")
    with pytest.raises(ValueError, match="unknown precision 'int8'"):
        EnvConfig(precision="int8")


def test_task_identity_records_the_precision_and_old_records_mean_fp32():
    from placement_gym.task.ids import identity_mismatch

    task = get_task("cifar10_cnn", "k80x2", precision="bf16")
    identity = task_identity(task)
    assert identity["precision"] == "bf16"
    assert identity_mismatch(identity, task) is None
    plain = get_task("cifar10_cnn", "k80x2")
    old = {key: value for key, value in task_identity(plain).items() if key != "precision"}
    assert identity_mismatch(old, plain) is None  # written before precision was recorded
    assert "precision" in identity_mismatch(identity, get_task("cifar10_cnn", "k80x2", precision="fp16"))


def test_an_env_places_the_task_of_its_precision():
    import gymnasium as gym

    env = gym.make("placement_gym:DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2", precision="bf16")
    assert env.unwrapped.task.id == "cifar10_cnn/k80x2/train+bf16"
    task = get_task("cifar10_cnn", "k80x2", precision="fp16")
    with pytest.raises(ValueError, match="precision='bf16' is not the task's"):
        gym.make("placement_gym:DevicePlacement-v0", graph=task, precision="bf16")


def test_cli_evaluate_takes_precision(capsys):
    assert main(["evaluate", "--graph", "cifar10_cnn", "--cluster", "h100x8", "--agent", "best-single",
                 "--precision", "bf16", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    text = json.dumps(report)
    assert "cifar10_cnn/h100x8/train+bf16" in text


# --- cluster figures ---------------------------------------------------------------------------------------


def test_half_precision_figures_change_the_hash_only_when_given():
    plain = hand_cluster(2)
    same = dataclasses.replace(plain, tensor_peak_flops=plain.peak_flops.copy(),
                               tensor_efficiency=np.ones((2, len(TENSOR_CATEGORIES))))
    assert same.tensor_peak_flops is None and same.tensor_efficiency is None  # the defaults, spelled out
    assert same.content_sha256 == plain.content_sha256
    faster = tensor_cluster(2)
    assert faster.content_sha256 != plain.content_sha256
    back = cluster_from_dict(cluster_to_dict(faster), "x")
    np.testing.assert_array_equal(back.tensor_rate, faster.tensor_rate)
    again = cluster_from_dict(cluster_to_dict(back), "x")  # hand_cluster's unused diagonal is not written
    assert again.content_sha256 == back.content_sha256
    assert "tensor_peak_flops" not in cluster_to_dict(plain)["devices"][0]


@pytest.mark.parametrize("field, value, message", [
    ("tensor_peak_flops", "fast",
     r"tensor_peak_flops must be a positive finite number from 1e\+06 to 1e\+18 FLOP/s, got .fast."),
    ("tensor_peak_flops", -1.0, "tensor_peak_flops must be a positive finite number"),
    ("tensor_peak_flops", 1e300, "tensor_peak_flops must be"),
    ("tensor_peak_flops", True, "tensor_peak_flops must be"),
    ("tensor_efficiency", {"matmul": 1.5}, r"tensor_efficiency\['matmul'\] must be"),
    ("tensor_efficiency", {"softmax": 0.5}, "unknown tensor_efficiency category 'softmax'"),
    ("tensor_efficiency", [0.5, 0.5], "tensor_efficiency must be an object"),
])
def test_hostile_half_precision_figures_are_refused(field, value, message):
    data = cluster_to_dict(hand_cluster(2))
    data["devices"][1][field] = value
    with pytest.raises(ClusterError, match=message) as error:
        cluster_from_dict(data, "x")
    assert "\n" not in str(error.value)


def test_cluster_checks_the_half_precision_shapes_and_ranges():
    with pytest.raises(ValueError, match=r"tensor_peak_flops has shape \(3,\), expected \(2,\)"):
        dataclasses.replace(hand_cluster(2), tensor_peak_flops=np.ones(3) * 1e12)
    with pytest.raises(ValueError, match="tensor_efficiency of device 'gpu:1', category 'conv' must be"):
        dataclasses.replace(hand_cluster(2), tensor_efficiency=np.array([[0.5, 0.5], [0.5, 0.0]]))


def test_profiles_refuse_a_half_precision_task():
    from placement_gym.evaluation.evaluator import make_evaluator

    task = get_task("cifar10_cnn", "cpu2", precision="bf16")
    with pytest.raises(ValueError, match="evaluator 'profiled' runs and measures the graph in fp32"):
        make_evaluator(task, "profiled")


def test_suite_digests_read_the_half_precision_figures_only_for_half_precision_tasks():
    from placement_gym.leaderboard.suite import cluster_digest, structure_digest

    graph = get_task("cifar10_cnn", "h100x8").graph
    cluster = PRESETS["h100x8"]()
    plain = dataclasses.replace(cluster, tensor_peak_flops=None, tensor_efficiency=None)
    fp32 = make_task(graph, cluster), make_task(graph, plain)
    assert cluster_digest(fp32[0]) == cluster_digest(fp32[1])  # suite v1's h100x8 tasks stand
    assert structure_digest(fp32[0]) == structure_digest(fp32[1])
    bf16 = make_task(graph, cluster, precision="bf16"), make_task(graph, plain, precision="bf16")
    assert cluster_digest(bf16[0]) != cluster_digest(bf16[1])
    assert structure_digest(bf16[0]) != structure_digest(fp32[0])
