"""Task ids name one task each: a graph or cluster that is not bundled (not a preset) carries a hash of
its content, the optimizer shows, and resumed runs, caches and profiles refuse another task's files."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import numpy as np
import onnx
import pytest

from placement_gym.cli import main
from placement_gym.cluster import cluster_to_dict, load_cluster
from placement_gym.cluster.presets import PRESETS
from placement_gym.graph import bundled_graph_names, load_graph
from placement_gym.graph.bundled import BUNDLED_GRAPHS_DIR
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.ids import HASH_DIGITS
from placement_gym.task.named import get_task, parse_task_id

BUNDLED_ID = "bert_base/k80x4/train"


def changed_copy(name: str, path, old_type: str, new_type: str) -> None:
    """The bundled graph ``name`` with its first ``old_type`` op turned into ``new_type``, at ``path``."""
    model = onnx.load(BUNDLED_GRAPHS_DIR / f"{name}.onnx")
    node = next(node for node in model.graph.node if node.op_type == old_type)
    node.op_type = new_type
    onnx.save(model, path)


@pytest.fixture
def other_bert(tmp_path):
    """A file named bert_base.onnx that is not the bundled BERT-base: its pooler's Tanh is a Relu."""
    path = tmp_path / "bert_base.onnx"
    changed_copy("bert_base", path, "Tanh", "Relu")
    return path


# --- graphs -------------------------------------------------------------------------------------------


def test_a_different_file_named_like_a_bundled_graph_gets_another_id(other_bert):
    task = get_task(other_bert, "k80x4")
    assert task.graph.name == "bert_base"
    assert task.id != BUNDLED_ID
    content = task.graph.content_sha256
    assert task.id == f"bert_base@{content[:HASH_DIGITS]}/k80x4/train"
    assert get_task("bert_base", "k80x4").id == BUNDLED_ID


def test_a_byte_identical_copy_keeps_the_bundled_id(tmp_path):
    shutil.copyfile(BUNDLED_GRAPHS_DIR / "bert_base.onnx", tmp_path / "bert_base.onnx")
    assert get_task(tmp_path / "bert_base.onnx", "k80x4").id == BUNDLED_ID
    # The same content under another name is not the bundled graph by name: a stable hashed id, the
    # hash being the bundled graph's content.
    shutil.copyfile(BUNDLED_GRAPHS_DIR / "bert_base.onnx", tmp_path / "my_bert.onnx")
    bundled_content = load_graph("bert_base").content_sha256
    assert get_task(tmp_path / "my_bert.onnx", "k80x4").id == (
        f"my_bert@{bundled_content[:HASH_DIGITS]}/k80x4/train"
    )


def test_a_graph_changed_in_memory_is_not_the_bundled_one():
    """Same name and file sha256 (as a graph re-imported at another batch keeps), other content."""
    bundled = load_graph("cifar10_cnn")
    heavier = dataclasses.replace(bundled, flops=bundled.flops * 2)
    assert heavier.sha256 == bundled.sha256
    task = make_task(heavier, load_cluster("k80x2"))
    assert task.id.startswith("cifar10_cnn@") and task.id != "cifar10_cnn/k80x2/train"


def test_graphs_built_in_python_are_told_apart_by_their_arrays():
    graph = layered_graph(30, seed=0)
    cluster = load_cluster("k80x2")
    same = layered_graph(30, seed=0)
    bigger = dataclasses.replace(graph, tensor_bytes=graph.tensor_bytes * 2)
    assert make_task(graph, cluster).id == make_task(same, cluster).id
    assert make_task(graph, cluster).id != make_task(bigger, cluster).id
    assert make_task(graph, cluster).id.startswith(f"{graph.name}@")
    # A "/" in a name would make a fourth part: it becomes "_".
    slashed = dataclasses.replace(graph, name="team/model")
    assert make_task(slashed, cluster).id.split("/")[0].startswith("team_model@")


def test_bundled_graphs_on_presets_keep_their_plain_ids():
    for graph in bundled_graph_names():
        for objective, suffix in (("train_step", "train"), ("inference", "inference")):
            assert get_task(graph, "k80x4", objective).id == f"{graph}/k80x4/{suffix}"
    for cluster in PRESETS:
        assert get_task("cifar10_cnn", cluster).id == f"cifar10_cnn/{cluster}/train"


def test_a_rewritten_file_is_read_anew(tmp_path):
    """get_task caches tasks built from files; a file written anew is another graph."""
    path = tmp_path / "model.onnx"
    shutil.copyfile(BUNDLED_GRAPHS_DIR / "cifar10_cnn.onnx", path)
    first = get_task(path, "k80x2")
    changed_copy("cifar10_cnn", path, "Relu", "Sigmoid")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a coarse clock still sees it
    second = get_task(path, "k80x2")
    assert first.id != second.id and "Sigmoid" in second.graph.op_types


