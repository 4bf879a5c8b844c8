"""`repr` of `Task`, `OpGraph` and `Cluster`: one short line naming the object, not its arrays."""

from __future__ import annotations

from placement_gym.cluster.presets import K80_DIE, build_cluster
from placement_gym.task.named import get_task

SHORT = 200


def test_task_repr_names_the_task_and_its_sizes():
    task = get_task("inception_v3", "k80x4")
    text = repr(task)
    assert len(text) < SHORT
    assert text == (
        f"Task('inception_v3/k80x4/train', {task.n_ops} ops ({task.n_forward} forward), "
        "5 devices, optimizer='adam')"
    )


def test_inference_task_repr_has_no_optimizer():
    text = repr(get_task("inception_v3", "k80x4", "inference"))
    assert text.startswith("Task('inception_v3/k80x4/inference', ")
    assert "optimizer" not in text and "forward" not in text


def test_graph_repr_names_the_graph():
    graph = get_task("bert_large", "h100x8").graph
    text = repr(graph)
    assert len(text) < SHORT
    assert text.startswith("OpGraph('bert_large', ") and f"ops={graph.n_ops}" in text


def test_cluster_repr_shortens_numbered_devices_to_ranges():
    cluster = get_task("inception_v3", "k80x4").cluster
    assert repr(cluster) == "Cluster('k80x4', 5 devices: cpu:0, gpu:0..3)"


def test_cluster_repr_stays_short_with_many_irregular_devices():
    names = [f"gpu:{i}" for i in range(0, 400, 2)] + ["accelerator"]
    cluster = build_cluster("big", [(name, K80_DIE) for name in names], lambda i, j: (1e9, 1e-6), "")
    text = repr(cluster)
    assert len(text) < SHORT
    assert text.startswith("Cluster('big', 201 devices: gpu:0, gpu:2, ")
    assert text.endswith("(193 more))")
