"""Graph datasets: each graph is made the same wherever it is built, the manifests match their frozen
digests, the splits hold what they promise, and every family's graphs compile into tasks the cost
model runs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import check_cli_heft_runtime

from placement_gym.cli import main
from placement_gym.cluster import load_cluster
from placement_gym.cost_model import reference_simulate, simulate
from placement_gym.datasets import DATASETS, dataset_graph, dataset_split, get_dataset
from placement_gym.datasets.families import VOCABULARY, enas_rnn_graph
from placement_gym.task.compiled import make_task

FULL, MINI = get_dataset("synthetic-v1"), get_dataset("synthetic-mini-v1")
SAMPLE = ["regal-0", "regal-5", "regal-4321", "enas-conv-0", "enas-conv-1999", "enas-rnn-7", "enas-rnn-1500"]


def test_a_graph_is_the_same_wherever_it_is_built():
    here = {graph_id: FULL.graph(graph_id).content_sha256 for graph_id in SAMPLE}
    assert here == {graph_id: FULL.graph(graph_id).content_sha256 for graph_id in SAMPLE}
    code = ("import json; from placement_gym.datasets import get_dataset; d = get_dataset('synthetic-v1'); "
            f"print(json.dumps({{i: d.graph(i).content_sha256 for i in {SAMPLE!r}}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == here
    assert len(set(here.values())) == len(SAMPLE)


def test_the_manifest_is_checked_against_its_frozen_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    rows = dataclasses.replace(MINI).manifest(progress=False)
    assert len(rows) == len(MINI) and MINI.manifest_path.is_file()
    assert [row.id for row in rows] == MINI.ids("all")
    assert rows[3] == MINI.record(rows[3].id)
    # the same definition with other graphs (another grid) is not this dataset
    regal = dataclasses.replace(MINI.families[0], grid={"ops": (30, 60, 90, 121)})
    changed = dataclasses.replace(MINI, families=(regal, *MINI.families[1:]))
    with pytest.raises(ValueError, match="are not the dataset's"):
        changed.build_manifest(progress=False)
    # an edited cache is built again, not read
    MINI.manifest_path.write_text(MINI.manifest_path.read_text().replace('"ops": 30', '"ops": 31', 1))
    assert dataclasses.replace(MINI).manifest(progress=False) == rows


def test_the_splits_hold_what_they_promise():
    for dataset in DATASETS.values():
        splits = {split: dataset.ids(split) for split in ("train", "valid", "test-sizes", "test-families")}
        every = [graph_id for ids in splits.values() for graph_id in ids]
        assert sorted(every) == sorted(dataset.ids("all")) and len(set(every)) == len(dataset)
        assert sorted(dataset.ids("test")) == sorted(splits["test-sizes"] + splits["test-families"])
        family = {graph_id: graph_id.rsplit("-", 1)[0] for graph_id in every}
        seen = {family[i] for i in splits["train"] + splits["valid"]}
        assert seen and not seen & set(dataset.held_out_families)
        assert {family[i] for i in splits["test-families"]} == set(dataset.held_out_families)
        for spec in dataset.families:
            if spec.family in dataset.held_out_families:
                continue
            largest = spec.largest_size
            size = {f"{spec.family}-{k}": spec.params(k)[spec.size_key] for k in range(spec.n_graphs)}
            assert {size[i] for i in splits["test-sizes"] if family[i] == spec.family} == {largest}
            seen_sizes = {size[i] for i in splits["train"] + splits["valid"] if family[i] == spec.family}
            assert largest not in seen_sizes
        if len(dataset) >= 90:  # a handful of graphs may hold no valid graph
            assert 0 < len(splits["valid"]) < len(splits["train"]) / 10
    assert len(FULL) == 10_000 and len(FULL.ids("test-families")) == 2000


@pytest.mark.parametrize("graph_id", MINI.ids("all")[::9])
def test_every_family_compiles_into_tasks_the_cost_model_runs(graph_id):
    graph = MINI.graph(graph_id)
    task = make_task(graph, load_cluster("k80x4"), "train_step")
    placement = np.arange(task.n_forward) % task.n_devices
    fast, reference = simulate(task, placement), reference_simulate(task, placement)
    assert fast.runtime == pytest.approx(reference.runtime, rel=1e-9) and fast.runtime > 0
    assert graph.name == f"synthetic-mini-v1:{graph_id}"
    assert dataset_graph(graph.name).content_sha256 == graph.content_sha256


def test_the_recurrent_cell_costs_what_its_definition_says():
    """One step, one node, hidden 2, batch 1, by hand: embedding, the input matmul over [x, h]
    (2 x 1 x 2 x 4 FLOPs), the node's matmul (2 x 1 x 2 x 2), its activation, the mean of the loose
    node, the logits (2 x 1 x 2 x VOCABULARY) and the log-softmax (5 per logit)."""
    graph = enas_rnn_graph({"nodes": 1, "hidden": 2, "steps": 1, "batch": 1}, 0, "rnn")
    kinds = [name.split("/")[-1] for name in graph.op_names]
    assert kinds[:3] == ["embed", "input", "matmul"] and kinds[-3:] == ["mean", "logits", "softmax"]
    flops = dict(zip(kinds, graph.flops.tolist()))
    assert flops["input"] == 2 * 2 * 4 and flops["matmul"] == 2 * 2 * 2
    assert flops["logits"] == 2 * 2 * VOCABULARY and flops["softmax"] == 5 * VOCABULARY
    # parameters: the embedding, the input weights [x, h] -> h, the node's, the output projection
    assert graph.param_bytes.sum() == 4 * (VOCABULARY * 2 + 2 * 2 * 2 + 2 * 2 + 2 * VOCABULARY)


def test_bad_names_and_ids_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown dataset 'synthetic-v2'.*did you mean 'synthetic-v1'"):
        get_dataset("synthetic-v2")
    with pytest.raises(ValueError, match="unknown split 'tran'; allowed: train, valid"):
        dataset_split("synthetic-mini-v1:tran")
    for bad in ("regal-90", "regal-01", "regal--1", "nope-1", "regal", "regal/1", 3):
        with pytest.raises(ValueError, match="dataset synthetic-mini-v1 has no graph"):
            MINI.graph(bad)
    dataset, ids = dataset_split("synthetic-mini-v1:test")
    assert dataset is MINI and ids == MINI.ids("test")


def test_the_command_lists_and_builds_the_datasets(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    assert main(["datasets", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(listed) == set(DATASETS)
    assert listed["synthetic-v1"]["graphs"] == 10_000 and listed["synthetic-v1"]["families"] == [
        "regal", "enas-conv", "enas-rnn"]
    assert sum(listed["synthetic-mini-v1"]["splits"].values()) == 90
    assert not listed["synthetic-mini-v1"]["built"]
    assert main(["datasets", "--build", "synthetic-mini-v1"]) == 0
    out = capsys.readouterr().out
    manifest = tmp_path / "datasets" / "synthetic-mini-v1" / "manifest.json"
    ops = [row["ops"] for row in json.loads(manifest.read_text())["graphs"]]
    assert f"90 graphs of {min(ops)} to {max(ops)} ops" in out
    assert main(["datasets", "--json"]) == 0
    assert {row["name"]: row["built"] for row in json.loads(capsys.readouterr().out)}["synthetic-mini-v1"]


def test_random_clusters_are_seeded_varied_and_run():
    from placement_gym.datasets.clusters import TEST_CLUSTERS, TRAIN_CLUSTERS, cluster_ids, family_cluster

    clusters = [family_cluster(f"random-v1:{k}") for k in range(120)]
    sizes = {c.n_devices for c in clusters}
    assert min(sizes) == 2 and max(sizes) == 16
    assert len({c.description.split(" topology")[0].rsplit(", ", 1)[-1] for c in clusters}) == 3
    mixed = [c for c in clusters if "+" in c.description.split("GPU(s) (")[1].split(")")[0]]
    assert 10 < len(mixed) < 110  # two generations in some, one in others
    again = family_cluster("random-v1:17")
    assert np.array_equal(again.link_bandwidth, clusters[17].link_bandwidth)
    assert again.device_names == clusters[17].device_names and again.name == "random-v1:17"
    for cluster in clusters[:12]:
        bandwidth = cluster.link_bandwidth[~np.eye(cluster.n_devices, dtype=bool)]
        assert np.all(bandwidth > 0) and np.array_equal(cluster.link_bandwidth, cluster.link_bandwidth.T)
        task = make_task(MINI.graph("enas-conv-3"), cluster, "train_step")
        placement = np.arange(task.n_forward) % task.n_devices
        assert simulate(task, placement).runtime == pytest.approx(reference_simulate(task, placement).runtime,
                                                                   rel=1e-9)
    assert len(cluster_ids("train")) == TRAIN_CLUSTERS and len(cluster_ids("test")) == TEST_CLUSTERS
    assert not set(cluster_ids("train")) & set(cluster_ids("test"))
    for bad in ("random-v1:x", "random-v2:1", "random-v1:01", "random-v1:-1", "random-v1/1"):
        with pytest.raises(ValueError, match="a family cluster's name is random-v1:<k>"):
            family_cluster(bad)


@pytest.mark.slow
def test_the_full_dataset_builds_to_its_frozen_manifest(tmp_path, monkeypatch):
    """Every one of synthetic-v1's 10,000 graphs built (about 47 s on the 2-core machine) matches the
    frozen manifest digest, and the op counts span what the dataset says."""
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    rows = dataclasses.replace(FULL).manifest(progress=False)
    assert len(rows) == 10_000 and min(r.ops for r in rows) == 50 and max(r.ops for r in rows) == 1600


def test_dataset_graphs_and_family_clusters_are_names_tasks_envs_and_the_cli_take(capsys):
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import placement_gym as pg

    task = pg.get_task("synthetic-mini-v1:enas-conv-7", "random-v1:3")
    assert task.id == "synthetic-mini-v1:enas-conv-7/random-v1:3/train"  # names, not content hashes
    assert pg.parse_task_id(task.id) is task
    assert task.graph.content_sha256 == MINI.graph("enas-conv-7").content_sha256
    # the same content under another name is not the dataset's graph: its id carries the hash
    renamed = dataclasses.replace(MINI.graph("enas-conv-8"), name="synthetic-mini-v1:enas-conv-7")
    assert "@" in make_task(renamed, task.cluster, "train_step").id
    for env_id in ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0"):
        env = gym.make(env_id, graph="synthetic-mini-v1:regal-5", cluster="random-v1:8")
        check_env(env.unwrapped, skip_render_check=True)
        assert env.unwrapped.task.id == "synthetic-mini-v1:regal-5/random-v1:8/train"
    check_cli_heft_runtime("synthetic-mini-v1:enas-rnn-4", "random-v1:2", capsys)
    with pytest.raises(ValueError, match="dataset synthetic-mini-v1 has no graph 'regal-999'"):
        pg.get_task("synthetic-mini-v1:regal-999", "k80x2")