# --- clusters and optimizers --------------------------------------------------------------------------


def test_a_cluster_that_is_not_the_preset_does_not_take_its_name(tmp_path):
    preset = load_cluster("k80x4")
    graph = load_graph("cifar10_cnn")
    slower = dataclasses.replace(preset, link_latency=preset.link_latency * 3)
    assert slower.name == "k80x4"
    task_id = make_task(graph, slower).id
    assert task_id == f"cifar10_cnn/k80x4@{slower.content_sha256[:HASH_DIGITS]}/train"
    # A JSON file with the preset's figures is the preset; one figure changed, it is not.
    data = cluster_to_dict(preset)
    (tmp_path / "k80x4.json").write_text(json.dumps(data))
    assert get_task("cifar10_cnn", tmp_path / "k80x4.json").id == "cifar10_cnn/k80x4/train"
    data["devices"][1]["memory"] /= 2
    (tmp_path / "small.json").write_text(json.dumps(data))
    assert get_task("cifar10_cnn", tmp_path / "small.json").id.startswith("cifar10_cnn/k80x4@")


def test_the_optimizer_is_part_of_a_training_id():
    ids = {optimizer: get_task("cifar10_cnn", "k80x2", optimizer=optimizer).id
           for optimizer in ("adam", "momentum", "sgd")}
    assert ids == {
        "adam": "cifar10_cnn/k80x2/train",
        "momentum": "cifar10_cnn/k80x2/train+momentum",
        "sgd": "cifar10_cnn/k80x2/train+sgd",
    }
    # Inference has no update ops: the id says nothing of an optimizer, and one is refused.
    assert get_task("cifar10_cnn", "k80x2", "inference").id == "cifar10_cnn/k80x2/inference"
    with pytest.raises(ValueError, match="optimizer 'sgd' applies to a training step"):
        get_task("cifar10_cnn", "k80x2", "inference", optimizer="sgd")


# --- parsing ids ----------------------------------------------------------------------------------------


def test_parse_task_id_round_trips_named_ids_and_explains_hashed_ones(tmp_path, monkeypatch):
    for task_id in ("cifar10_cnn/k80x2/train", "cifar10_cnn/k80x2/inference", "cifar10_cnn/k80x2/train+sgd",
                    "cifar10_cnn/cpu2/train"):
        assert parse_task_id(task_id).id == task_id
    # A bare file name in the working directory was accepted as a graph, and still is.
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(BUNDLED_GRAPHS_DIR / "cifar10_cnn.onnx", tmp_path / "mine.onnx")
    assert parse_task_id("mine.onnx/k80x2/train").graph.name == "mine"
    with pytest.raises(ValueError, match=r"graph 'mine@0123456789ab' is not a graph bundled.*built from"):
        parse_task_id("mine@0123456789ab/k80x2/train")
    with pytest.raises(ValueError, match=r"cluster 'k80x4@0123456789ab' is not a preset.*built from"):
        parse_task_id("cifar10_cnn/k80x4@0123456789ab/train")
    with pytest.raises(ValueError, match="only a training step has an optimizer"):
        parse_task_id("cifar10_cnn/k80x2/inference+sgd")
    with pytest.raises(ValueError, match="graph/cluster/objective"):
        parse_task_id("cifar10_cnn/k80x2")


def test_a_ray_pool_reads_task_ids_as_parse_task_id_does():
    from placement_gym.real.distributed import as_task_spec

    assert as_task_spec("cifar10_cnn/k80x2/train+sgd").build().id == "cifar10_cnn/k80x2/train+sgd"
    with pytest.raises(ValueError, match="built from"):
        as_task_spec("mine@0123456789ab/k80x2/train")


# --- resume ---------------------------------------------------------------------------------------------


def train_argv(graph, out, budget: int, *extra: str) -> list[str]:
    return ["train", "--agent", "random-search", "--graph", str(graph), "--cluster", "k80x2", "--budget",
            str(budget), "--quiet", "--out", str(out), *extra]


def test_resume_refuses_a_checkpoint_of_another_graph_with_the_same_name(tmp_path, capsys):
    pytest.importorskip("torch")
    other = tmp_path / "cifar10_cnn.onnx"
    changed_copy("cifar10_cnn", other, "Relu", "Sigmoid")
    out = tmp_path / "run"
    assert main(train_argv("cifar10_cnn", out, 4)) == 0
    capsys.readouterr()
    assert main(train_argv(other, out, 8, "--resume")) == 2
    error = capsys.readouterr().err
    assert "cifar10_cnn/k80x2/train" in error and "cifar10_cnn@" in error
    # The run of the bundled graph itself still resumes.
    assert main(train_argv("cifar10_cnn", out, 8, "--resume", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["evaluations"] == 8


def test_default_run_folders_of_two_graphs_of_one_name_differ(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    other = tmp_path / "cifar10_cnn.onnx"
    changed_copy("cifar10_cnn", other, "Relu", "Sigmoid")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))  # the default run folders: <root>/runs/
    for graph in ("cifar10_cnn", other):
        assert main(["train", "--agent", "random-search", "--graph", str(graph), "--cluster", "k80x2",
                     "--budget", "2", "--quiet"]) == 0
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_resume_checks_the_recorded_content_not_only_the_id(tmp_path):
    torch = pytest.importorskip("torch")
    from baselines.learning import train

    task = get_task("cifar10_cnn", "k80x2")
    train("random-search", task, 4, out_dir=tmp_path, progress=False)
    checkpoint = tmp_path / "checkpoint.pt"
    state = torch.load(checkpoint, weights_only=False)
    state["task_identity"]["graph_sha256"] = "0" * 64  # same id, other content
    torch.save(state, checkpoint)
    both = f"graph_sha256 '{'0' * 64}' there, '{task.graph.content_sha256}' here"
    with pytest.raises(ValueError, match=both):
        train("random-search", task, 8, out_dir=tmp_path, resume=True, progress=False)
    del state["task_identity"]  # a checkpoint that does not say what it was made on
    torch.save(state, checkpoint)
    with pytest.raises(ValueError, match="does not record the content of its task"):
        train("random-search", task, 8, out_dir=tmp_path, resume=True, progress=False)


# --- profiles -------------------------------------------------------------------------------------------


def hand_profile(graph, device_names) -> dict:
    """A profile in the file format with made-up times, as `measure_profile` would write for ``graph``."""
    from placement_gym.real.profile import PROFILE_FORMAT, graph_digest

    rng = np.random.default_rng(0)
    return {
        "format": PROFILE_FORMAT,
        "key": "0123456789abcdef",
        "graph": {"name": graph.name, "sha256": graph_digest(graph), "n_ops": graph.n_ops},
        "batch": None,
        "optimizer": "adam",
        "devices": [{"name": n, "torch_device": "cpu", "kind": "cpu", "host": "test", "torch_version": "0"}
                    for n in device_names],
        "forward_s": {op: {d: float(rng.uniform(1e-5, 1e-3)) for d in device_names} for op in graph.op_names},
        "link_bandwidth": {s: {d: 1e10 for d in device_names if d != s} for s in device_names},
        "link_latency": {s: {d: 1e-5 for d in device_names if d != s} for s in device_names},
        "created": "2026-01-01T00:00:00+00:00",
    }


def test_a_cached_profile_of_another_graph_is_not_used(tmp_path, monkeypatch, other_bert):
    from placement_gym.real.profile import ProfileError, find_profile, save_profile
    from placement_gym.real.profiled import profiled_task

    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path / "cache"))
    cluster = load_cluster("k80x2")
    names = list(cluster.device_names)
    # Built in Python: same name, ops and edges, but every tensor twice as large.
    graph = layered_graph(30, seed=0)
    bigger = dataclasses.replace(graph, tensor_bytes=graph.tensor_bytes * 2)
    save_profile(hand_profile(graph, names))
    assert find_profile(graph, names) is not None
    assert find_profile(bigger, names) is None
    with pytest.raises(ProfileError, match="not task"):
        profiled_task(make_task(bigger, cluster), hand_profile(graph, names))
    # From files: the bundled BERT-base's profile is not the one of another bert_base.onnx.
    save_profile(hand_profile(load_graph("bert_base"), names))
    assert find_profile(load_graph("bert_base"), names) is not None
    assert find_profile(load_graph(other_bert), names) is None


def test_content_hash_tells_values_apart_by_type_and_structure():
    from placement_gym.common.content_hash import dataclass_sha256

    @dataclasses.dataclass(frozen=True)
    class Holder:
        label: str
        value: object

    def digest(value) -> str:
        return dataclass_sha256(Holder("ignored", value), exclude=("label",))

    assert digest(("ab", "c")) != digest(("a", "bc"))
    assert digest(np.array([1, 2], np.int32)) != digest(np.array([1, 2], np.int64))
    assert digest(np.zeros((2, 3))) != digest(np.zeros((3, 2)))
    assert len({digest(1), digest(1.0), digest(True), digest("1")}) == 4
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1}) != digest({"a": 2, "b": 1})
    assert dataclass_sha256(Holder("x", 1), ("label",)) == dataclass_sha256(Holder("y", 1), ("label",))
